package proc

import (
	"context"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/launchroot"
)

// The main goroutine stays on the process's first thread, its
// thread-group leader (TestMain's offLeader check needs it there).
func init() { runtime.LockOSThread() }

// leaderRun is what offLeader did when called on the leader itself, from
// TestMain: the thread f ran on, and whether the caller was the leader.
var leaderRun struct{ tid, caller int }

func TestMain(m *testing.M) {
	if dir := os.Getenv("PROC_TEST_HELD_DIR"); dir != "" {
		os.Exit(heldStarter(dir))
	}
	leaderRun.caller = unix.Gettid()
	ran := make(chan int, 1)
	offLeader(isLeader, func() { ran <- unix.Gettid(); runtime.UnlockOSThread() })
	leaderRun.tid = <-ran
	goleak.VerifyTestMain(m)
}

// TestOffLeader: the thread that enters a run's cgroup is never the
// process's thread-group leader (a v1 memcg OOM weighs leaders): called
// on the leader (TestMain, locked to it since init), offLeader runs its
// work on another thread; called elsewhere, on the caller's own.
func TestOffLeader(t *testing.T) {
	if leaderRun.caller != os.Getpid() {
		t.Fatalf("TestMain did not run on the leader (tid %d, pid %d)", leaderRun.caller, os.Getpid())
	}
	if leaderRun.tid == os.Getpid() || leaderRun.tid == 0 {
		t.Errorf("offLeader ran its work on the leader (tid %d)", leaderRun.tid)
	}
	ran := make(chan [2]int, 1)
	go offLeader(isLeader, func() { ran <- [2]int{unix.Gettid(), os.Getpid()}; runtime.UnlockOSThread() })
	if r := <-ran; r[0] == r[1] {
		t.Errorf("offLeader ran its work on the leader from a test goroutine (tid %d)", r[0])
	}
}

// heldStarter stands in for a daemon that dies while a sandbox is held:
// it starts one whose program would write dir/ran, says "held" and never
// releases it (Place blocks) until it is killed.
func heldStarter(dir string) int {
	_, err := Start(Options{Bwrap: bwrap.DefaultPath,
		Spec: bwrap.Spec{System: true, Mounts: []bwrap.Mount{{Src: dir, Dst: dir, Write: true}},
			Argv: []string{"/bin/sh", "-c", "echo ran > " + dir + "/ran; exec sleep 1000"}},
		Place: func(pid int) error {
			time.Sleep(300 * time.Millisecond) // bwrap's PID 1 reaches its block pipe
			if os.Getenv("PROC_TEST_HELD_KILL_BWRAP") == "1" {
				// bwrap's PID 1 outlives bwrap, still held: the state the
				// issue found alive after a crash.
				syscall.Kill(pid, syscall.SIGKILL)
				time.Sleep(100 * time.Millisecond)
			}
			os.Stdout.WriteString("held\n")
			select {}
		}})
	if err != nil {
		os.Stdout.WriteString(err.Error() + "\n")
	}
	return 1
}

