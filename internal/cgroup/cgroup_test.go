package cgroup

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/limits"
	"github.com/cortexfs/ctx/internal/proc"
)

const hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
77 41 0:38 /some/sub /mnt/sub rw,relatime - cgroup2 cgroup2 rw
`

func TestParseMountinfo(t *testing.T) {
	m := ParseMountinfo([]byte(hybridMountinfo))
	want := map[string]string{"pids": "/sys/fs/cgroup/pids", "memory": "/sys/fs/cgroup/memory", "cpu": "/sys/fs/cgroup/cpu,cpuacct", "freezer": "/sys/fs/cgroup/freezer"}
	if m.V2 != "/sys/fs/cgroup/unified" || len(m.V1) != len(want) {
		t.Fatalf("%+v", m)
	}
	for c, p := range want {
		if m.V1[c] != p {
			t.Errorf("%s: %q, want %q", c, m.V1[c], p)
		}
	}
	m = ParseMountinfo([]byte("25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n26 1 0:23 / /my\\040cg rw - cgroup cgroup rw,pids\nbroken line\n"))
	if m.V2 != "/sys/fs/cgroup" || m.V1["pids"] != "/my cg" {
		t.Errorf("%+v", m)
	}
}

func TestOwnCgroups(t *testing.T) {
	v2, v1 := OwnCgroups([]byte("9:name=systemd:/\n8:pids:/a\n4:memory:/process_api/x\n1:cpu,cpuacct:/c\n0::/user.slice/u.service\n"))
	if v2 != "/user.slice/u.service" || v1["pids"] != "/a" || v1["memory"] != "/process_api/x" || v1["cpuacct"] != "/c" {
		t.Errorf("%q %v", v2, v1)
	}
}

func TestNames(t *testing.T) {
	if b := BaseName(1000, "/home/me/.ctx"); !regexpMatch(`^ctx-1000-[0-9a-f]{12}$`, b) || b == BaseName(1000, "/home/me/.ctx2") || b == BaseName(1001, "/home/me/.ctx") {
		t.Errorf("BaseName %q", b)
	}
	if GroupName("run-12-ab09") != "run-12-ab09" {
		t.Error("a safe run id changed")
	}
	for _, bad := range []string{"../x", "run-a/b", "x", "run-" + strings.Repeat("a", 100), "run-\n"} {
		if g := GroupName(bad); !regexpMatch(`^run-x[0-9a-f]{16}$`, g) {
			t.Errorf("GroupName(%q) = %q", bad, g)
		}
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func TestNice(t *testing.T) {
	for w, n := range map[int64]int{100: 0, 10000: 0, 80: 1, 50: 3, 10: 10, 1: 19} {
		if got := Nice(w); got != n {
			t.Errorf("Nice(%d) = %d, want %d", w, got, n)
		}
	}
}

// TestChoose: the order systemd → v2 → v1 → rlimits, and the reason for
// each step down. limits per run
func TestChoose(t *testing.T) {
	fake := &fakeConn{}
	ok := func(context.Context, string, string) (*scopes, error) {
		return &scopes{c: fake, prefix: "ctx-1-x-"}, nil
	}
	refused := func(context.Context, string, string) (*scopes, error) { return nil, errors.New("no bus") }
	pure := Mounts{V1: map[string]string{}, V2: t.TempDir()}
	if m := choose(context.Background(), pure, nil, "ctx-1-x", nil, ok); m.Mode() != ModeSystemd || m.Why() != "" {
		t.Errorf("pure v2 with a manager: %s (%s)", m.Mode(), m.Why())
	}
	m := choose(context.Background(), pure, nil, "ctx-1-x", nil, refused)
	if m.Mode() != ModeRlimit || !strings.Contains(m.Why(), "no systemd user manager answers (no bus)") || !strings.Contains(m.Why(), "cgroup v2:") {
		t.Errorf("pure v2 (an empty directory) without a manager: %s (%s)", m.Mode(), m.Why())
	}
	hybrid := ParseMountinfo([]byte(hybridMountinfo))
	for c := range hybrid.V1 {
		hybrid.V1[c] = t.TempDir() // no control files: not a cgroup hierarchy
	}
	hybrid.V2 = ""
	m = choose(context.Background(), hybrid, nil, "ctx-1-x", nil, ok)
	if m.Mode() != ModeRlimit || !strings.Contains(m.Why(), "pure cgroup v2") || !strings.Contains(m.Why(), "cgroup v1:") {
		t.Errorf("hybrid: %s (%s)", m.Mode(), m.Why())
	}
	if !strings.Contains(m.Describe(), "RLIMIT_AS") {
		t.Errorf("rlimit describe: %s", m.Describe())
	}
}

// TestV2Files: a v2 group gets pids.max, memory.max, memory.swap.max 0 and
// cpu.weight before the process joins (a directory standing in for cgroupfs).
func TestV2Files(t *testing.T) {
	base := t.TempDir()
	files := []string{"pids.max", "memory.max", "memory.swap.max", "cpu.weight", "cgroup.procs"}
	v := &v2{base: base, rmdir: os.RemoveAll, mkdir: func(d string) error {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			os.WriteFile(filepath.Join(d, f), nil, 0o644)
		}
		return nil
	}}
	if err := v.place("run-1-a", limits.Limits{Tasks: 64, Memory: 256 << 20, CPUWeight: 50}, 4242); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"pids.max": "64", "memory.max": "268435456", "memory.swap.max": "0", "cpu.weight": "50", "cgroup.procs": "4242"} {
		if b, _ := os.ReadFile(filepath.Join(base, "run-1-a", f)); string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	if l, _ := v.leftovers(); !slices.Equal(l, []string{"run-1-a"}) {
		t.Errorf("leftovers %v", l)
	}
	// A group whose limits cannot be written is not used (fail closed).
	v.mkdir = func(d string) error { return os.Mkdir(d, 0o755) }
	if err := v.place("run-2-b", limits.Default, 4242); err == nil {
		t.Error("placed without limit files")
	}
	if _, err := os.Stat(filepath.Join(base, "run-2-b")); err == nil {
		t.Error("the half-made group was left behind")
	}
}

// fakeConn records what the scope backend asks the manager.
type fakeConn struct {
	units  map[string][]sddbus.Property
	calls  []string
	killed []string
}

func (f *fakeConn) StartTransientUnitContext(_ context.Context, name, mode string, props []sddbus.Property, ch chan<- string) (int, error) {
	f.calls = append(f.calls, "start "+name+" "+mode)
	if f.units == nil {
		f.units = map[string][]sddbus.Property{}
	}
	f.units[name] = props
	ch <- "done"
	return 1, nil
}

func (f *fakeConn) AttachProcessesToUnit(_ context.Context, unit, _ string, pids []uint32) error {
	f.calls = append(f.calls, "attach "+unit)
	if _, ok := f.units[unit]; !ok {
		return godbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit"}
	}
	return nil
}

func (f *fakeConn) KillUnitWithTarget(_ context.Context, name string, who sddbus.Who, sig int32) error {
	f.killed = append(f.killed, name+" "+string(who)+" "+strconv.Itoa(int(sig)))
	return nil
}

func (f *fakeConn) StopUnitContext(_ context.Context, name, _ string, _ chan<- string) (int, error) {
	if _, ok := f.units[name]; !ok {
		return 0, godbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit"}
	}
	delete(f.units, name)
	return 1, nil
}

func (f *fakeConn) ListUnitsByPatternsContext(_ context.Context, _, patterns []string) ([]sddbus.UnitStatus, error) {
	f.calls = append(f.calls, "list "+strings.Join(patterns, ","))
	var out []sddbus.UnitStatus
	for n := range f.units {
		out = append(out, sddbus.UnitStatus{Name: n})
	}
	return out, nil
}

func (f *fakeConn) GetUnitTypePropertyContext(_ context.Context, unit, _, _ string) (*sddbus.Property, error) {
	return nil, godbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit"}
}

// TestScopes: the first process starts the run's scope with the limits,
// later ones join it; leftovers are found by the CTX_ROOT's prefix and
// stopped. limits per run (systemd mode)
func TestScopes(t *testing.T) {
	f := &fakeConn{}
	s := &scopes{c: f, prefix: "ctx-7-abc-"}
	l := limits.Limits{Tasks: 64, Memory: 256 << 20, CPUWeight: 20}
	if err := s.place("run-1-a", l, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.place("run-1-a", l, 101); err != nil {
		t.Fatal(err)
	}
	want := []string{"attach ctx-7-abc-run-1-a.scope", "start ctx-7-abc-run-1-a.scope fail", "attach ctx-7-abc-run-1-a.scope"}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	props := map[string]any{}
	for _, p := range f.units["ctx-7-abc-run-1-a.scope"] {
		props[p.Name] = p.Value.Value()
	}
	for k, v := range map[string]any{"TasksMax": uint64(64), "MemoryMax": uint64(256 << 20), "MemorySwapMax": uint64(0), "CPUWeight": uint64(20)} {
		if props[k] != v {
			t.Errorf("%s = %v, want %v", k, props[k], v)
		}
	}
	if _, ok := props["PIDs"]; !ok {
		t.Error("no PIDs property")
	}
	f.units["unrelated.scope"] = nil
	f.units["ctx-7-abc-run.scope"] = nil
	names, err := s.leftovers()
	if err != nil || !slices.Equal(names, []string{"run-1-a"}) {
		t.Errorf("leftovers %v %v", names, err)
	}
	if err := s.remove("run-1-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("run-1-a"); err != nil {
		t.Errorf("removing a collected scope: %v", err)
	}
}

// v1Machine skips unless the machine has writable cgroup v1 pids and memory.
func v1Machine(t *testing.T) *Manager {
	t.Helper()
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	m := New(context.Background(), os.Getuid(), t.TempDir(), nil)
	if m.Mode() != ModeV1 && m.Mode() != ModeV2 {
		t.Skipf("no writable cgroup here: %s (%s)", m.Mode(), m.Why())
	}
	t.Cleanup(func() {
		if b, ok := m.b.(*v1); ok {
			for _, c := range b.order {
				os.Remove(b.dirs[c])
			}
		}
	})
	return m
}

// cgroupOf reads pid's cgroup in controller ctrl (v1) or the unified one.
func cgroupOf(t *testing.T, pid int, ctrl string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	v2, v1 := OwnCgroups(b)
	if p, ok := v1[ctrl]; ok {
		return p
	}
	return v2
}

// TestPlaceHoldsTheWholeSandbox: Place moves bwrap and the PID 1 it already
// cloned, so the program and everything it starts is in the run's group
// with its limits; Close kills what is left and removes the group.
// One cgroup per run
func TestPlaceHoldsTheWholeSandbox(t *testing.T) {
	m := v1Machine(t)
	g := m.Group("run-1-test"+strconv.Itoa(os.Getpid()), limits.Limits{Tasks: 32, Memory: 64 << 20, CPUWeight: 50})
	spec := bwrap.Spec{System: true, Argv: []string{"/bin/sh", "-c", "sleep 1000 & echo $$; cat /proc/self/cgroup >&2; exec sleep 1001"}}
	p, err := proc.Start(proc.Options{Bwrap: bwrap.DefaultPath, Spec: spec, Place: g.PlaceFunc()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	buf := make([]byte, 16)
	n, _ := p.Stdout.Read(buf)
	if n == 0 {
		t.Fatal("no output")
	}
	time.Sleep(50 * time.Millisecond)
	all := append([]int{p.Pid()}, killtree.Descendants(p.Pid())...)
	if len(all) < 4 {
		t.Fatalf("sandbox processes %v", all)
	}
	for _, pid := range all {
		for _, ctrl := range []string{"pids", "memory"} {
			if got := cgroupOf(t, pid, ctrl); !strings.HasSuffix(got, "/"+g.name) {
				t.Errorf("pid %d is in %s cgroup %q, not the run's", pid, ctrl, got)
			}
		}
	}
	if b, ok := m.b.(*v1); ok {
		for file, want := range map[string]string{"pids/pids.max": "32", "memory/memory.limit_in_bytes": "67108864", "cpu/cpu.shares": "512"} {
			c, f, _ := strings.Cut(file, "/")
			if b.dirs[c] == "" {
				continue
			}
			got, _ := os.ReadFile(filepath.Join(b.dirs[c], g.name, f))
			if strings.TrimSpace(string(got)) != want {
				t.Errorf("%s = %q, want %s", file, got, want)
			}
		}
	}
	if err := g.Close(0); err != nil {
		t.Fatal(err)
	}
	for _, pid := range all {
		if alive(pid) {
			t.Errorf("pid %d survived Close", pid)
		}
	}
	if ps, _ := m.b.procs(g.name); len(ps) != 0 {
		t.Errorf("group still holds %v", ps)
	}
	if names, _ := m.b.leftovers(); slices.Contains(names, g.name) {
		t.Error("group not removed")
	}
	if err := g.Place(os.Getpid()); !errors.Is(err, ErrClosed) {
		t.Errorf("Place after Close: %v", err)
	}
	io := make([]byte, 1)
	p.Stdout.Read(io)
	p.Wait()
}

// TestSweepKillsLeftovers: a group left by a crashed daemon (a process
// ignoring SIGTERM, detached into its own session) is killed and removed by
// the next daemon's Sweep.
func TestSweepKillsLeftovers(t *testing.T) {
	m := v1Machine(t)
	name := "run-9-sweep" + strconv.Itoa(os.Getpid())
	cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; exec sleep 1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := m.b.place(name, limits.Default, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	n, err := m.Sweep()
	if err != nil || n < 1 {
		t.Fatalf("Sweep: %d, %v", n, err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the leftover process survived the sweep")
	}
	if names, _ := m.b.leftovers(); slices.Contains(names, name) {
		t.Error("the leftover group was not removed")
	}
}

// TestRlimitPlace: rlimits-only mode caps bwrap's (and so the sandbox's)
// address space and lowers its priority.
func TestRlimitPlace(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	m := &Manager{b: &rlimitOnly{}}
	g := m.Group("run-1-r", limits.Limits{Tasks: 64, Memory: 512 << 20, CPUWeight: 50})
	spec := bwrap.Spec{System: true, Argv: []string{"/bin/sh", "-c", "grep 'Max address space' /proc/self/limits; cut -d' ' -f19 /proc/self/stat"}}
	p, err := proc.Start(proc.Options{Bwrap: bwrap.DefaultPath, Spec: spec, Place: g.PlaceFunc()})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4096)
	n, _ := readAll(p, out)
	p.Wait()
	s := string(out[:n])
	if !strings.Contains(s, "536870912") || !strings.HasSuffix(strings.TrimSpace(s), "\n3") {
		t.Errorf("limits inside the sandbox:\n%s", s)
	}
}

func readAll(p *proc.Proc, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := p.Stdout.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// TestEnterBornInside: on v1 the thread that forks bwrap enters the run's
// group and leaves it again — moving itself (it writes 0, the kernel's
// lock-free path for the current thread) — and what it forked meanwhile
// is inside the group while the thread is back where it was, in every
// controller. A thread given by its id (not the caller) moves the same.
// One cgroup per run
func TestEnterBornInside(t *testing.T) {
	m := v1Machine(t)
	if m.Mode() != ModeV1 {
		t.Skipf("born inside by thread moves is v1's: %s", m.Mode())
	}
	lim := limits.Limits{Tasks: 32, Memory: 512 << 20, CPUWeight: 50}
	g := m.Group("run-2-enter"+strconv.Itoa(os.Getpid()), lim)
	defer g.Close(0)
	enter := g.EnterFunc()
	ctrls := m.b.(*v1).order
	type res struct {
		before, inside, after map[string]string
		child                 map[string]string
		err                   error
	}
	where := func(tid int) map[string]string {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/cgroup")
		if err != nil {
			t.Error(err)
		}
		_, v1 := OwnCgroups(b)
		return v1
	}
	run := func() res {
		ch := make(chan res, 1)
		go func() {
			// Never unlocked: the thread ends with the goroutine, so
			// one left in the group cannot take the test with it.
			runtime.LockOSThread()
			var r res
			r.before = where(unix.Gettid())
			leave, err := enter(unix.Gettid())
			if err != nil {
				r.err = err
				ch <- r
				return
			}
			r.inside = where(unix.Gettid())
			cmd := exec.Command("sleep", "1000")
			if r.err = cmd.Start(); r.err == nil {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
				_, r.child = OwnCgroups(b)
				cmd.Process.Kill()
				cmd.Wait()
			}
			if err := leave(); err != nil && r.err == nil {
				r.err = err
			}
			r.after = where(unix.Gettid())
			// Whatever leave did, the thread goes home before the
			// group is closed (Close kills what the group holds).
			for _, c := range ctrls {
				_ = writeFile(filepath.Join(m.b.(*v1).mounts[c], r.before[c], "tasks"), "0")
			}
			ch <- r
		}()
		return <-ch
	}
	r := run()
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, c := range ctrls {
		if !strings.HasSuffix(r.inside[c], "/"+g.name) || !strings.HasSuffix(r.child[c], "/"+g.name) {
			t.Errorf("%s: thread inside %q, child %q; want the run's group", c, r.inside[c], r.child[c])
		}
		if r.after[c] != r.before[c] {
			t.Errorf("%s: thread back in %q, was in %q", c, r.after[c], r.before[c])
		}
	}
	// By id: the tid of the locked thread written as a number (the
	// path for a thread other than the caller).
	b := m.b.(*v1)
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		tid := unix.Gettid()
		before := where(tid)
		if err := b.join(g.name, lim, "tasks", tid); err != nil {
			ch <- err
			return
		}
		inside := where(tid)
		for _, c := range ctrls {
			if !strings.HasSuffix(inside[c], "/"+g.name) {
				t.Errorf("by id: %s: %q", c, inside[c])
			}
			if err := writeFile(filepath.Join(b.mounts[c], before[c], "tasks"), strconv.Itoa(tid)); err != nil {
				ch <- err
				return
			}
		}
		ch <- nil
	}()
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

// preparedV1Group is a run group made ahead (Group.Prepare) on a cgroup v1
// machine, closed when the test ends; it skips elsewhere.
func preparedV1Group(t *testing.T, name string) (*v1, *Group) {
	t.Helper()
	m := v1Machine(t)
	if m.Mode() != ModeV1 {
		t.Skipf("threads enter groups on v1 only: %s", m.Mode())
	}
	g := m.Group(name+strconv.Itoa(os.Getpid()), limits.Limits{Tasks: 32, Memory: 512 << 20})
	t.Cleanup(func() { g.Close(0) })
	g.Prepare()
	g.mu.Lock()
	made := g.made
	g.mu.Unlock()
	<-made
	return m.b.(*v1), g
}

// TestEnterPreparedFromAStaleHome: a thread enters a group Prepare made
// (joining only) and leaves it to the daemon's own groups as read before
// (v1.home, kept homeFor); when those are stale — the daemon was moved and
// its old group is gone — the leave finds them again and the thread still
// ends where the daemon is, also when the daemon's leader thread is itself
// inside a run's group at that moment (Go runs any goroutine, the one that
// starts a sandbox too, on the leader).
func TestEnterPreparedFromAStaleHome(t *testing.T) {
	b, g := preparedV1Group(t, "run-3-home")
	if !g.ready {
		t.Fatal("the prepared group is not marked made")
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	_, home := OwnCgroups(own)
	leader := strconv.Itoa(os.Getpid())
	enter := g.EnterFunc()
	for _, tc := range []struct {
		stale, leaderInside bool
	}{{false, false}, {true, false}, {true, true}} {
		if tc.stale {
			b.homeMu.Lock()
			b.home, b.homeAt = map[string]string{}, time.Now()
			for _, c := range b.order {
				b.home[c] = "/ctx-no-such-group-" + leader
			}
			b.homeMu.Unlock()
		}
		if tc.leaderInside {
			if err := b.writeAll(g.name, "tasks", leader); err != nil {
				t.Fatal(err)
			}
		}
		ch := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tid := unix.Gettid()
			leave, err := enter(tid)
			if err != nil {
				ch <- err
				return
			}
			inside, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/cgroup")
			_, in := OwnCgroups(inside)
			lerr := leave()
			after, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/cgroup")
			_, now := OwnCgroups(after)
			for _, c := range b.order {
				if !strings.HasSuffix(in[c], "/"+g.name) {
					t.Errorf("%+v: %s: inside %q", tc, c, in[c])
				}
				if now[c] != home[c] {
					t.Errorf("%+v: %s: back in %q, the daemon is in %q", tc, c, now[c], home[c])
					_ = writeFile(filepath.Join(b.mounts[c], home[c], "tasks"), "0")
				}
			}
			ch <- lerr
		}()
		err := <-ch
		if tc.leaderInside {
			for _, c := range b.order {
				if werr := writeFile(filepath.Join(b.mounts[c], home[c], "tasks"), leader); werr != nil {
					t.Errorf("move the leader back: %s: %v", c, werr)
				}
			}
		}
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
	}
}

// TestHomeReadByTheEnteringThread: the daemon's groups, when read again
// (v1.homes, past homeFor), are those of the thread about to enter — at
// home — not the leader's, which may be inside a run's group then (a
// thread leaving to the leader's group would stay in the run's).
func TestHomeReadByTheEnteringThread(t *testing.T) {
	b, g := preparedV1Group(t, "run-3-lead")
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	_, home := OwnCgroups(own)
	leader := os.Getpid()
	type read struct {
		groups  map[string]string
		err     error
		retried bool
	}
	release := make(chan struct{})
	defer close(release)
	for try := 0; ; try++ {
		ch := make(chan read, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if unix.Gettid() == leader {
				// This thread is the one moved below: hold it (so the next
				// try runs elsewhere) until the test ends.
				ch <- read{retried: true}
				<-release
				return
			}
			if err := b.writeAll(g.name, "tasks", strconv.Itoa(leader)); err != nil {
				ch <- read{err: err}
				return
			}
			b.homeMu.Lock()
			b.home = nil
			b.homeMu.Unlock()
			groups, err := b.homes()
			for _, c := range b.order {
				if werr := writeFile(filepath.Join(b.mounts[c], home[c], "tasks"), strconv.Itoa(leader)); werr != nil {
					err = errors.Join(err, werr)
				}
			}
			ch <- read{groups: groups, err: err}
		}()
		r := <-ch
		if r.retried && try < 3 {
			continue
		}
		if r.err != nil || r.retried {
			t.Fatalf("read: %v (ran on the leader: %v)", r.err, r.retried)
		}
		for _, c := range b.order {
			if r.groups[c] != home[c] {
				t.Errorf("%s: home read as %q, the daemon is in %q", c, r.groups[c], home[c])
			}
		}
		return
	}
}

// TestPrepareMakesTheGroupAhead: Prepare makes the group with its limits
// before any process joins it (the sandbox's start then only joins), a
// prepared group nothing joined is removed by Close, and a group closed
// first is never made.
func TestPrepareMakesTheGroupAhead(t *testing.T) {
	m := v1Machine(t)
	lim := limits.Limits{Tasks: 29, Memory: 300 << 20, CPUWeight: 50}
	dir := func(g *Group) string {
		if b, ok := m.b.(*v1); ok {
			return filepath.Join(b.dirs["pids"], g.name)
		}
		return filepath.Join(m.b.(*v2).base, g.name)
	}
	g := m.Group("run-3-prep"+strconv.Itoa(os.Getpid()), lim)
	g.Prepare()
	g.mu.Lock()
	made := g.made
	g.mu.Unlock()
	<-made
	b, err := os.ReadFile(filepath.Join(dir(g), "pids.max"))
	if err != nil || strings.TrimSpace(string(b)) != "29" {
		t.Fatalf("prepared group's pids.max: %q %v", b, err)
	}
	if err := g.Close(0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir(g)); !os.IsNotExist(err) {
		t.Errorf("a prepared group nothing joined is left after Close: %v", err)
	}
	g = m.Group("run-3-late"+strconv.Itoa(os.Getpid()), lim)
	g.Close(0)
	g.Prepare()
	if _, err := os.Stat(dir(g)); !os.IsNotExist(err) {
		t.Errorf("a group closed before Prepare was made: %v", err)
	}
}

// TestCloseWaitsForTheThreadInside: Close does not kill a group while a
// thread of this process is inside it (between Enter and its leave) —
// killing the group would kill the whole process — and goes on once it
// left.
func TestCloseWaitsForTheThreadInside(t *testing.T) {
	m := v1Machine(t)
	if m.Mode() != ModeV1 {
		t.Skipf("threads enter groups on v1 only: %s", m.Mode())
	}
	g := m.Group("run-3-inside"+strconv.Itoa(os.Getpid()), limits.Limits{Tasks: 32, Memory: 512 << 20, CPUWeight: 50})
	entered, out, left := make(chan error), make(chan struct{}), make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		leave, err := g.EnterFunc()(unix.Gettid())
		entered <- err
		if err != nil {
			return
		}
		<-out
		left <- leave()
	}()
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- g.Close(0) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a thread of this process was inside the group", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(out)
	if err := <-left; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestBareFileIO: readFile and writeFile (bare syscalls, no poller) read
// a file whole past their first buffer, write in one call, and report a
// missing file as fs.ErrNotExist, as the callers test for.
func TestBareFileIO(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	want := strings.Repeat("0123456789", 1000) // past the 4 KiB first read
	if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readFile(p); err != nil || string(got) != want {
		t.Fatalf("readFile: %d bytes, %v", len(got), err)
	}
	if got, err := readFile("/proc/self/cgroup"); err != nil || len(got) == 0 {
		t.Errorf("readFile of a procfs file: %q %v", got, err)
	}
	if err := writeFile(p, "hi"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got[:2]) != "hi" {
		t.Errorf("writeFile wrote %q", got[:2])
	}
	if _, err := readFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readFile of a missing file: %v", err)
	}
	if err := writeFile(filepath.Join(dir, "missing"), "1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writeFile of a missing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("writeFile created the file")
	}
}

// countingBackend is a backend whose groups hold the pids a test gives,
// counting what Close asks of it.
type countingBackend struct {
	rlimitOnly
	mu                    sync.Mutex
	inside                []int
	lists, kills, removes int
}

func (b *countingBackend) place(string, limits.Limits, int) error { return nil }
func (b *countingBackend) procs(string) ([]int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lists++
	return slices.Clone(b.inside), nil
}
func (b *countingBackend) kill(string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.kills++
	b.inside = nil
	return nil
}
func (b *countingBackend) remove(string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removes++
	return nil
}

// TestCloseOfAnEmptyGroupListsOnce: a run's group found empty once it is
// closed stays so (nothing joins a closed group, nothing is left inside
// to fork): Close lists it once and removes it, without the kill's own
// listing; a group with a process left is killed before its removal.
func TestCloseOfAnEmptyGroupListsOnce(t *testing.T) {
	for _, tc := range []struct {
		inside           []int
		lists, kills, rm int
	}{
		{nil, 1, 0, 1},
		{[]int{12345}, 1, 1, 1},
	} {
		b := &countingBackend{inside: tc.inside}
		m := &Manager{b: b}
		g := m.Group("run-close", limits.Default)
		if err := g.Place(1<<22 + 1); err != nil { // no such process: no descendants
			t.Fatal(err)
		}
		if err := g.Close(0); err != nil {
			t.Fatal(err)
		}
		if b.lists != tc.lists || b.kills != tc.kills || b.removes != tc.rm {
			t.Errorf("inside %v: %d lists, %d kills, %d removals; want %d, %d, %d",
				tc.inside, b.lists, b.kills, b.removes, tc.lists, tc.kills, tc.rm)
		}
	}
}

// creatingBackend is a countingBackend that makes groups ahead
// (Group.Prepare), finding the name taken when existed is set.
type creatingBackend struct {
	countingBackend
	existed bool
}

func (b *creatingBackend) create(string, limits.Limits) (bool, error) { return b.existed, nil }

// TestCloseOfAGroupNothingJoined: a group made ahead that no thread or
// process ever joined (a run that only called an MCP server) is removed
// at Close without being listed or killed; one whose name was found
// taken when it was made (a crashed daemon's group its sweep could not
// kill) holds what nobody knows, and is listed and killed. spec: L4
func TestCloseOfAGroupNothingJoined(t *testing.T) {
	for _, tc := range []struct {
		existed             bool
		lists, kills, rmdir int
	}{
		{false, 0, 0, 1},
		{true, 1, 1, 1},
	} {
		b := &creatingBackend{existed: tc.existed}
		b.inside = []int{12345}
		if !tc.existed {
			b.inside = nil
		}
		m := &Manager{b: b}
		g := m.Group("run-nothing", limits.Default)
		g.Prepare()
		g.mu.Lock()
		made := g.made
		g.mu.Unlock()
		<-made // made before the close (a close first makes nothing)
		if err := g.Close(0); err != nil {
			t.Fatal(err)
		}
		if b.lists != tc.lists || b.kills != tc.kills || b.removes != tc.rmdir {
			t.Errorf("existed %v: %d lists, %d kills, %d removals; want %d, %d, %d",
				tc.existed, b.lists, b.kills, b.removes, tc.lists, tc.kills, tc.rmdir)
		}
	}
}
