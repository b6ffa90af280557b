package runprep

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/toolctx"
)

// tools.json lives in the session directory, which the sandbox may write.
// A FIFO planted there must not hang the host's run preparation (the run
// actor calls ToolContext before every send) — it is refused like any other
// non-regular file, and a symlink is not followed.
// spec: K5 X5
func TestToolContextRefusesAgentPlantedFIFOAndSymlink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, toolctx.StateFileName)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ToolContext(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO tools.json was accepted")
		}
	case <-time.After(3 * time.Second):
		if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("ToolContext blocked on a FIFO tools.json (the run never starts)")
	}
	os.Remove(p)
	other := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(other, []byte(`{"version":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, p); err != nil {
		t.Fatal(err)
	}
	if _, err := ToolContext(dir); err == nil {
		t.Fatal("a symlinked tools.json was followed")
	}
}
