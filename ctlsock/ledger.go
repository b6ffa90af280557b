package ctlsock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

// ErrSeen is returned by Ledger.Consume for a request id already consumed.
var ErrSeen = errors.New("request id already used")

// LedgerPath is where the daemon keeps the request-id ledger:
// $CTX_ROOT/home/<uid>/control-ledger.jsonl. It is daemon-owned state, never
// inside an agent home (which sandboxes mount writable at /home/agent) nor
// in agent/<name>.d (agent-visible configuration), and unlike
// $CTX_RUNTIME_DIR it survives logout and reboot. spec: U5
func LedgerPath(l layout.Layout) string {
	return filepath.Join(l.Root, "home", strconv.Itoa(l.UID), "control-ledger.jsonl")
}

// LedgerRecord is one line of the ledger. A consume line is written (and
// fsynced) before the control file is touched; a result line follows.
type LedgerRecord struct {
	RequestID string    `json:"request_id"`
	Time      time.Time `json:"time"`
	Event     string    `json:"event"` // "consume" or "result"
	UID       int       `json:"uid"`
	Agent     string    `json:"agent"`
	Session   string    `json:"session"`
	Run       string    `json:"run"`
	Control   string    `json:"control,omitempty"`
	PeerPID   int       `json:"peer_pid,omitempty"`
	Result    string    `json:"result,omitempty"` // "ok" or an errno
}

// Ledger is the durable set of consumed request ids (U5): an append-only
// JSONL file, reloaded at open. It is safe for concurrent use.
type Ledger struct {
	path string
	mu   sync.Mutex
	f    *os.File
	seen map[string]bool
}

// OpenLedger opens (creating, 0600, parent 0700) the ledger at path and
// loads every id it records. A torn last line (a crash mid-append, before
// any write it would have allowed) is dropped; any other malformed line is
// an error: the control socket fails closed rather than forget ids.
func OpenLedger(path string) (*Ledger, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	l := &Ledger{path: path, f: f, seen: map[string]bool{}}
	if err := l.load(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

func (l *Ledger) load() error {
	data, err := os.ReadFile(l.path)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	lines := bytes.Split(data, []byte("\n"))
	torn := len(data) > 0 && data[len(data)-1] != '\n'
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var rec LedgerRecord
		if err := json.Unmarshal(line, &rec); err != nil || rec.RequestID == "" {
			if torn && i == len(lines)-1 {
				break
			}
			return fmt.Errorf("ledger %s: line %d malformed: %q", l.path, i+1, line)
		}
		l.seen[rec.RequestID] = true
	}
	if torn {
		// Drop the torn tail so the next record starts on its own line.
		if err := l.f.Truncate(int64(bytes.LastIndexByte(data, '\n') + 1)); err != nil {
			return fmt.Errorf("ledger %s: truncate torn line: %w", l.path, err)
		}
	}
	return nil
}

// Seen says whether id was consumed.
func (l *Ledger) Seen(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[id]
}

// Consume records rec.RequestID as used, durably, before it returns. It
// returns ErrSeen, writing nothing, if the id was already consumed. If the
// append fails the id still counts as seen in memory. spec: U5
func (l *Ledger) Consume(rec LedgerRecord) error {
	rec.Event = "consume"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[rec.RequestID] {
		return fmt.Errorf("request id %q: %w", rec.RequestID, ErrSeen)
	}
	l.seen[rec.RequestID] = true
	return l.appendLocked(rec)
}

// Result appends the outcome of a consumed request (for audit; not needed
// to refuse a replay).
func (l *Ledger) Result(rec LedgerRecord) error {
	rec.Event = "result"
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(rec)
}

func (l *Ledger) appendLocked(rec LedgerRecord) error {
	if l.f == nil {
		return fmt.Errorf("ledger %s: closed", l.path)
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("ledger %s: append: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("ledger %s: fsync: %w", l.path, err)
	}
	return nil
}

// Close closes the file; later appends fail.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
