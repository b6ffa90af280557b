package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/procstat"
)

// BuiltinLauncher starts terminals itself where no systemd user manager
// answers. The process — ctxterm, on the host; its bwrap dies with it —
// runs in its own session (Setsid), with no PR_SET_PDEATHSIG: like a unit,
// it outlives a daemon restart. The daemon that started it reaps it; a later
// daemon adopts it from its launch receipt (pid + start time + boot id)
// and watches it through a pidfd (its exit status then comes from
// ctxterm's own "exited" event). Where neither exists it would be
// reparented to init (or the nearest subreaper), which reaps it.
type BuiltinLauncher struct {
	roots *launchroot.Registry
	log   *slog.Logger

	mu       sync.Mutex
	children map[int]*builtinChild // started by this daemon, keyed by pid
	adopted  map[int]func()        // launch-root releases of adopted terminals

	// stops counts Stop's escalations still under way; Close waits for them.
	stops sync.WaitGroup
}

type builtinChild struct {
	start uint64
	done  chan struct{}
	exit  terminal.Exit
}

var _ terminal.Launcher = (*BuiltinLauncher)(nil)

// NewBuiltinLauncher returns the built-in launcher; roots may be nil (no
// launch-root registration, tests only).
func NewBuiltinLauncher(roots *launchroot.Registry, log *slog.Logger) *BuiltinLauncher {
	return &BuiltinLauncher{roots: roots, log: log, children: map[int]*builtinChild{}, adopted: map[int]func(){}}
}

// Name is "builtin".
func (b *BuiltinLauncher) Name() string { return LauncherBuiltin }

// Start starts the terminal holding on a pipe (ctxterm --hold-fd), registers
// its launch root (U2) — ctxterm, the host of the sandbox — then lets it
// run. spec: T1 L2 U2
func (b *BuiltinLauncher) Start(ctx context.Context, s terminal.LaunchSpec) (terminal.Receipt, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return terminal.Receipt{}, fmt.Errorf("builtin launcher: %w", err)
	}
	defer pr.Close()
	defer pw.Close()
	argv, err := s.Command(terminal.Hold{FD: 3}) // ExtraFiles[0]
	if err != nil {
		return terminal.Receipt{}, fmt.Errorf("builtin launcher: %w", err)
	}
	logf, err := os.OpenFile(s.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return terminal.Receipt{}, fmt.Errorf("builtin launcher: log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{}, s.Env...) // the sandbox's, which ctxterm hands bwrap by descriptor (B3)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf // a file: a pipe would break with the daemon (SIGPIPE)
	cmd.ExtraFiles = []*os.File{pr}
	// Its own session and no parent-death signal: the terminal outlives
	// the daemon (T1: ctxterm is its own unit). spec: T1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return terminal.Receipt{}, fmt.Errorf("builtin launcher: start: %w", err)
	}
	pid := cmd.Process.Pid
	fail := func(err error) (terminal.Receipt, error) {
		killTree(pid)
		_ = cmd.Wait()
		return terminal.Receipt{}, fmt.Errorf("builtin launcher: %w", err)
	}
	st, err := procstat.Read(pid)
	if err != nil {
		return fail(err)
	}
	boot, err := procstat.BootID()
	if err != nil {
		return fail(err)
	}
	release := func() {}
	if b.roots != nil {
		// spec: U2 — registered before the sandboxed program runs.
		if release, err = b.roots.Register(pid, s.Ident); err != nil {
			return fail(err)
		}
	}
	if _, err := pw.Write([]byte{'\n'}); err != nil {
		release()
		return fail(fmt.Errorf("release the block fd: %w", err))
	}
	ch := &builtinChild{start: st.StartTime, done: make(chan struct{})}
	b.mu.Lock()
	b.children[pid] = ch
	b.mu.Unlock()
	go func() { // the reaper
		err := cmd.Wait()
		ch.exit = exitOf(cmd, err)
		release()
		close(ch.done)
	}()
	r := s.Receipt
	r.Launcher, r.PID, r.StartTime, r.BootID = LauncherBuiltin, pid, st.StartTime, boot
	return r, nil
}

