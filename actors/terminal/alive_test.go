package terminal

import (
	"os/exec"
	"testing"

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