// TestTerminateKillsTrappingSandbox: SIGTERM is ignored by the program and
// its setsid grandchild; after the grace period the PID namespace is killed
// and nothing remains. spec: X12
func TestTerminateKillsTrappingSandbox(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	marker := "proc-test-" + time.Now().Format("150405.000000")
	// The marker is a no-op in the grandchild's script (as an argument of
	// sleep it made sleep exit at once, and the test raced that exit).
	script := "trap '' TERM; setsid sh -c 'trap \"\" TERM; : " + marker + "; exec sleep 1000' & echo started; exec sleep 1001"
	p, err := Start(Options{Bwrap: bwrap.DefaultPath, Spec: bwrap.Spec{System: true, Argv: []string{"/bin/sh", "-c", script}}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, _ := io.ReadAtLeast(p.Stdout, buf, 7); !strings.HasPrefix(string(buf[:n]), "started") {
		t.Fatalf("got %q", buf[:n])
	}
	waited := make(chan error, 1)
	go func() { io.Copy(io.Discard, p.Stdout); waited <- p.Wait() }()
	time.Sleep(100 * time.Millisecond)
	before := killtree.Descendants(p.Pid())
	if len(before) < 3 {
		t.Fatalf("descendants %v", before)
	}
	t0 := time.Now()
	p.Terminate(context.Background(), 300*time.Millisecond)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox survived Terminate")
	}
	if time.Since(t0) < 250*time.Millisecond {
		t.Error("killed before the grace period although SIGTERM was ignored")
	}
	alive := func() []int {
		var out []int
		for _, pid := range before {
			if syscall.Kill(pid, 0) == nil {
				if b, _ := os.ReadFile("/proc/" + itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
					out = append(out, pid)
				}
			}
		}
		return out
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(alive()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the kernel tears the namespace down asynchronously
	}
	if a := alive(); len(a) > 0 {
		t.Errorf("still alive: %v", a)
	}
}

func TestSandboxFailure(t *testing.T) {
	if SandboxFailure(1, 0, []byte("bwrap: setting up uid map: Permission denied\n")) == nil {
		t.Error("uid map failure not recognised")
	}
	if err := SandboxFailure(1, 0, []byte("bwrap: No permissions to create new namespace")); err == nil || !strings.Contains(err.Error(), "apparmor") {
		t.Errorf("fix not named: %v", err)
	}
	if SandboxFailure(1, 5, []byte("bwrap: x")) != nil || SandboxFailure(2, 0, []byte("bwrap: x")) != nil || SandboxFailure(1, 0, []byte("tool failed")) != nil {
		t.Error("a tool's own failure taken for bwrap's")
	}
}

func itoa(i int) string { return fmtInt(i) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}

// TestPlaceRunsBeforeTheProgram: Place sees bwrap started but the program
// not yet run (the block pipe holds it); a Place error means it never runs.
func TestPlaceRunsBeforeTheProgram(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	dir := t.TempDir()
	marker := dir + "/ran"
	spec := bwrap.Spec{System: true, Mounts: []bwrap.Mount{{Src: dir, Dst: dir, Write: true}},
		Argv: []string{"/bin/sh", "-c", "echo x > " + marker}}
	placed := false
	p, err := Start(Options{Bwrap: bwrap.DefaultPath, Spec: spec, Place: func(pid int) error {
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat(marker); err == nil {
			t.Error("the program ran before Place returned")
		}
		placed = pid > 0
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, p.Stdout)
	if err := p.Wait(); err != nil || !placed {
		t.Fatalf("wait %v placed %v", err, placed)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the program did not run after Place")
	}
	os.Remove(marker)
	_, err = Start(Options{Bwrap: bwrap.DefaultPath, Spec: spec, Place: func(int) error { return os.ErrPermission }})
	if err == nil {
		t.Fatal("a Place error did not fail the start")
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran although Place failed")
	}
}

// TestGateAbortsOnEOF: a gate whose release never comes (its stdin reads
// EOF, as when the daemon dies while the sandbox is held) exits GateExit
// and never runs the program; a released gate runs it with its stdin.
func TestGateAbortsOnEOF(t *testing.T) {
	dir := t.TempDir()
	argv := gateArgv(bwrap.Spec{Argv: []string{"/bin/sh", "-c", "cat > " + dir + "/ran"}})
	for _, release := range []bool{false, true} {
		g, r, err := newGate([]byte("data"), false)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if release {
			g.open()
		} else {
			g.abortUnreleased()
		}
		err = cmd.Wait()
		g.abort()
		<-g.done
		b, rerr := os.ReadFile(dir + "/ran")
		switch {
		case !release && (cmd.ProcessState.ExitCode() != GateExit || rerr == nil):
			t.Errorf("unreleased gate: exit %d (%v), program ran: %v", cmd.ProcessState.ExitCode(), err, rerr == nil)
		case release && (err != nil || string(b) != "data"):
			t.Errorf("released gate: %v, stdin %q", err, b)
		}
	}
}

// TestHeldSandboxDiesWithItsStarter: the starter (the daemon) is SIGKILLed
// while its sandbox is held on the block pipe, before the release: the
// program never runs, and nothing of the sandbox is left — also when bwrap
// itself died first and its PID 1 (which has no parent-death signal before
// it runs the program) is left holding on the block pipe: bwrap alone goes
// on when the pipe reads EOF; the gate reads EOF too and exits
// (docs/walls.md, "No sandbox outlives its daemon").
func TestHeldSandboxDiesWithItsStarter(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	for _, first := range []string{"starter", "bwrap"} {
		t.Run(first+" dies first", func(t *testing.T) { heldDies(t, first == "bwrap") })
	}
}

func heldDies(t *testing.T, bwrapFirst bool) {
	dir := t.TempDir()
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROC_TEST_HELD_DIR="+dir)
	if bwrapFirst {
		cmd.Env = append(cmd.Env, "PROC_TEST_HELD_KILL_BWRAP=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the starter did not hold a sandbox: %q %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	time.Sleep(2 * time.Second) // a released sandbox runs within milliseconds
	// Every process of the sandbox (bwrap, the gate, the program) has dir
	// in its argv; pids alone could have been reused meanwhile.
	var alive []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err == nil && strings.Contains(string(cl), dir) && !strings.Contains(string(st), ") Z ") {
			alive = append(alive, strings.ReplaceAll(string(cl), "\x00", " "))
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("the held program ran after its starter died")
	}
	if len(alive) > 0 {
		t.Errorf("the held sandbox outlived its starter: %v", alive)
	}
}

// TestBornInsideHeldWithoutGate: a held start born inside its cgroup
// (Enter) is held on a latched block instead of the gate — no /bin/sh in
// front of the program — and still runs nothing before its launch root is
// registered; its program gets its stdin whole. spec: U2
func TestBornInsideHeldWithoutGate(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	reg, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := bwrap.Spec{System: true, Mounts: []bwrap.Mount{{Src: dir, Dst: dir, Write: true}},
		Argv: []string{"/bin/sh", "-c", "cat > " + dir + "/stdin"}}
	entered := false
	p, err := Start(Options{Bwrap: bwrap.DefaultPath, Spec: spec, Stdin: []byte("data"),
		Roots: reg, Ident: launchroot.Identity{UID: os.Getuid(), Agent: "a", Session: "s", Run: "r"},
		Enter: func(tid int) (func() error, error) {
			entered = tid > 0
			return func() error { return nil }, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if p.gate != nil || slices.Contains(p.cmd.Args, "ctx-gate") {
		t.Errorf("a sandbox born inside its cgroup went through the gate: %q", p.cmd.Args)
	}
	if len(reg.Entries()) != 1 {
		t.Errorf("launch roots while it runs: %+v", reg.Entries())
	}
	io.Copy(io.Discard, p.Stdout)
	if err := p.Wait(); err != nil || !entered {
		t.Fatalf("wait %v (stderr %q), entered %v", err, p.Stderr(), entered)
	}
	if b, err := os.ReadFile(dir + "/stdin"); err != nil || string(b) != "data" {
		t.Errorf("the program's stdin: %q %v", b, err)
	}
	// Without Enter the same held start goes through the gate.
	os.Remove(dir + "/stdin")
	p, err = Start(Options{Bwrap: bwrap.DefaultPath, Spec: spec, Stdin: []byte("data"),
		Roots: reg, Ident: launchroot.Identity{UID: os.Getuid(), Agent: "a", Session: "s", Run: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.gate == nil || !slices.Contains(p.cmd.Args, "ctx-gate") {
		t.Errorf("a held start outside any cgroup has no gate: %q", p.cmd.Args)
	}
	io.Copy(io.Discard, p.Stdout)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dir + "/stdin"); err != nil || string(b) != "data" {
		t.Errorf("the gated program's stdin: %q %v", b, err)
	}
}
