package launchroot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/procstat"
)

// helperEnv makes the test binary act as a socket client: it connects to
// the path in the variable, then waits for stdin to close.
const helperEnv = "LAUNCHROOT_TEST_CONNECT"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_, _ = io.Copy(io.Discard, os.Stdin)
		c.Close()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func newRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var ident = Identity{UID: os.Getuid(), Agent: "coder", Session: "default", Run: "run-1"}

// root is a real launch root started the way the daemon starts bwrap:
// Prepare, Start, Started. Its shell waits for the block fd, starts
// `sleep` in the background, prints the sleep's pid and waits for stdin.
type root struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	child   int // the background grandchild's pid
	release func()
}

func startRoot(t *testing.T, r *Registry, script string) *root {
	t.Helper()
	l, err := r.Prepare(ident, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.BlockFD != 3 {
		t.Fatalf("block fd %d", l.BlockFD)
	}
	cmd := exec.Command("/bin/sh", "-c", `read x <&3; exec 3<&-; `+script)
	cmd.ExtraFiles = l.ExtraFiles
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.Abort()
		t.Fatal(err)
	}
	release, err := l.Started(cmd.Process, nil)
	if err != nil {
		_ = cmd.Wait()
		l.Abort()
		t.Fatal(err)
	}
	rt := &root{cmd: cmd, stdin: stdin, release: release}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = stdin.Close()
		_ = cmd.Wait()
		release()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading child pid: %v", err)
	}
	rt.child, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(rt.child, syscall.SIGKILL) })
	return rt
}

// TestDescendantVerifies: a registered root and its grandchild both carry
// the root's identity. spec: U2
func TestDescendantVerifies(t *testing.T) {
	r := newRegistry(t)
	rt := startRoot(t, r, `sleep 60 & echo $!; read x`)
	for _, pid := range []int{rt.cmd.Process.Pid, rt.child} {
		got, err := r.Verify(pid, os.Getuid())
		if err != nil || got != ident {
			t.Fatalf("pid %d: %+v, %v", pid, got, err)
		}
	}
	es := r.Entries()
	if len(es) != 1 || es[0].PID != rt.cmd.Process.Pid || es[0].BootID == "" || es[0].StartTime == 0 {
		t.Fatalf("entries %+v", es)
	}
}

// TestWrongUIDRefused: the owner uid only, even for root. spec: U2, A4
func TestWrongUIDRefused(t *testing.T) {
	r := newRegistry(t)
	rt := startRoot(t, r, `sleep 60 & echo $!; read x`)
	others := []int{os.Getuid() + 1}
	if os.Getuid() != 0 {
		others = append(others, 0) // root gets no exception
	}
	for _, uid := range others {
		if _, err := r.Verify(rt.child, uid); !errors.Is(err, ErrWrongUID) || !errors.Is(err, ErrDenied) {
			t.Fatalf("uid %d: %v", uid, err)
		}
	}
}

// TestNotDescendantRefused: a process of ours that no root started.
// spec: U2
func TestNotDescendantRefused(t *testing.T) {
	r := newRegistry(t)
	startRoot(t, r, `sleep 60 & echo $!; read x`)
	stranger := exec.Command("sleep", "60")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stranger.Process.Kill(); _ = stranger.Wait() }()
	for _, pid := range []int{stranger.Process.Pid, os.Getpid(), 1} {
		if _, err := r.Verify(pid, os.Getuid()); !errors.Is(err, ErrNoRoot) {
			t.Fatalf("pid %d: want ErrNoRoot, got %v", pid, err)
		}
	}
}

