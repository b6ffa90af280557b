package lineedit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
)

// History is the messages sent before, oldest first, kept in a file (one
// JSON string per line, so a message of many lines is one entry) when it
// has one. Adding appends one line; at twice the bound the file is
// rewritten with the newest MaxHistory entries (atomically: temp file,
// rename). Entries over maxEntry bytes are not kept.
type History struct {
	mu      sync.Mutex
	path    string
	entries []string
	lines   int // lines in the file
}

// MaxHistory is how many messages a history keeps.
const MaxHistory = 1000

const maxEntry = 64 << 10

// LoadHistory reads path's history (an absent or unreadable file is an
// empty history; a line that is not a JSON string is skipped). path ""
// keeps the history in memory only.
func LoadHistory(path string) *History {
	h := &History{path: path}
	if path == "" {
		return h
	}
	f, err := os.Open(path)
	if err != nil {
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4*maxEntry)
	for sc.Scan() {
		h.lines++
		var s string
		if json.Unmarshal(sc.Bytes(), &s) == nil && s != "" {
			h.entries = append(h.entries, s)
		}
	}
	if len(h.entries) > MaxHistory {
		h.entries = h.entries[len(h.entries)-MaxHistory:]
	}
	return h
}

// Len is the number of entries.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}

// At is entry i (0 the oldest).
func (h *History) At(i int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.entries[i]
}

// Add appends s (unless it repeats the newest entry) and saves it. A
// failure to save loses only the saved copy: the chat goes on.
func (h *History) Add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(s) > maxEntry || (len(h.entries) > 0 && h.entries[len(h.entries)-1] == s) {
		return
	}
	h.entries = append(h.entries, s)
	if len(h.entries) > MaxHistory {
		h.entries = h.entries[len(h.entries)-MaxHistory:]
	}
	if h.path == "" {
		return
	}
	if h.lines+1 > 2*MaxHistory {
		h.rewrite()
		return
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	b, _ := json.Marshal(s)
	if _, err := f.Write(append(b, '\n')); err == nil {
		h.lines++
	}
}

func (h *History) rewrite() {
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".history-*")
	if err != nil {
		return
	}
	w := bufio.NewWriter(tmp)
	for _, e := range h.entries {
		b, _ := json.Marshal(e)
		w.Write(append(b, '\n'))
	}
	if w.Flush() != nil || tmp.Close() != nil || os.Rename(tmp.Name(), h.path) != nil {
		os.Remove(tmp.Name())
		return
	}
	h.lines = len(h.entries)
}
