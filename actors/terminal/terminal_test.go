package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/procstat"
	"github.com/cortexfs/ctx/internal/termres"
	"github.com/cortexfs/ctx/internal/workspace"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeLauncher runs `sleep` instead of bwrap and serves a socket at the
// receipt's path, standing in for ctxterm; what it saw is recorded.
type fakeLauncher struct {
	mu    sync.Mutex
	procs map[int]*fakeProc
	argv  []string
	env   []string
}

type fakeProc struct {
	cmd  *exec.Cmd
	ln   net.Listener
	view *os.File // the view FIFO, read end, as ctxterm --view-hold opens it
	done chan struct{}
}

func newFake() *fakeLauncher { return &fakeLauncher{procs: map[int]*fakeProc{}} }

func (f *fakeLauncher) Name() string { return "fake" }

func (f *fakeLauncher) Start(ctx context.Context, s LaunchSpec) (Receipt, error) {
	argv, err := s.Command(Hold{})
	if err != nil {
		return Receipt{}, err
	}
	// Two levels below, as ctxterm runs bwrap and bwrap its sandboxed
	// process: the daemon finds and pins that grandchild.
	cmd := exec.Command("sh", "-c", `sh -c "sleep 60; :" & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Receipt{}, err
	}
	ln, err := net.Listen("unix", s.Receipt.Socket)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return Receipt{}, err
	}
	p := &fakeProc{cmd: cmd, ln: ln, done: make(chan struct{})}
	for i, a := range argv {
		if a == "--view-hold" && i+1 < len(argv) {
			if p.view, err = os.OpenFile(argv[i+1], os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				ln.Close()
				return Receipt{}, err
			}
		}
	}
	go func() {
		cmd.Wait()
		ln.Close()
		if p.view != nil {
			p.view.Close()
		}
		close(p.done)
	}()
	st, _ := procstat.Read(cmd.Process.Pid)
	boot, _ := procstat.BootID()
	f.mu.Lock()
	f.procs[cmd.Process.Pid] = p
	f.argv, f.env = argv, s.Env
	f.mu.Unlock()
	r := s.Receipt
	r.Launcher, r.PID, r.StartTime, r.BootID = "fake", cmd.Process.Pid, st.StartTime, boot
	return r, nil
}

func (f *fakeLauncher) Adopt(ctx context.Context, r Receipt) error {
	if !Alive(r) {
		return ErrGone
	}
	return nil
}

func (f *fakeLauncher) Wait(ctx context.Context, r Receipt) (Exit, error) {
	f.mu.Lock()
	p := f.procs[r.PID]
	f.mu.Unlock()
	select {
	case <-p.done:
		return Exit{Status: p.cmd.ProcessState.ExitCode(), Known: true, Reason: "exited", At: time.Now()}, nil
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}

func (f *fakeLauncher) Stop(ctx context.Context, r Receipt, grace time.Duration) error {
	f.mu.Lock()
	p := f.procs[r.PID]
	f.mu.Unlock()
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (f *fakeLauncher) killAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

type world struct {
	cfg *config.Config
	sys *actor.ActorSystem
	ws  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := t.TempDir()
	l := layout.Layout{Root: filepath.Join(base, "root"), Runtime: filepath.Join(base, "run"), UID: os.Getuid()}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	if err := l.EnsureRuntime(); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(base, "agent-exe")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	if err := agentdef.Create(l, "a", agentdef.CreateOptions{Exec: exe}); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Layout: l, Bwrap: "/usr/bin/bwrap", CancelGrace: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Procs: &sync.WaitGroup{}}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Log }))
	t.Cleanup(sys.Shutdown)
	ws := filepath.Join(base, "ws")
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	return &world{cfg: cfg, sys: sys, ws: ws}
}

func (w *world) ask(t *testing.T, pid *actor.PID, m any) any {
	t.Helper()
	res, err := w.sys.Root.RequestFuture(pid, m, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("%T: %v", m, err)
	}
	return res
}

// Start, stop, restart of the actor with the process alive (adoption), and
// the records each step leaves. spec: T1 T5 L2 L3 L5
func TestStartStopAdopt(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	defer f.killAll()
	l := w.cfg.Layout
	pid := w.sys.Root.Spawn(Props(w.cfg, f, "a", "default"))

	sr := w.ask(t, pid, &Start{Workspace: w.ws}).(*StartResponse)
	if sr.Err != nil || sr.Status.State != StateLive || sr.Status.Generation != 1 || sr.Already {
		t.Fatalf("start: %+v", sr)
	}
	// The argv: ctxterm on the host (the runtime socket, the resource's
	// events.jsonl) running bwrap running tsh in /workspace, the workspace
	// writable with .git read-only, B3 environment only — given to ctxterm
	// as its environment, never on the command line; neither the socket
	// nor the events file is in the sandbox.
	args := strings.Join(f.argv, " ")
	if len(f.argv) == 0 || f.argv[0] != filepath.Join(l.BinDir(), "ctxterm") {
		t.Errorf("argv[0] is not the host's ctxterm: %v", f.argv)
	}
	events := filepath.Join(l.TerminalDir("a", "default"), "events.jsonl")
	for _, want := range []string{
		"--listen " + l.RuntimeTerminalSocket("a", "default"), "--events " + events, // The shell held until its view was checked (spec: B1):
		"--sandboxed --view-hold " + filepath.Join(filepath.Dir(l.RuntimeTerminalSocket("a", "default")), "view-g1.fifo") + " -- /usr/bin/bwrap ",
		"-- " + Program, "--chdir /workspace", "--bind " + w.ws + " /workspace",
		"--ro-bind " + w.ws + "/.git /workspace/.git", "--cap-drop ALL",
		"--unshare-pid", "--unshare-net", "--clearenv", "--as-pid-1", "--die-with-parent",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("argv lacks %q:\n%s", want, args)
		}
	}
	bw := args[strings.Index(args, "/usr/bin/bwrap"):]
	for _, bad := range []string{"--new-session", events, filepath.Dir(l.RuntimeTerminalSocket("a", "default")), "--block-fd"} {
		if strings.Contains(bw, bad) {
			t.Errorf("bwrap argv has %q:\n%s", bad, bw)
		}
	}
	env := strings.Join(f.env, " ")
	if strings.Contains(env, "CTX_RUN") || strings.Contains(env, "CTX_CONTROL_SOCKET") || !strings.Contains(env, "HOME=/home/agent") {
		t.Errorf("environment not B3: %s", env)
	}
	if strings.Contains(args, "--setenv") || strings.Contains(args, "CTX_AGENT") || strings.Contains(args, "TERM") {
		t.Errorf("environment on the command line:\n%s", args)
	}
	again := w.ask(t, pid, &Start{Workspace: w.ws}).(*StartResponse)
	if again.Err != nil || !again.Already || again.Status.PID != sr.Status.PID {
		t.Errorf("second start: %+v", again)
	}
	rec, err := ReadReceipt(LaunchReceiptPath(l, "a", "default"))
	if err != nil || rec.Kind != KindLaunch || rec.PID != sr.Status.PID || rec.Terminal != sr.Status.ID {
		t.Fatalf("launch receipt: %+v %v", rec, err)
	}

	// The daemon shuts down: the actor stops, the process lives on — its
	// sandboxed process too (the pin is let go of, not used).
	child, err := grandchild(rec.PID)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if !Alive(rec) || !running(child) {
		t.Fatal("the terminal died with its actor")
	}
	// The next actor adopts it from the receipt and can stop it.
	pid = w.sys.Root.Spawn(Props(w.cfg, f, "a", "default"))
	st := w.ask(t, pid, &StatusRequest{}).(*StatusResponse)
	if st.Status.State != StateLive {
		t.Errorf("status after adoption: %+v", st)
	}
	stop := w.ask(t, pid, &Stop{}).(*StopResponse)
	if stop.Err != nil || stop.Cleanup.Kind != KindCleanup || stop.Cleanup.Reason != "stop" || stop.Cleanup.Generation != 1 {
		t.Fatalf("stop: %+v", stop)
	}
	if _, err := os.Stat(LaunchReceiptPath(l, "a", "default")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("launch receipt after stop: %v", err)
	}
	meta, _ := os.ReadFile(filepath.Join(l.AgentControl("a"), "meta.json"))
	var m map[string]Receipt
	if err := json.Unmarshal(meta, &m); err != nil || m["cleanup"].Terminal != rec.Terminal || m["cleanup"].Reason != "stop" {
		t.Errorf("meta.json: %s %v", meta, err)
	}
	evs, _ := termres.Read(l.TerminalDir("a", "default"))
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, " "); got != "created agent.start exited agent.stop" {
		t.Errorf("events: %s", got)
	}
	if r := w.ask(t, pid, &Stop{}).(*StopResponse); !errors.Is(r.Err, ErrNotRunning) {
		t.Errorf("stop with nothing live: %+v", r)
	}
	// A new start is generation 2 of the same resource.
	sr2 := w.ask(t, pid, &Start{Workspace: w.ws}).(*StartResponse)
	if sr2.Err != nil || sr2.Status.Generation != 2 || sr2.Status.ID != sr.Status.ID {
		t.Errorf("restart: %+v", sr2)
	}
	w.ask(t, pid, &Stop{})
	w.sys.Root.PoisonFuture(pid).Wait()
}

// ctxterm killed outright (SIGKILL; the OOM killer) ends bwrap but not the
// process bwrap held or had just released, which lives on unsupervised:
// the daemon kills it through its pin once it sees ctxterm's end, before
// the view's placeholders go (the cleanup receipt is written after) — also
// for a terminal adopted after a restart, which it pins again. spec: B1
func TestShellKilledWithItsTerminal(t *testing.T) {
	for _, how := range []string{"launched", "adopted"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			f := newFake()
			defer f.killAll()
			l := w.cfg.Layout
			pid := w.sys.Root.Spawn(Props(w.cfg, f, "a", "default"))
			sr := w.ask(t, pid, &Start{Workspace: w.ws}).(*StartResponse)
			if sr.Err != nil {
				t.Fatalf("start: %+v", sr)
			}
			if how == "adopted" {
				w.sys.Root.PoisonFuture(pid).Wait()
				pid = w.sys.Root.Spawn(Props(w.cfg, f, "a", "default"))
				// A start waits for the adoption (a status is read off
				// the files at once) and finds the terminal running.
				if again := w.ask(t, pid, &Start{Workspace: w.ws}).(*StartResponse); again.Err != nil || !again.Already {
					t.Fatalf("not adopted: %+v", again)
				}
			}
			defer func() { w.sys.Root.PoisonFuture(pid).Wait() }()
			child, err := grandchild(sr.Status.PID)
			if err != nil {
				t.Fatal(err)
			}
			syscall.Kill(sr.Status.PID, syscall.SIGKILL) // the stand-in for ctxterm alone
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := ReadReceipt(CleanupReceiptPath(l, "a", "default")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the end was not recorded")
				}
			}
			if running(child) {
				t.Errorf("the sandboxed process %d outlived its ctxterm's end", child)
			}
		})
	}
}

// running: pid is a process that is not a zombie.
func running(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(st), ") Z ")
}

// A receipt whose process ended while no daemon watched: the actor cleans
// up at start (reason "gone"). spec: L3 L5
func TestGoneAtAdoption(t *testing.T) {
	w := newWorld(t)
	f := newFake()
	defer f.killAll()
	l := w.cfg.Layout
	os.MkdirAll(l.TerminalDir("a", "s1"), 0o700)
	id, _ := termres.Ensure(l.TerminalDir("a", "s1"))
	dead := Receipt{Kind: KindLaunch, Launcher: "fake", PID: 999999, StartTime: 1, BootID: "x", Agent: "a", Session: "s1",
		Generation: 3, Terminal: id, Socket: filepath.Join(l.Runtime, "nope.sock")}
	if err := WriteReceipt(LaunchReceiptPath(l, "a", "s1"), dead); err != nil {
		t.Fatal(err)
	}
	if got := LaunchReceipts(l); len(got) != 1 || got[0] != [2]string{"a", "s1"} {
		t.Fatalf("LaunchReceipts: %v", got)
	}
	pid := w.sys.Root.Spawn(Props(w.cfg, f, "a", "s1"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := ReadReceipt(CleanupReceiptPath(l, "a", "s1"))
		if err == nil {
			if c.Reason != "gone" || c.Generation != 3 {
				t.Errorf("cleanup: %+v", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no cleanup receipt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The cleanup receipt and the agent.stop event are written one after
	// the other: wait for both.
	var evs []byte
	for {
		evs, _ = os.ReadFile(filepath.Join(l.TerminalDir("a", "s1"), "events.jsonl"))
		if bytes.Contains(evs, []byte(`"exited"`)) && bytes.Contains(evs, []byte(`"agent.stop"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("events: %s", evs)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.sys.Root.PoisonFuture(pid).Wait()
}

func TestUnitName(t *testing.T) {
	l := layout.Layout{Root: "/ctx"}
	n := UnitName(l, "coder", "default", 2)
	if !strings.HasPrefix(n, "ctxterm-") || !strings.HasSuffix(n, "-coder-default-g2.service") {
		t.Errorf("unit name %q", n)
	}
	if UnitName(layout.Layout{Root: "/other"}, "coder", "default", 2) == n {
		t.Error("two roots share a unit name")
	}
}

// failingLauncher is the fake launcher whose starts all fail.
type failingLauncher struct{ *fakeLauncher }

func (failingLauncher) Start(context.Context, LaunchSpec) (Receipt, error) {
	return Receipt{}, errors.New("no launch")
}

// A terminal whose launch fails after its view was made leaves no
// placeholder of the view's absent protected names in the workspace (the
// view's Held is ended). spec: B1
func TestLaunchFailedLeavesNoPlaceholders(t *testing.T) {
	w := newWorld(t)
	w.cfg.Placeholders = workspace.NewRegistry()
	pid := w.sys.Root.Spawn(Props(w.cfg, failingLauncher{newFake()}, "a", "default"))
	sr := w.ask(t, pid, &Start{Workspace: w.ws}).(*StartResponse)
	if sr.Err == nil {
		t.Fatalf("start: %+v, want the launcher's error", sr)
	}
	ents, _ := os.ReadDir(w.ws)
	for _, e := range ents {
		if e.Name() != ".git" {
			t.Errorf("left in the workspace: %s", e.Name())
		}
	}
	// Nor an ABI alias naming no live endpoint (L6), nor a view FIFO.
	l := w.cfg.Layout
	if _, err := os.Lstat(ABISocket(l, "a", "default")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ABI socket alias is left: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(l.RuntimeTerminalSocket("a", "default")), "view-g*.fifo")); len(left) > 0 {
		t.Errorf("view FIFOs are left: %v", left)
	}
}
