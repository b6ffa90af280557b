// Package sessions reads an agent's session logs as plain files, without
// the daemon and without writing them: one summary per
// session for `ctx agent sessions`, a transcript for `ctx agent history`,
// and the archive-then-delete removal behind `ctx agent rm-session`.
package sessions

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/segments"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// MaxLine bounds the memory one line of events.jsonl may take while it is
// read; a longer line is skipped and counted (no frame the daemon writes
// comes near it: see ipc.MaxFrameLine).
const MaxLine = ipc.MaxFrameLine

// Frame is one stored frame as a reader sees it: the host frame plus the
// optional `usage` object a `done` frame may carry. The
// usage keys are read as they are written — nothing is assumed about their
// names — and only integer values count.
type Frame struct {
	ipc.Frame
	Usage map[string]json.RawMessage `json:"usage,omitempty"`
}

// Tokens returns the integer fields of the frame's usage, or nil.
func (f *Frame) Tokens() map[string]int64 {
	var out map[string]int64
	for k, raw := range f.Usage {
		var n json.Number
		if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
			continue
		}
		v, err := n.Int64()
		if err != nil || v < 0 {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[k] = v
	}
	return out
}

// Stats says what a scan left out.
type Stats struct {
	// Skipped counts complete lines that are not frames, or longer than MaxLine.
	Skipped int
	// Torn is set when the file ends in a partial line: a write in
	// progress, or a crash the daemon repairs when it next opens the log.
	Torn bool
}

// Scan reads frames from r in order and calls fn with each. It holds one
// line at a time (at most MaxLine bytes), so a log of any size is read in
// bounded memory. Each frame is freshly decoded, so fn may keep it.
func Scan(r io.Reader, fn func(f *Frame)) (Stats, error) {
	var st Stats
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !over {
			if len(buf)+len(chunk) > MaxLine+1 {
				over, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			st.Torn = len(buf) > 0 || over
			return st, nil
		case err != nil:
			return st, err
		}
		if over {
			st.Skipped++
			over, buf = false, buf[:0]
			continue
		}
		var f Frame
		if json.Unmarshal(buf, &f) != nil || f.Type == "" {
			st.Skipped++
		} else {
			fn(&f)
		}
		buf = buf[:0]
	}
}

// ScanDir scans a session directory's log, opened read-only: its
// events.jsonl, or on a cluster's shared root its segmented chain
// (docs/cluster.md). A missing file is an empty log.
func ScanDir(dir string, fn func(f *Frame)) (Stats, error) {
	if inCluster(dir) {
		return scanChain(dir, fn)
	}
	f, err := os.Open(dir + "/" + store.EventsFile)
	if errors.Is(err, os.ErrNotExist) {
		return Stats{}, nil
	}
	if err != nil {
		return Stats{}, fmt.Errorf("session log: %w", err)
	}
	defer f.Close()
	st, err := Scan(f, fn)
	if err != nil {
		return st, fmt.Errorf("session log %s: %w", f.Name(), err)
	}
	return st, nil
}

// inCluster says whether dir is a session of a cluster's shared root: an
// ancestor holds the cluster's marker (layout.ClusterMarker) and dir has
// segments/. Only ancestors are asked: the session directory itself is
// writable from the agent's sandbox, so what it holds decides nothing.
func inCluster(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, segments.Dir)); err != nil {
		return false
	}
	for d, i := filepath.Dir(filepath.Clean(dir)), 0; i < 12; d, i = filepath.Dir(d), i+1 {
		if _, err := os.Lstat(filepath.Join(d, "cluster.json")); err == nil {
			return true
		}
		if d == "/" || d == "." {
			break
		}
	}
	return false
}

// scanChain scans a cluster session's chain; Torn says the newest
// segment ends in a partial line.
func scanChain(dir string, fn func(f *Frame)) (Stats, error) {
	c, err := store.OpenChain(dir)
	if err != nil {
		return Stats{}, err
	}
	defer c.Close()
	st, err := Scan(c.Reader(), fn)
	if err != nil {
		return st, fmt.Errorf("session log %s: %w", dir, err)
	}
	if segs := c.Segments(); len(segs) > 0 {
		last := segs[len(segs)-1]
		if fi, err := os.Stat(last.Path); err == nil && fi.Size() > last.End {
			st.Torn = true
		}
	}
	return st, nil
}
