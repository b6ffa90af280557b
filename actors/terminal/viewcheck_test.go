package terminal

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/safefs"
)

// TestCheckViewOfStarted (spec: B1): a terminal's view is checked once
// its shell runs — the sandbox two processes below the one the launcher
// started (ctxterm → bwrap → the shell; here sh → bwrap → sleep): a
// protection in the directory the walk found it passes, one the walk
// found elsewhere is refused (bwrap.ErrMoved).
func TestCheckViewOfStarted(t *testing.T) {
	if _, err := exec.LookPath(bwrap.DefaultPath); err != nil {
		t.Skip("no bwrap")
	}
	ws := t.TempDir()
	git := filepath.Join(ws, "sub", ".git")
	if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := func(p string) safefs.Identity {
		i, err := safefs.StatID(p)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	cmd := exec.Command("/bin/sh", "-c", bwrap.DefaultPath+` --unshare-all --die-with-parent --ro-bind /usr /usr --ro-bind /bin /bin --ro-bind /lib /lib --ro-bind-try /lib64 /lib64 --bind "$1" "$1" --ro-bind "$2" "$2" /bin/sleep 30; true`, "sh", ws, git)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	good := bwrap.Anchor{Dst: git, Dir: id(filepath.Join(ws, "sub")), Mounted: id(git), Under: id(git)}
	pin, err := checkView(cmd.Process.Pid, []bwrap.Anchor{good}, 10*time.Second)
	if err != nil {
		t.Errorf("the view as the walk found it: %v", err)
	}
	pin.release()
	moved := good
	moved.Dir = id(ws)
	pin, err = checkView(cmd.Process.Pid, []bwrap.Anchor{moved}, 10*time.Second)
	if !errors.Is(err, bwrap.ErrMoved) || !strings.Contains(err.Error(), "not the directory the walk found") {
		t.Errorf("a protection the walk found elsewhere: %v, want ErrMoved", err)
	}
	pin.release()
	child, err := grandchild(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	pin, err = checkView(cmd.Process.Pid, nil, time.Second)
	if err != nil {
		t.Fatalf("no anchors: %v", err)
	}
	if pin == nil {
		t.Skip("no pidfd")
	}
	// The pin ends the sandboxed process (bwrap's child, not bwrap) and
	// returns once it is gone.
	pin.kill()
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
		t.Errorf("the pinned process %d still runs after kill: %s", child, st)
	}
	pin.kill() // a second kill (or release) of a pin does nothing
	pin.release()
}