// TestReparentedRefused: a double-forked process whose parent (the root)
// exited is reparented to init or a subreaper and loses the capability,
// even while the root is still (wrongly) registered. spec: U2
func TestReparentedRefused(t *testing.T) {
	r := newRegistry(t)
	rt := startRoot(t, r, `sleep 60 & echo $!; read x`)
	if _, err := r.Verify(rt.child, os.Getuid()); err != nil {
		t.Fatalf("before reparenting: %v", err)
	}
	rt.stdin.Close() // the root shell exits; sleep is orphaned
	_ = rt.cmd.Wait()
	waitFor(t, func() bool {
		st, err := procstat.Read(rt.child)
		return err == nil && st.PPID != rt.cmd.Process.Pid
	})
	_, err := r.Verify(rt.child, os.Getuid())
	if !errors.Is(err, ErrNoRoot) {
		t.Fatalf("want ErrNoRoot, got %v", err)
	}
}

// TestStartTimeMismatchRefused simulates PID reuse by corrupting the
// recorded start time of a registered root. spec: U2
func TestStartTimeMismatchRefused(t *testing.T) {
	r := newRegistry(t)
	rt := startRoot(t, r, `sleep 60 & echo $!; read x`)
	r.mu.Lock()
	r.roots[rt.cmd.Process.Pid].StartTime++
	r.mu.Unlock()
	for _, pid := range []int{rt.child, rt.cmd.Process.Pid} {
		if _, err := r.Verify(pid, os.Getuid()); !errors.Is(err, ErrPIDReused) {
			t.Fatalf("pid %d: want ErrPIDReused, got %v", pid, err)
		}
	}
}

// TestReleaseAndPrune: release forgets the root at once; Prune forgets a
// root that exited without release.
func TestReleaseAndPrune(t *testing.T) {
	r := newRegistry(t)
	rt := startRoot(t, r, `sleep 60 & echo $!; read x`)
	rt.release()
	rt.release() // idempotent
	if _, err := r.Verify(rt.child, os.Getuid()); !errors.Is(err, ErrNoRoot) {
		t.Fatalf("after release: %v", err)
	}

	rt2 := startRoot(t, r, `sleep 60 & echo $!; read x`)
	if n := r.Prune(); n != 0 {
		t.Fatalf("pruned a live root: %d", n)
	}
	rt2.stdin.Close()
	_ = rt2.cmd.Wait()
	if n := r.Prune(); n != 1 || len(r.Entries()) != 0 {
		t.Fatalf("prune removed %d, left %+v", n, r.Entries())
	}
}

