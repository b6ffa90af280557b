package fence

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/exitcode"
)

// The test binary is also the fenced child: FENCE_TEST_CHILD names what
// it does.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FENCE_TEST_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	goleak.VerifyTestMain(m)
}

func child(mode string) int {
	rep, err := FromEnv()
	if err != nil || (rep == nil) != (mode == "unfenced") {
		return 99
	}
	if os.Getenv(EnvFD) != "" {
		return 98 // the claim must not reach what the node starts
	}
	ready := os.Getenv("FENCE_TEST_READY")
	switch mode {
	case "stop":
		// A node that reported a deadline, started a sandbox-like
		// grandchild, then was paused.
		gc := exec.Command("sleep", "60")
		if gc.Start() != nil {
			return 97
		}
		_ = os.WriteFile(ready, []byte(strconv.Itoa(gc.Process.Pid)), 0o600)
		_ = rep.Report(time.Now().Add(300 * time.Millisecond))
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(time.Minute)
		return 0
	case "renew":
		for i := 0; i < 8; i++ {
			_ = rep.Report(time.Now().Add(300 * time.Millisecond))
			time.Sleep(100 * time.Millisecond)
		}
		return 7
	case "lost":
		_ = rep.Report(time.Now().Add(time.Minute))
		return exitcode.LostLease
	case "term":
		_ = rep.Report(time.Now().Add(time.Minute))
		sig := make(chan os.Signal, 1)
		signalNotify(sig)
		_ = os.WriteFile(ready, []byte("ok"), 0o600)
		select {
		case <-sig:
			return 0
		case <-time.After(20 * time.Second):
			return 96
		}
	case "quiet":
		time.Sleep(500 * time.Millisecond) // never reports: nothing to fence
		return 0
	case "unfenced":
		return 0
	}
	return 95
}

func fenced(t *testing.T, mode string) (*exec.Cmd, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "FENCE_TEST_CHILD="+mode, "FENCE_TEST_READY="+ready)
	cmd.Stderr = os.Stderr
	return cmd, ready
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A paused node is killed with everything it started once its deadline
// passes, and the fence ends with the lost-lease status
// (interfaces.md "Cluster (phase 1)": exit 75).
func TestPausedNodeIsKilledAtItsDeadline(t *testing.T) {
	cmd, ready := fenced(t, "stop")
	start := time.Now()
	code, err := Parent(cmd, quiet())
	took := time.Since(start)
	if err != nil || code != exitcode.LostLease {
		t.Fatalf("Parent = %d, %v; want %d", code, err, exitcode.LostLease)
	}
	if took > 10*time.Second {
		t.Errorf("fenced after %v; the deadline was 300 ms away", took)
	}
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	gc, _ := strconv.Atoi(string(b))
	if gc <= 0 {
		t.Fatalf("grandchild pid %q", b)
	}
	// Gone or a zombie waiting for a reaper: either way it runs no more.
	deadline := time.Now().Add(5 * time.Second)
	for alive(gc) {
		if time.Now().After(deadline) {
			t.Fatalf("the node's child %d outlived the fence", gc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A node that keeps renewing is never fenced: its own status is the fence's.
func TestRenewingNodeIsLeftAlone(t *testing.T) {
	cmd, _ := fenced(t, "renew")
	if code, err := Parent(cmd, quiet()); err != nil || code != 7 {
		t.Fatalf("Parent = %d, %v; want 7", code, err)
	}
}

// A node that noticed its lost lease itself exits 75; the fence passes it on.
func TestLostLeaseStatusPassesThrough(t *testing.T) {
	cmd, _ := fenced(t, "lost")
	if code, err := Parent(cmd, quiet()); err != nil || code != exitcode.LostLease {
		t.Fatalf("Parent = %d, %v; want 75", code, err)
	}
}

// Before its first report a node owns nothing: it is not fenced.
func TestNoReportNoFence(t *testing.T) {
	cmd, _ := fenced(t, "quiet")
	if code, err := Parent(cmd, quiet()); err != nil || code != 0 {
		t.Fatalf("Parent = %d, %v; want 0", code, err)
	}
}

// SIGTERM to the fence reaches the node (a graceful leave), whose status
// is returned.
func TestTermReachesTheNode(t *testing.T) {
	cmd, ready := fenced(t, "term")
	go func() {
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(ready); err == nil {
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if code, err := Parent(cmd, quiet()); err != nil || code != 0 {
		t.Fatalf("Parent = %d, %v; want 0 (the node left on SIGTERM)", code, err)
	}
}

// A process not started by a fence has no reporter, and Report on none is a no-op.
func TestUnfenced(t *testing.T) {
	os.Unsetenv(EnvFD)
	rep, err := FromEnv()
	if err != nil || rep != nil {
		t.Fatalf("FromEnv = %v, %v", rep, err)
	}
	if err := rep.Report(time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvFD, "x")
	if _, err := FromEnv(); err == nil {
		t.Fatal("a bad descriptor was accepted")
	}
}

func signalNotify(c chan os.Signal) { signal.Notify(c, syscall.SIGTERM) }
