package terminal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression: a sandboxed tool (session dir writable, terminal/ absent so
// its read-only bind is skipped) plants terminal/id and a RELATIVE symlink
// terminal/events.jsonl -> ../../../../../../../agent/a.d/mount. The next
// `ctx agent start` creates the target through the link and binds it
// read-write into the terminal sandbox. Today events.jsonl is never bound
// (ctxterm writes it from the host). spec: T5 X7
func TestTerminalEventsSymlinkRefused(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	defer f.killAll()
	l := w.cfg.Layout
	dir := l.TerminalDir("a", "default")
	if err := os.MkdirAll(dir, 0o700); err != nil { // what the agent does from inside its sandbox
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "id"), []byte("term-0123456789abcdef\n"), 0o600)
	rel := "../../../../../../../agent/a.d/mount" // terminal→default→session→a→agent→<uid>→home→ROOT
	if err := os.Symlink(rel, filepath.Join(dir, "events.jsonl")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(l.AgentControl("a"), "mount")
	if _, err := os.Stat(target); err == nil {
		t.Fatal("precondition: .d/mount exists")
	}
	rec, held, shell, err := launch(context.Background(), w.cfg, f, "a", "default", w.ws)
	defer held.Ended()
	defer shell.release()
	if err != nil {
		t.Logf("launch refused (fixed): %v", err)
		return
	}
	defer f.Stop(context.Background(), rec, 0)
	if _, err := os.Stat(target); err == nil {
		t.Errorf("launch created %s through the planted symlink", target)
	}
	args := strings.Join(f.argv, " ")
	if strings.Contains(args, filepath.Join(dir, "events.jsonl")+" /") {
		t.Errorf("bwrap binds the planted symlink into the terminal sandbox (bwrap follows it to %s):\n%s", target, args)
	}
	b, _ := os.ReadFile(target)
	t.Logf(".d/mount now holds: %q", b)
}

// Regression: a terminal workspace inside CTX_ROOT is accepted (the
// agent socket refuses it), binding the agent's own .d/ controls writable.
func TestTerminalWorkspaceInsideRootRefused(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	defer f.killAll()
	l := w.cfg.Layout
	rec, _, _, err := launch(context.Background(), w.cfg, f, "a", "default", l.Root)
	if err != nil {
		t.Logf("refused (fixed): %v", err)
		return
	}
	defer f.Stop(context.Background(), rec, 0)
	args := strings.Join(f.argv, " ")
	if strings.Contains(args, "--bind "+l.Root+" /workspace") {
		t.Errorf("CTX_ROOT bound writable at /workspace in the terminal sandbox:\n%.400s", args)
	}
}