// TestRegisterForgetsTheDead: a registration no longer signals every
// live root (pruneEvery), yet a root that exited without its release is
// forgotten within pruneEvery registrations, and a pid whose entry is
// dead (its process gone, the pid reused) registers at once. spec: U2
func TestRegisterForgetsTheDead(t *testing.T) {
	r := newRegistry(t)
	gone := startRoot(t, r, `sleep 60 & echo $!; read x`)
	gone.stdin.Close()
	_ = gone.cmd.Wait() // exited and reaped, never released
	// A dead entry at a live pid (a pid reused since): the new process
	// registers.
	r.mu.Lock()
	r.roots[os.Getpid()] = &rootEntry{Entry: Entry{PID: os.Getpid(), StartTime: 1}, pidfd: -1}
	r.mu.Unlock()
	release, err := r.Register(os.Getpid(), ident)
	if err != nil {
		t.Fatalf("a pid whose entry is dead: %v", err)
	}
	release()
	if len(r.Entries()) != 1 {
		t.Fatalf("entries %+v: only the unreleased dead root", r.Entries())
	}
	// Within pruneEvery registrations the dead root is gone too.
	for i := 0; i < pruneEvery; i++ {
		release, err := r.Register(os.Getpid(), ident)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if e := r.Entries(); len(e) != 0 {
		t.Fatalf("after %d registrations the dead root is still kept: %+v", pruneEvery, e)
	}
}

// TestRegisterRefusesForeignIdentityAndDuplicates.
func TestRegisterRefusesForeignIdentityAndDuplicates(t *testing.T) {
	r := newRegistry(t)
	bad := ident
	bad.UID++
	if _, err := r.Register(os.Getpid(), bad); err == nil {
		t.Fatal("registered an identity for another uid")
	}
	if _, err := r.Prepare(bad, nil); err == nil {
		t.Fatal("prepared an identity for another uid")
	}
	rt := startRoot(t, r, `sleep 60 & echo $!; read x`)
	if _, err := r.Register(rt.cmd.Process.Pid, ident); err == nil {
		t.Fatal("registered a pid twice")
	}
}

// TestDeepRealChain builds real process chains: a leaf with exactly 64
// ancestors up to the root verifies; with 65 it is refused. spec: U2
func TestDeepRealChain(t *testing.T) {
	script := filepath.Join(t.TempDir(), "chain")
	// Each level runs the next as a child (the trailing exit keeps the
	// shell from exec'ing it); the leaf becomes a sleep.
	if err := os.WriteFile(script, []byte("#!/bin/sh\nif [ \"$1\" -gt 0 ]; then \"$0\" $(($1 - 1)); exit $?; fi\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		depth int
		want  error
	}{{MaxAncestors, nil}, {MaxAncestors + 1, ErrTooDeep}} {
		r := newRegistry(t)
		rt := startRoot(t, r, fmt.Sprintf(`%s %d & echo $!; read x`, script, tc.depth-1))
		// rt.child is the chain's first level (depth-1 below it to the
		// leaf); find the leaf by walking /proc children.
		leaf := rt.child
		for range tc.depth - 1 {
			leaf = onlyChild(t, leaf)
		}
		_, err := r.Verify(leaf, os.Getuid())
		if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Fatalf("depth %d: want %v, got %v", tc.depth, tc.want, err)
		}
		_ = syscall.Kill(leaf, syscall.SIGKILL)
	}
}

// onlyChild waits until pid has exactly one child and returns it.
func onlyChild(t *testing.T, pid int) int {
	t.Helper()
	var kid int
	waitFor(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			t.Fatalf("children of %d: %v", pid, err)
		}
		f := strings.Fields(string(b))
		if len(f) != 1 {
			return false
		}
		kid, _ = strconv.Atoi(f[0])
		return true
	})
	return kid
}

// TestSyntheticChains drives Verify through an injected /proc reader for
// what the kernel never produces on demand. spec: U2
func TestSyntheticChains(t *testing.T) {
	type proc struct {
		ppid  int
		start uint64
		state byte
	}
	run := func(procs map[int]proc, rootPID int, rootStart uint64, peer int) error {
		r := newRegistry(t)
		r.self = -1
		r.stat = func(pid int) (procstat.Stat, error) {
			p, ok := procs[pid]
			if !ok {
				return procstat.Stat{}, fmt.Errorf("pid %d: %w", pid, os.ErrNotExist)
			}
			st := p.state
			if st == 0 {
				st = 'S'
			}
			return procstat.Stat{PID: pid, PPID: p.ppid, StartTime: p.start, State: st}, nil
		}
		r.roots[rootPID] = &rootEntry{Entry: Entry{PID: rootPID, StartTime: rootStart, BootID: r.bootID, Identity: ident}, pidfd: -1}
		_, err := r.Verify(peer, os.Getuid())
		return err
	}
	chain := func(n int) map[int]proc { // 1000 is the root, 1000+n the peer
		m := map[int]proc{1: {ppid: 0, start: 1}, 1000: {ppid: 1, start: 10}}
		for i := 1; i <= n; i++ {
			m[1000+i] = proc{ppid: 1000 + i - 1, start: uint64(10 + i)}
		}
		return m
	}
	cases := []struct {
		name string
		err  error
		fn   func() error
	}{
		{"64 ancestors", nil, func() error { return run(chain(64), 1000, 10, 1064) }},
		{"65 ancestors", ErrTooDeep, func() error { return run(chain(65), 1000, 10, 1065) }},
		{"cycle", ErrCycle, func() error {
			return run(map[int]proc{5: {ppid: 6, start: 3}, 6: {ppid: 5, start: 3}, 1000: {ppid: 1, start: 10}}, 1000, 10, 5)
		}},
		{"missing parent", ErrNoProcess, func() error { return run(map[int]proc{5: {ppid: 6, start: 3}}, 1000, 10, 5) }},
		{"missing peer", ErrNoProcess, func() error { return run(chain(3), 1000, 10, 77) }},
		{"peer pid 0", ErrNoProcess, func() error { return run(chain(3), 1000, 10, 0) }},
		{"root start differs", ErrPIDReused, func() error { return run(chain(3), 1000, 11, 1003) }},
		{"parent younger than child", ErrPIDReused, func() error {
			m := chain(3)
			m[1002] = proc{ppid: 1001, start: 99}
			return run(m, 1000, 10, 1003)
		}},
		{"zombie ancestor", ErrNoRoot, func() error {
			m := chain(3)
			m[1001] = proc{ppid: 1000, start: 11, state: 'Z'}
			return run(m, 1000, 10, 1003)
		}},
		{"reaches pid 1", ErrNoRoot, func() error {
			m := chain(3)
			m[1002] = proc{ppid: 1, start: 12}
			return run(m, 1000, 10, 1003)
		}},
		{"ppid 0", ErrNoRoot, func() error {
			m := chain(3)
			m[1002] = proc{ppid: 0, start: 12}
			return run(m, 1000, 10, 1003)
		}},
	}
	for _, c := range cases {
		err := c.fn()
		if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("%s: want %v, got %v", c.name, c.err, err)
		}
		if c.err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v is not ErrDenied", c.name, err)
		}
	}
}