func exitOf(cmd *exec.Cmd, err error) terminal.Exit {
	ex := terminal.Exit{At: time.Now(), Reason: "exited"}
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Status, ex.Known, ex.Reason = 128+int(ws.Signal()), true, "killed by signal "+ws.Signal().String()
			return ex
		}
		ex.Status, ex.Known = ps.ExitCode(), true
		return ex
	}
	if err != nil {
		ex.Reason = err.Error()
	}
	return ex
}

// Adopt takes over a terminal started by an earlier daemon: the receipt's
// pid must still be the recorded process; its launch root is registered
// again (the registry lives in the daemon's memory). spec: T1 L5
func (b *BuiltinLauncher) Adopt(ctx context.Context, r terminal.Receipt) error {
	if r.Launcher != LauncherBuiltin {
		return fmt.Errorf("builtin launcher: receipt of the %q launcher: %w", r.Launcher, terminal.ErrGone)
	}
	if !terminal.Alive(r) {
		return fmt.Errorf("builtin launcher: pid %d: %w", r.PID, terminal.ErrGone)
	}
	b.mu.Lock()
	_, own := b.children[r.PID]
	b.mu.Unlock()
	if own || b.roots == nil {
		return nil
	}
	release, err := b.roots.Register(r.PID, launchroot.Identity{UID: r.UID, Agent: r.Agent, Session: r.Session, Run: r.Terminal})
	if err != nil {
		b.log.Warn("adopted terminal: launch root not registered", "pid", r.PID, "err", err)
		return nil
	}
	if !terminal.Alive(r) { // pinned by the registry now: still ours?
		release()
		return fmt.Errorf("builtin launcher: pid %d: %w", r.PID, terminal.ErrGone)
	}
	b.mu.Lock()
	b.adopted[r.PID] = release
	b.mu.Unlock()
	return nil
}

// Wait waits for the end of r's process.
func (b *BuiltinLauncher) Wait(ctx context.Context, r terminal.Receipt) (terminal.Exit, error) {
	b.mu.Lock()
	ch, own := b.children[r.PID]
	b.mu.Unlock()
	if own && ch.start == r.StartTime {
		select {
		case <-ch.done:
			b.mu.Lock()
			delete(b.children, r.PID)
			b.mu.Unlock()
			return ch.exit, nil
		case <-ctx.Done():
			return terminal.Exit{}, ctx.Err()
		}
	}
	if err := waitPID(ctx, r); err != nil {
		return terminal.Exit{}, err
	}
	b.mu.Lock()
	if release, ok := b.adopted[r.PID]; ok {
		release()
		delete(b.adopted, r.PID)
	}
	b.mu.Unlock()
	return terminal.Exit{At: time.Now(), Reason: "gone (not our child: status in ctxterm's exited event)"}, nil
}

// Stop hangs up ctxterm, the receipt's process (SIGHUP: it hangs up the
// PTY, records "exited" and exits; its sandbox dies with it), then SIGKILLs
// whatever is left after the grace period.
func (b *BuiltinLauncher) Stop(ctx context.Context, r terminal.Receipt, grace time.Duration) error {
	if !terminal.Alive(r) {
		return nil // Wait reports it
	}
	_ = signalPinned(r, unix.SIGHUP)
	b.stops.Add(1)
	go func() {
		defer b.stops.Done()
		wctx, cancel := context.WithTimeout(context.Background(), stopGrace(grace))
		defer cancel()
		if err := waitPID(wctx, r); errors.Is(err, context.DeadlineExceeded) {
			b.log.Warn("terminal ignored the hang-up; killing it", "pid", r.PID)
			killtree.Signal(r.PID, unix.SIGKILL)
			_ = signalPinned(r, unix.SIGKILL) // the terminal itself through its pidfd: its pid may be reused
		}
	}()
	return nil
}

// Close waits, until ctx ends, for the escalations of the terminals being
// stopped, so a stopping daemon still SIGKILLs a terminal that ignored its
// hang-up. The terminals themselves live on (T1).
func (b *BuiltinLauncher) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() { b.stops.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("builtin launcher: terminals still being stopped: %w", ctx.Err())
	}
}

// killTree SIGKILLs pid and everything below it.
func killTree(pid int) {
	killtree.Kill(pid)
}
