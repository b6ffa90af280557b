package terminal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordEnd tries every step of a generation's end and reports each one it
// could not do: a cleanup receipt that cannot be written (here a directory
// stands at its path) is named in the error, and the steps after it are
// still done (the agent.stop event is in events.jsonl). spec: L3
func TestRecordEndReportsFailures(t *testing.T) {
	w := newWorld(t)
	l := w.cfg.Layout
	dir := l.TerminalDir("a", "default")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(CleanupReceiptPath(l, "a", "default"), "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := Receipt{Kind: "launch", Agent: "a", Session: "default", Terminal: "term-0123456789abcdef", Generation: 3, PID: 1 << 22}
	_, err := recordEnd(l, rec, "exited", Exit{Reason: "test"})
	if err == nil || !strings.Contains(err.Error(), "the cleanup receipt") {
		t.Fatalf("recordEnd error = %v, want one naming the cleanup receipt", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if !strings.Contains(string(b), EventAgentStop) {
		t.Errorf("the agent.stop event was not written after the failed step:\n%s", b)
	}
	// Nothing missing: no error (absent sockets and receipts are not failures).
	os.RemoveAll(CleanupReceiptPath(l, "a", "default"))
	if _, err := recordEnd(l, rec, "exited", Exit{Reason: "test"}); err != nil {
		t.Errorf("a clean end reported %v", err)
	}
}
