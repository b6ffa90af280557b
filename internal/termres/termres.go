// Package termres keeps a session's terminal resource (runtime.md T5): a
// stable id and an append-only event history in <session>/terminal/, both
// outliving the PTY, its socket and its process.
package termres

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/ident"
)

// File names inside a terminal resource directory.
const (
	IDFile     = "id"
	EventsFile = "events.jsonl"
	SocketFile = "main.sock"
)

// Event types recorded in events.jsonl.
const (
	Created  = "created"
	Attached = "attached"
	Detached = "detached"
	Resized  = "resized"
	Exited   = "exited"
)

// ErrBadID is returned when an existing id file holds something that is not an id.
var ErrBadID = errors.New("bad terminal id")

// validID says whether id is `^term-[0-9a-f]{16}$` (no regexp: its
// sixteen-fold repetition compiled at every client's start).
func validID(id string) bool {
	hex, ok := strings.CutPrefix(id, "term-")
	return ok && len(hex) == 16 && ident.Valid(hex, lowerHex, lowerHex, -1)
}

var lowerHex = ident.NewClass("0-9a-f")

// Event is one line of events.jsonl. Type and TS are always present; the
// rest only where they mean something for that type.
type Event struct {
	Type   string    `json:"type"`
	TS     time.Time `json:"ts"`
	ID     string    `json:"id,omitempty"`     // the resource id
	Mode   string    `json:"mode,omitempty"`   // watch | attach
	PID    int       `json:"pid,omitempty"`    // peer pid, or the program's pid
	UID    *int      `json:"uid,omitempty"`    // peer uid
	Cols   int       `json:"cols,omitempty"`   //
	Rows   int       `json:"rows,omitempty"`   //
	Status *int      `json:"status,omitempty"` // exited: the program's status
	Reason string    `json:"reason,omitempty"` // detached: why
}

// Int is a helper for the optional int fields.
func Int(v int) *int { return &v }

// Ensure creates dir (0700) and its id once, atomically; later calls return
// the same id. spec: T5
func Ensure(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("termres.ensure: %w", err)
	}
	p := filepath.Join(dir, IDFile)
	if id, err := readID(p); err == nil || !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("termres.ensure: %w", err)
	}
	id := "term-" + hex.EncodeToString(b[:])
	// Create the id without replacing one a concurrent caller just made: a
	// hard link of a fully written temp file either appears whole or fails
	// with EEXIST.
	tmp := filepath.Join(dir, "."+IDFile+".new-"+id)
	if err := atomicfile.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("termres.ensure: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, os.ErrExist) {
			return readID(p)
		}
		return "", fmt.Errorf("termres.ensure: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return "", fmt.Errorf("termres.ensure: %w", err)
	}
	return id, nil
}

// ID returns the resource id, or an error wrapping os.ErrNotExist.
func ID(dir string) (string, error) { return readID(filepath.Join(dir, IDFile)) }

func readID(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("termres: %w", err)
	}
	id := strings.TrimSuffix(string(b), "\n")
	if !validID(id) {
		return "", fmt.Errorf("termres: %s: %q: %w", p, id, ErrBadID)
	}
	return id, nil
}

// Append adds one event to dir/events.jsonl. spec: T5
func Append(dir string, ev Event) error {
	return AppendFile(filepath.Join(dir, EventsFile), ev)
}

// AppendFile adds one event line to the JSONL file at path: TS is set if
// zero; the line goes out in one O_APPEND write, then fsync.
func AppendFile(path string, ev Event) error {
	if ev.Type == "" {
		return errors.New("termres.append: event without a type")
	}
	if ev.TS.IsZero() {
		ev.TS = time.Now().UTC()
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("termres.append: %w", err)
	}
	line = append(line, '\n')
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("termres.append: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("termres.append %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("termres.append %s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("termres.append %s: %w", path, err)
	}
	return nil
}

// Read returns the events of dir, oldest first. A missing file is no
// events; a torn last line (a crash mid-write) is skipped; a bad line
// elsewhere is an error.
func Read(dir string) ([]Event, error) {
	return ReadFile(filepath.Join(dir, EventsFile))
}

// ReadFile is Read for an events file at an explicit path.
func ReadFile(path string) ([]Event, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("termres.read: %w", err)
	}
	var out []Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			last := !bytes.HasSuffix(b, []byte("\n")) && bytes.HasSuffix(b, line)
			if last {
				break // torn tail
			}
			return out, fmt.Errorf("termres.read %s line %d: %w", path, lineNo, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("termres.read %s: %w", path, err)
	}
	return out, nil
}
