// Package systemd tests the systemd launcher and the socket-activated
// daemon (ctx.socket + ctx.service) against a real systemd user manager. It
// runs only inside the container run.sh boots (CTX_SYSTEMD_INNER=1,
// `make test-systemd`); elsewhere it skips.
package systemd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/supervisor"
)

func inner(t *testing.T) {
	if os.Getenv("CTX_SYSTEMD_INNER") != "1" {
		t.Skip("runs inside the systemd-nspawn container of `make test-systemd`")
	}
}

func show(t *testing.T, unit, prop string) string {
	out, _ := exec.Command("systemctl", "--user", "show", "--value", "--property="+prop, "--", unit).Output()
	return strings.TrimSpace(string(out))
}

// Start, status, adoption, stop and receipts through the user manager.
// spec: T1 L2 L3 L5
func TestSystemdLauncher(t *testing.T) {
	inner(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	roots, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: os.Getuid()}
	la, err := supervisor.SelectLauncher(context.Background(), roots, log)
	if err != nil {
		t.Fatal(err)
	}
	if la.Name() != supervisor.LauncherSystemd {
		t.Fatalf("auto selection chose %q with a user manager answering", la.Name())
	}
	if sl, ok := la.(*supervisor.SystemdLauncher); !ok || sl.Via() != "dbus" {
		t.Errorf("the systemd launcher does not use go-systemd's D-Bus API: %T", la)
	}
	unit := terminal.UnitName(l, "a", "s", 1)
	spec := terminal.LaunchSpec{
		Command: func(h terminal.Hold) ([]string, error) {
			// Held on the FIFO until the launch root is registered (U2,
			// ), then a backgrounded child that ignores
			// SIGHUP and SIGTERM: only the control group kill
			// (KillMode=control-group) ends it.
			return []string{"/bin/sh", "-c", "head -c1 <" + h.FIFO + " >/dev/null || exit 125; sh -c 'trap \"\" HUP TERM; exec sleep 1000' & exec sleep 1000"}, nil
		},
		HoldFIFO: l.Runtime + "/hold.fifo",
		Unit:     unit,
		Ident:    launchroot.Identity{UID: l.UID, Agent: "a", Session: "s", Run: "term-0123456789abcdef"},
		Receipt:  terminal.Receipt{Kind: terminal.KindLaunch, Role: "terminal", UID: l.UID, Agent: "a", Session: "s", Generation: 1, Terminal: "term-0123456789abcdef"},
	}
	t0 := time.Now()
	r, err := la.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started %s in %v: %+v", unit, time.Since(t0), r)
	if e := roots.Entries(); len(e) != 1 || e[0].PID != r.PID {
		t.Errorf("launch root not registered at start: %+v", e)
	}
	if r.Launcher != "systemd" || r.Unit != unit || r.Invocation == "" || r.PID <= 0 || !terminal.Alive(r) {
		t.Fatalf("receipt: %+v", r)
	}
	if got := show(t, unit, "InvocationID"); got != r.Invocation {
		t.Errorf("invocation %q, manager says %q", r.Invocation, got)
	}
	for prop, want := range map[string]string{"KillMode": "control-group", "SendSIGHUP": "yes", "ActiveState": "active", "MainPID": strconv.Itoa(r.PID)} {
		if got := show(t, unit, prop); got != want {
			t.Errorf("%s = %q, want %q", prop, got, want)
		}
	}
	if err := terminal.WriteReceipt(terminal.LaunchReceiptPath(l, "a", "s"), r); err != nil {
		t.Fatal(err)
	}
	// The next daemon: a fresh launcher adopts from the written receipt.
	back, err := terminal.ReadReceipt(terminal.LaunchReceiptPath(l, "a", "s"))
	if err != nil {
		t.Fatal(err)
	}
	la2, err := supervisor.NewSystemdLauncher(context.Background(), nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := la2.Adopt(context.Background(), back); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	var sleepers []int
	for i := 0; i < 100 && len(sleepers) < 2; i++ {
		sleepers = sleeps()
		time.Sleep(20 * time.Millisecond)
	}
	if len(sleepers) < 2 {
		t.Errorf("the unit runs %d sleep processes, want 2 (main and backgrounded)", len(sleepers))
	}
	done := make(chan terminal.Exit, 1)
	go func() { ex, _ := la2.Wait(context.Background(), back); done <- ex }()
	t1 := time.Now()
	if err := la2.Stop(context.Background(), back, time.Second); err != nil {
		t.Fatal(err)
	}
	var ex terminal.Exit
	select {
	case ex = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the unit did not stop")
	}
	t.Logf("stopped in %v: %+v", time.Since(t1), ex)
	for _, pid := range sleepers {
		waitGone(t, pid)
	}
	c := terminal.Cleanup(back, "stop", ex, time.Now())
	if err := terminal.WriteReceipt(terminal.CleanupReceiptPath(l, "a", "s"), c); err != nil {
		t.Fatal(err)
	}
	if got, err := terminal.ReadReceipt(terminal.CleanupReceiptPath(l, "a", "s")); err != nil || got.Kind != terminal.KindCleanup || got.Unit != unit || got.Invocation != r.Invocation {
		t.Errorf("cleanup receipt: %+v %v", got, err)
	}
	if err := la2.Adopt(context.Background(), back); !errors.Is(err, terminal.ErrGone) {
		t.Errorf("adopt after stop: %v", err)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("backgrounded child %d survived the stop (KillMode=control-group)", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleeps lists this user's "sleep 1000" processes.
func sleeps() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if string(b) == "sleep\x001000\x00" {
			out = append(out, pid)
		}
	}
	return out
}