// TestPeerOfPinsAndNoticesExit: SO_PEERCRED and a pidfd for a real client
// process; once it has exited the peer is refused. spec: U2
func TestPeerOfPinsAndNoticesExit(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := newRegistry(t)

	client := func() (*exec.Cmd, io.WriteCloser, *net.UnixConn) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"="+sock)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		return cmd, in, c
	}

	cmd, in, c := client()
	p, err := PeerOf(c)
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != cmd.Process.Pid || p.UID != os.Getuid() || !p.Pinned() {
		t.Fatalf("peer %+v, want pid %d", p, cmd.Process.Pid)
	}
	if err := p.Alive(); err != nil {
		t.Fatal(err)
	}
	// A live peer that is no root's descendant.
	if _, err := r.VerifyPeer(p); !errors.Is(err, ErrNoRoot) {
		t.Fatalf("want ErrNoRoot, got %v", err)
	}
	in.Close()
	_ = cmd.Wait()
	if err := p.Alive(); !errors.Is(err, ErrPeerGone) {
		t.Fatalf("after exit: %v", err)
	}
	p.Close()
	c.Close()

	// Pinned only after the client is gone and reaped.
	cmd, in, c = client()
	in.Close()
	_ = cmd.Wait()
	p, err = PeerOf(c)
	if err == nil {
		err = p.Alive()
	}
	if !errors.Is(err, ErrPeerGone) {
		t.Fatalf("reaped peer: %v", err)
	}
	p.Close()
	c.Close()
}

