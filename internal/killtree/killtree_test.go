package killtree

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid runs (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// start runs script in a new process group and returns it, a channel
// closed when it is reaped, and the pids it prints (one per line), once
// there are n.
func start(t *testing.T, script string, n int) (*exec.Cmd, <-chan struct{}, []int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var pids []int
	buf := make([]byte, 256)
	var acc string
	for len(pids) < n {
		k, err := out.Read(buf)
		if err != nil {
			Kill(cmd.Process.Pid)
			_ = cmd.Wait()
			t.Fatalf("read pids: %v (have %v)", err, pids)
		}
		acc += string(buf[:k])
		pids = pids[:0]
		for _, f := range strings.Fields(acc) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
	}
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			Kill(cmd.Process.Pid)
			<-done
		}
	})
	return cmd, done, pids
}

// TestKillReachesSetsidGrandchildren: Kill ends the process, a child in
// its group and a grandchild that left the group with setsid — the
// descendants walk finds what the group kill misses. spec: X12
func TestKillReachesSetsidGrandchildren(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	cmd, done, pids := start(t, `sleep 60 & echo $!; setsid sh -c 'echo $$; exec sleep 60' & wait`, 2)
	if got := Descendants(cmd.Process.Pid); len(got) < 2 {
		t.Fatalf("descendants %v, want the two sleeps", got)
	}
	Kill(cmd.Process.Pid)
	<-done
	waitGone(t, pids...)
}

// The walk over every process's stat (a kernel without the children
// files) finds what the children files find.
func TestDescendantsByStat(t *testing.T) {
	cmd, done, _ := start(t, `sleep 60 & echo $!; sh -c 'echo $$; sleep 60; :' & wait`, 2)
	// The inner sleep may still be starting: compare once both see it.
	var want, got []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		want, got = Descendants(cmd.Process.Pid), byStat(cmd.Process.Pid)
		slices.Sort(want)
		slices.Sort(got)
		if len(want) >= 3 && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("by stat %v, by the children files %v", got, want)
		}
	}
	Kill(cmd.Process.Pid)
	<-done
}

// byStat is Descendants as it walks where the children files are missing.
func byStat(pid int) []int {
	kids := parents()
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		out = append(out, kids[cur]...)
		queue = append(queue, kids[cur]...)
	}
	return out
}

// TestTermGroupEscalates: a group that traps SIGTERM is SIGKILLed after
// the grace; one that exits on SIGTERM returns before it. spec: X12
func TestTermGroupEscalates(t *testing.T) {
	cmd, _, pids := start(t, `trap '' TERM; echo $$; while :; do sleep 0.05; done`, 1)
	t0 := time.Now()
	TermGroup(cmd.Process.Pid, 300*time.Millisecond)
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("returned after %v, before the grace, with a group that ignores SIGTERM", d)
	}
	waitGone(t, pids...)

	cmd2, _, pids2 := start(t, `echo $$; exec sleep 60`, 1)
	t0 = time.Now()
	TermGroup(cmd2.Process.Pid, 10*time.Second)
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("waited %v for a group that exits on SIGTERM", d)
	}
	waitGone(t, pids2...)
	if GroupAlive(cmd2.Process.Pid) {
		t.Error("group alive after TermGroup")
	}
}
