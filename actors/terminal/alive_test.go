package terminal

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/procstat"
)

// TestAliveNeedsStartTimeAndBoot: a receipt names a live process only when
// pid, start time and boot id all match — a reused pid is not the terminal.
// spec: L2, U2 (liveness that ignored the start time passed)
func TestAliveNeedsStartTimeAndBoot(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	st, err := procstat.Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := procstat.BootID()
	if err != nil {
		t.Fatal(err)
	}
	r := Receipt{PID: cmd.Process.Pid, StartTime: st.StartTime, BootID: boot}
	if !Alive(r) {
		t.Fatal("the live process is not alive")
	}
	for name, bad := range map[string]Receipt{
		"other start time": {PID: r.PID, StartTime: r.StartTime + 1, BootID: boot},
		"other boot":       {PID: r.PID, StartTime: r.StartTime, BootID: "not-this-boot"},
		"no pid":           {StartTime: r.StartTime, BootID: boot},
	} {
		if Alive(bad) {
			t.Errorf("%s: alive", name)
		}
	}
}

// A socket already at the path when a try starts is not the try's: the
// wait goes on until another appears, so neither a killed ctxterm's socket
// nor a live one the actor does not know of is taken for the new
// terminal's (nor removed: ctxterm refuses a live one). spec: T1 L6
func TestWaitSocketIsTheNewOne(t *testing.T) {
	p := filepath.Join(t.TempDir(), "main.sock")
	old, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	before := stampOf(p)
	if !before.socket {
		t.Fatal("no socket stamped")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	st, _ := procstat.Read(cmd.Process.Pid)
	boot, _ := procstat.BootID()
	r := Receipt{Socket: p, PID: cmd.Process.Pid, StartTime: st.StartTime, BootID: boot}
	done := make(chan error, 1)
	go func() { done <- waitSocket(context.Background(), r, os.DevNull, before) }()
	select {
	case err := <-done:
		t.Fatalf("the socket that was there before was taken: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	old.Close() // unlinks it
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the new socket: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new socket was not seen")
	}
}
