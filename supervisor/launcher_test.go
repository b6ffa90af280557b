package supervisor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/procstat"
	"github.com/cortexfs/ctx/ipc"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sleeper is a LaunchSpec whose program waits for the block fd, then sleeps.
func sleeper(t *testing.T) terminal.LaunchSpec {
	return terminal.LaunchSpec{
		Command: func(h terminal.Hold) ([]string, error) {
			script := "exec sleep 60"
			switch {
			case h.FD > 0:
				script = "head -c1 <&" + strconv.Itoa(h.FD) + " >/dev/null; exec sleep 60"
			case h.FIFO != "":
				script = "head -c1 <" + h.FIFO + " >/dev/null; exec sleep 60"
			}
			return []string{"/bin/sh", "-c", script}, nil
		},
		HoldFIFO: filepath.Join(t.TempDir(), "hold.fifo"),
		Unit:     "test.service",
		Log:      filepath.Join(t.TempDir(), "log"),
		Ident:    launchroot.Identity{UID: os.Getuid(), Agent: "a", Session: "s", Run: "term-0000000000000000"},
		Receipt:  terminal.Receipt{Kind: terminal.KindLaunch, Agent: "a", Session: "s", Generation: 1},
	}
}

// The built-in launcher: own session, no parent-death signal, launch root
// registered; a second launcher (the next daemon) adopts, waits and stops
// through the receipt alone. spec: T1 L2 L5 U2
func TestBuiltinLauncherStartAdoptStop(t *testing.T) {
	roots, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuiltinLauncher(roots, quiet)
	r, err := b.Start(context.Background(), sleeper(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Launcher != LauncherBuiltin || r.PID <= 0 || r.StartTime == 0 || r.BootID == "" || !terminal.Alive(r) {
		t.Fatalf("receipt: %+v", r)
	}
	// Past the block fd: the shell has exec'd sleep.
	for i := 0; i < 250; i++ {
		if st, err := procstat.Read(r.PID); err == nil && st.Comm == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sid, _ := unixGetsid(r.PID); sid != r.PID {
		t.Errorf("terminal session %d, want its own (%d)", sid, r.PID)
	}
	if len(roots.Entries()) != 1 || roots.Entries()[0].PID != r.PID {
		t.Errorf("launch roots: %+v", roots.Entries())
	}
	// The next daemon: a fresh launcher and registry.
	roots2, _ := launchroot.New(os.Getuid())
	b2 := NewBuiltinLauncher(roots2, quiet)
	if err := b2.Adopt(context.Background(), r); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if len(roots2.Entries()) != 1 {
		t.Errorf("adopted launch root not registered: %+v", roots2.Entries())
	}
	var wg sync.WaitGroup
	var ex1, ex2 terminal.Exit
	wg.Add(2)
	go func() { defer wg.Done(); ex1, _ = b.Wait(context.Background(), r) }()
	go func() { defer wg.Done(); ex2, _ = b2.Wait(context.Background(), r) }()
	if err := b2.Stop(context.Background(), r, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !ex1.Known || ex1.Status != 128+1 { // SIGHUP
		t.Errorf("the reaper's exit: %+v", ex1)
	}
	if ex2.Known {
		t.Errorf("an adopter cannot know the status: %+v", ex2)
	}
	if terminal.Alive(r) {
		t.Error("alive after stop")
	}
	if err := b2.Adopt(context.Background(), r); !errors.Is(err, terminal.ErrGone) {
		t.Errorf("adopt a gone terminal: %v", err)
	}
}

// Wait returns when its context ends (the actor stops; the process lives on).
func TestBuiltinLauncherWaitCancel(t *testing.T) {
	b := NewBuiltinLauncher(nil, quiet)
	r, err := b.Start(context.Background(), sleeper(t))
	if err != nil {
		t.Fatal(err)
	}
	defer killTree(r.PID)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.Wait(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait: %v", err)
	}
	if !terminal.Alive(r) {
		t.Error("the terminal died when a waiter gave up")
	}
	// Adopted-style wait (not our child) also honours ctx.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if err := waitPID(ctx2, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waitPID: %v", err)
	}
}

// fakeManager is a UnitManager running the unit's argv as a child.
type fakeManager struct {
	mu      sync.Mutex
	props   []string
	b       *BuiltinLauncher
	recs    map[string]terminal.Receipt
	pingErr error
	onShow  func(pid int) // called before Show answers
}

func (m *fakeManager) Ping(context.Context) error { return m.pingErr }
func (m *fakeManager) StartTransient(ctx context.Context, name string, props, argv []string) error {
	var env []string // what the manager reads from the unit's EnvironmentFile
	for _, p := range props {
		if path, ok := strings.CutPrefix(p, "EnvironmentFile="); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			env = strings.Fields(string(b))
		}
	}
	r, err := m.b.Start(ctx, terminal.LaunchSpec{Command: func(terminal.Hold) ([]string, error) { return argv, nil }, Env: env, Log: os.DevNull})
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.props, m.recs[name] = props, r
	return nil
}
func (m *fakeManager) Show(ctx context.Context, name string) (map[string]string, error) {
	m.mu.Lock()
	r, ok := m.recs[name]
	m.mu.Unlock()
	if !ok {
		return nil, errors.New("not found")
	}
	if m.onShow != nil {
		m.onShow(r.PID)
	}
	state := "inactive"
	if terminal.Alive(r) {
		state = "active"
	}
	return map[string]string{"MainPID": strconv.Itoa(r.PID), "InvocationID": "inv-" + name, "ActiveState": state}, nil
}
func (m *fakeManager) Stop(ctx context.Context, name string) error {
	m.mu.Lock()
	r := m.recs[name]
	m.mu.Unlock()
	killTree(r.PID)
	return nil
}

// The systemd launcher records unit and invocation, sets the kill mode
// and SIGHUP, adopts by invocation id and stops through the manager. spec: T1 L2
func TestSystemdLauncherWithManager(t *testing.T) {
	m := &fakeManager{b: NewBuiltinLauncher(nil, quiet), recs: map[string]terminal.Receipt{}}
	if _, err := NewSystemdLauncherWith(context.Background(), &fakeManager{pingErr: errors.New("no bus")}, nil, quiet); err == nil {
		t.Error("a manager that does not answer was accepted")
	}
	roots, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSystemdLauncherWith(context.Background(), m, roots, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// spec: U2 — the unit's program waits on the hold
	// FIFO until the launch root is registered: while the launcher reads
	// the unit (before it registers) the program has not gone past it.
	var held bool
	m.onShow = func(pid int) {
		if len(roots.Entries()) > 0 {
			return // a later Show (adoption)
		}
		time.Sleep(200 * time.Millisecond)
		held = !runsSleep(pid)
	}
	sp := sleeper(t)
	r, err := s.Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer killTree(r.PID)
	if !held {
		t.Error("the unit's program ran before its launch root was registered")
	}
	if e := roots.Entries(); len(e) != 1 || e[0].PID != r.PID {
		t.Errorf("launch roots: %+v", e)
	}
	waitFor(t, "the program past the hold", func() bool { return runsSleep(r.PID) })
	if _, err := os.Stat(sp.HoldFIFO); err == nil {
		t.Error("the hold FIFO was left behind")
	}
	if r.Launcher != LauncherSystemd || r.Unit != "test.service" || r.Invocation != "inv-test.service" || !terminal.Alive(r) {
		t.Errorf("receipt: %+v", r)
	}
	props := strings.Join(m.props, " ")
	for _, want := range []string{"KillMode=control-group", "SendSIGHUP=yes"} {
		if !strings.Contains(props, want) {
			t.Errorf("unit properties lack %s: %s", want, props)
		}
	}
	if err := s.Adopt(context.Background(), r); err != nil {
		t.Errorf("adopt: %v", err)
	}
	other := r
	other.Invocation = "inv-old"
	if err := s.Adopt(context.Background(), other); !errors.Is(err, terminal.ErrGone) {
		t.Errorf("adopt another invocation: %v", err)
	}
	done := make(chan struct{})
	go func() { s.Wait(context.Background(), r); close(done) }()
	if err := s.Stop(context.Background(), r, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the stop")
	}
}

func TestParseTerminalRequest(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ok     bool
		errIs  error
		wantOp string
	}{
		{`{"op":"ping"}`, false, nil, ""},
		{`{"op":"send","id":"x"}`, false, nil, ""},
		{`{"op":"terminal.status","agent":"a"}`, true, nil, OpTerminalStatus},
		{`{"op":"terminal.start","agent":"a","workspace":"/w"}`, true, nil, OpTerminalStart},
		{`{"op":"terminal.start","agent":"a"}`, true, ipc.ErrBadRequest, ""},
		{`{"op":"terminal.stop","agent":"a","extra":1}`, true, ipc.ErrBadRequest, ""},
		{`{"op":"terminal.stop","agent":"../a"}`, true, nil, ""},
	} {
		req, ok, err := parseTerminalRequest([]byte(tc.line))
		if ok != tc.ok {
			t.Errorf("%s: ok=%v", tc.line, ok)
			continue
		}
		if tc.errIs != nil && !errors.Is(err, tc.errIs) {
			t.Errorf("%s: err=%v, want %v", tc.line, err, tc.errIs)
		}
		if tc.wantOp != "" && (err != nil || req.Op != tc.wantOp || req.Session != "default") {
			t.Errorf("%s: %+v %v", tc.line, req, err)
		}
		if strings.Contains(tc.line, "../a") && err == nil {
			t.Errorf("%s: accepted a bad name", tc.line)
		}
	}
}

func unixGetsid(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return strconv.Atoi(f[3]) // field 6: session
}

// runsSleep says whether pid or a descendant has exec'd sleep (the sleeper
// got past its hold).
func runsSleep(pid int) bool {
	for _, p := range append([]int{pid}, killtree.Descendants(pid)...) {
		if st, err := procstat.Read(p); err == nil && st.Comm == "sleep" {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestBuiltinLauncherCloseWaitsForEscalations: a terminal that ignores its
// hang-up is SIGKILLed after the stop grace by a goroutine the launcher
// owns; Close (the daemon's stop) waits for it, bounded by its context.
func TestBuiltinLauncherCloseWaitsForEscalations(t *testing.T) {
	b := NewBuiltinLauncher(nil, quiet)
	sp := sleeper(t)
	sp.Command = func(h terminal.Hold) ([]string, error) {
		return []string{"/bin/sh", "-c", "trap '' HUP; head -c1 <&" + strconv.Itoa(h.FD) + " >/dev/null; exec sleep 60"}, nil
	}
	r, err := b.Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the program past the hold", func() bool { return runsSleep(r.PID) })
	if err := b.Stop(context.Background(), r, 0); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := b.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with an escalation under way = %v, want its deadline", err)
	}
	if !terminal.Alive(r) {
		t.Fatal("the terminal did not ignore its hang-up: nothing to escalate")
	}
	long, cancel2 := context.WithTimeout(context.Background(), stopGrace(0)+5*time.Second)
	defer cancel2()
	if err := b.Close(long); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ex, err := b.Wait(context.Background(), r)
	if err != nil || !ex.Known || ex.Status != 128+9 {
		t.Fatalf("exit %+v %v, want SIGKILL", ex, err)
	}
}