// TestBwrapBlockFD: with a real bwrap, the sandboxed program does not run
// before Started registers bwrap, and it verifies as a descendant.
// spec: U2
func TestBwrapBlockFD(t *testing.T) {
	bw, err := bwrap.Find("")
	if err != nil {
		t.Skip("bwrap not installed:", err)
	}
	r := newRegistry(t)
	out := t.TempDir()
	l, err := r.Prepare(ident, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := startBlocked(t, bw, l, out, "echo ran > /out/ran; exec sleep 60")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(out, "ran")); err == nil {
		t.Fatal("sandboxed program ran before the block was released")
	}
	release, err := l.Started(cmd.Process, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(out, "ran")); return err == nil })
	// bwrap → its pid-1 init in the sandbox → sleep.
	leaf := onlyChild(t, onlyChild(t, cmd.Process.Pid))
	if got, err := r.Verify(leaf, os.Getuid()); err != nil || got != ident {
		t.Fatalf("sandboxed pid %d: %+v %v", leaf, got, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRootOfAnotherUIDRefused: the walk's own uid check, alone: a peer of
// the owner uid reaching a root recorded for another uid is refused even
// though the peer's uid passes (Register refuses such roots; this guards
// the walk should one ever be recorded). spec: U2, A4
func TestRootOfAnotherUIDRefused(t *testing.T) {
	r := newRegistry(t)
	r.self = -1
	r.stat = func(pid int) (procstat.Stat, error) {
		switch pid {
		case 1000:
			return procstat.Stat{PID: 1000, PPID: 1, StartTime: 10, State: 'S'}, nil
		case 1001:
			return procstat.Stat{PID: 1001, PPID: 1000, StartTime: 11, State: 'S'}, nil
		}
		return procstat.Stat{}, os.ErrNotExist
	}
	other := ident
	other.UID = os.Getuid() + 1
	r.roots[1000] = &rootEntry{Entry: Entry{PID: 1000, StartTime: 10, BootID: r.bootID, Identity: other}, pidfd: -1}
	if id, err := r.Verify(1001, os.Getuid()); !errors.Is(err, ErrWrongUID) {
		t.Fatalf("verified %+v, %v; want ErrWrongUID", id, err)
	}
}

// TestBwrapLatchedBlockIgnoresEOF: a latched block (PrepareLatched) is
// not released when every other write end of its pipe closes, as when
// the daemon dies while the sandbox is held: bwrap's PID 1 stays blocked
// and the program never runs. Only Started's byte releases it, and the
// program does not inherit the block descriptor. spec: U2
func TestBwrapLatchedBlockIgnoresEOF(t *testing.T) {
	bw, err := bwrap.Find("")
	if err != nil {
		t.Skip("bwrap not installed:", err)
	}
	r := newRegistry(t)
	out := t.TempDir()
	for _, release := range []bool{false, true} {
		ran := filepath.Join(out, "ran-"+strconv.FormatBool(release))
		l, err := r.PrepareLatched(ident, nil)
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(l.ExtraFiles[0].Fd()), &st); err != nil {
			t.Fatal(err)
		}
		pipe := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
		cmd := startBlocked(t, bw, l, out, "ls -l /proc/self/fd > /out/"+filepath.Base(ran)+"; exec sleep 60")
		if !release {
			// The daemon's ends close (Abort is what a dead daemon's
			// exit does to them): a plain pipe reads EOF now.
			l.Abort()
			time.Sleep(500 * time.Millisecond)
			if _, err := os.Stat(ran); err == nil {
				t.Error("the latched sandbox ran after its block's other ends closed")
			}
			// bwrap → its PID 1, still held on the block.
			if pid1 := onlyChild(t, cmd.Process.Pid); pid1 <= 0 {
				t.Error("bwrap's PID 1 is gone")
			}
			killtree.Kill(cmd.Process.Pid)
			_ = cmd.Wait()
			continue
		}
		rel, err := l.Started(cmd.Process, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { b, err := os.ReadFile(ran); return err == nil && len(b) > 0 })
		if b, _ := os.ReadFile(ran); strings.Contains(string(b), pipe) {
			t.Errorf("the released program holds the block %s:\n%s", pipe, b)
		}
		killtree.Kill(cmd.Process.Pid)
		_ = cmd.Wait()
		rel()
	}
}

// startBlocked starts bwrap (bw) held on l's block, its program a shell
// running script with out bound writable at /out.
func startBlocked(t *testing.T, bw string, l *Launch, out, script string) *exec.Cmd {
	t.Helper()
	args, err := bwrap.Spec{
		System:  true,
		Mounts:  []bwrap.Mount{{Src: out, Dst: "/out", Write: true}},
		BlockFD: l.BlockFD,
		Argv:    []string{"/bin/sh", "-c", script},
	}.Args()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bw, args...)
	cmd.ExtraFiles = l.ExtraFiles
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		l.Abort()
		t.Fatal(err)
	}
	return cmd
}
