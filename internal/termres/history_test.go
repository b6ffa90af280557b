package termres

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon reads only the tail of events.jsonl: a file far larger than
// HistoryTail (attach/detach noise, or a forged history) is never read
// whole, a line cut by the tail is skipped, and the newest events decide.
func TestReadHistoryBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	line := func(v any) []byte { b, _ := json.Marshal(v); return append(b, '\n') }
	var buf bytes.Buffer
	// An old generation 99 far before the tail must not count.
	buf.Write(line(map[string]any{"type": EventAgentStart, "generation": 99}))
	noise := line(map[string]any{"type": "resized", "cols": 80, "rows": 24, "reason": strings.Repeat("x", 200)})
	for buf.Len() < 3*HistoryTail {
		buf.Write(noise)
	}
	buf.Write(line(map[string]any{"type": EventAgentStart, "generation": 7}))
	buf.Write(line(map[string]any{"type": "attached"}))
	buf.Write(line(map[string]any{"type": "exited", "status": 3}))
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	h := ReadHistory(dir)
	if h.LastGeneration != 7 || !h.ExitedSince || h.Clients != 1 || h.LastStatus == nil || *h.LastStatus != 3 {
		t.Errorf("history from the tail: %+v", h)
	}
	b, err := readTail(p, HistoryTail)
	if err != nil || int64(len(b)) > HistoryTail || len(b) == 0 || b[0] != '{' {
		t.Errorf("tail: %d bytes, first %q, %v", len(b), b[:min(len(b), 1)], err)
	}
	// A short file is read whole; a symlink is not followed.
	os.WriteFile(p, line(map[string]any{"type": EventAgentStart, "generation": 2}), 0o600)
	if h := ReadHistory(dir); h.LastGeneration != 2 {
		t.Errorf("short file: %+v", h)
	}
	os.Remove(p)
	os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), p)
	if _, err := readTail(p, HistoryTail); err == nil {
		t.Error("readTail followed a symlink")
	}
}
