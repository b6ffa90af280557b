// Package terminal is the actor of one terminal resource (runtime.md T1–T5,
// L2, L3, L5): it starts the agent's persistent terminal through a Launcher
// (ctxterm on the host → bwrap → tsh), writes the launch and cleanup receipts and the
// daemon's events, watches the process, stops it on request, and re-adopts
// it from its receipt after a daemon restart. The terminal outlives the
// actor: stopping the actor (daemon shutdown) leaves the process running.
package terminal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/holdfifo"
	"golang.org/x/sys/unix"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/termres"
)

// ErrBusy: a start, stop or adoption of this terminal is in progress.
var ErrBusy = errors.New("terminal busy: a start or stop is in progress")

// ErrBadWorkspace: the workspace is refused (agentdef.OpenWorkspace says why).
var ErrBadWorkspace = errors.New("bad workspace")

// Actor is one terminal resource: (agent, private session).
type Actor struct {
	cfg      *config.Config
	launcher Launcher
	agent    string
	session  string
	log      *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	rec      *Receipt      // the live generation's launch receipt
	held     *sandbox.Held // what the live generation's view holds (placeholders); nil after a restart
	shell    *shellPin     // the live generation's sandboxed process, pinned; nil after a restart
	adopting bool
	// waitingStops arrived during an adoption or a start.
	waitingStops []*actor.PID
	starting     bool
	stopping     bool
	starts       []pendingStart // answered when the start (or adoption) ends
	stops        []*actor.PID   // answered when the process has ended
}

type pendingStart struct {
	to  *actor.PID
	msg *Start
}

// Receive only dispatches.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.onStarted(c)
	case *Start:
		a.onStart(c, c.Sender(), m)
	case *Stop:
		a.onStop(c, c.Sender())
	case *StatusRequest:
		a.onStatus(c)
	case *adopted:
		a.onAdopted(c, m)
	case *launched:
		a.onLaunched(c, m)
	case *ended:
		a.onEnded(c, m)
	case *finished:
		a.onFinished(c, m)
	case *stopFailed:
		a.onStopFailed(c, m)
	case *actor.Stopping, *actor.Restarting:
		// A restart replaces this incarnation: its goroutines (Wait on the
		// process, a launch) must not report to the next one, which adopts
		// the terminal itself — or one end is recorded twice.
		a.onStopping()
	case *actor.Stopped:
	default:
		a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "terminal", "agent", a.agent, "session", a.session)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	// A launch receipt from an earlier daemon (or actor) is adopted. Reading
	// it is file I/O, so it happens off the actor like the adoption itself;
	// starts and stops wait for it.
	a.adopting = true
	l, agent, session, launcher, log := a.cfg.Layout, a.agent, a.session, a.launcher, a.log
	a.goSend(c, func(ctx context.Context) any {
		rec, err := ReadReceipt(LaunchReceiptPath(l, agent, session))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				log.Warn("unreadable launch receipt; ignoring it", "err", err)
			}
			return &adopted{none: true}
		}
		if err := launcher.Adopt(ctx, rec); err != nil {
			return &adopted{rec: rec, err: err}
		}
		// Its sandboxed process pinned again (spec: B1, shellPin); none
		// when it is not where it runs (ended, or not one process).
		return &adopted{rec: rec, shell: pinGrandchild(rec.PID)}
	})
}

// goSend runs slow work off the actor; its result comes back as a message.
// The goroutine touches no actor field.
func (a *Actor) goSend(c actor.Context, work func(ctx context.Context) any) {
	self, root, ctx := c.Self(), c.ActorSystem().Root, a.ctx
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		m := work(ctx)
		switch {
		case m == nil:
		case ctx.Err() == nil:
			root.Send(self, m)
		default:
			if d, ok := m.(interface{ drop() }); ok {
				d.drop() // the actor stopped meanwhile: what the message holds is let go of
			}
		}
	}()
}

func (a *Actor) onAdopted(c actor.Context, m *adopted) {
	a.adopting = false
	if m.none {
		a.replayStarts(c)
		a.replayStops(c)
		return
	}
	if m.err != nil {
		// The process ended while no daemon watched it.
		a.log.Info("terminal from the launch receipt is gone", "pid", m.rec.PID, "generation", m.rec.Generation, "err", m.err)
		a.rec = &m.rec
		a.onEnded(c, &ended{rec: m.rec, gone: true, exit: Exit{Reason: "gone while no daemon watched it", At: time.Now()}})
		a.replayStops(c)
		return
	}
	a.log.Info("adopted terminal", "launcher", m.rec.Launcher, "unit", m.rec.Unit, "pid", m.rec.PID, "generation", m.rec.Generation, "pinned", m.shell != nil)
	a.rec = &m.rec
	a.shell = m.shell
	a.watch(c, m.rec)
	a.replayStarts(c)
	a.replayStops(c)
}

func (a *Actor) replayStops(c actor.Context) {
	stops := a.waitingStops
	a.waitingStops = nil
	for _, to := range stops {
		a.onStop(c, to)
	}
}

func (a *Actor) replayStarts(c actor.Context) {
	starts := a.starts
	a.starts = nil
	for _, p := range starts {
		a.onStart(c, p.to, p.msg)
	}
}

func (a *Actor) onStart(c actor.Context, to *actor.PID, m *Start) {
	if a.adopting || a.starting || (a.rec != nil && a.stopping) {
		a.starts = append(a.starts, pendingStart{to: to, msg: m})
		return
	}
	if a.rec != nil {
		a.describeTo(c, []pendingStart{{to: to, msg: m}}, true)
		return
	}
	a.starting = true
	a.starts = append(a.starts, pendingStart{to: to, msg: m})
	cfg, launcher, agent, session := a.cfg, a.launcher, a.agent, a.session
	a.goSend(c, func(ctx context.Context) any {
		rec, held, shell, err := launch(ctx, cfg, launcher, agent, session, m.Workspace)
		return &launched{rec: rec, held: held, shell: shell, err: err}
	})
}

func (a *Actor) onLaunched(c actor.Context, m *launched) {
	a.starting = false
	starts := a.starts
	a.starts = nil
	if m.err != nil {
		a.log.Warn("terminal start failed", "err", m.err)
		for _, p := range starts {
			a.reply(c, p.to, &StartResponse{Err: m.err})
		}
		a.replayStops(c)
		return
	}
	a.log.Info(EventAgentStart, "launcher", m.rec.Launcher, "unit", m.rec.Unit, "pid", m.rec.PID,
		"generation", m.rec.Generation, "terminal", m.rec.Terminal, "socket", m.rec.Socket, "workspace", m.rec.Workspace)
	a.rec = &m.rec
	a.held = m.held // released once this generation has ended
	a.shell = m.shell
	a.watch(c, m.rec)
	a.describeTo(c, starts, false)
	a.replayStops(c)
}

// describeTo answers starts with the resource's status, read off the actor.
// Every start but the first of a launch is Already;
// all are when already is set (the terminal was running).
func (a *Actor) describeTo(c actor.Context, starts []pendingStart, already bool) {
	l, agent, session := a.cfg.Layout, a.agent, a.session
	root := c.ActorSystem().Root
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		st, err := Describe(l, agent, session)
		for i, p := range starts {
			if p.to != nil {
				root.Send(p.to, &StartResponse{Status: st, Already: already || i > 0, Err: err})
			}
		}
	}()
}

func (a *Actor) watch(c actor.Context, rec Receipt) {
	launcher := a.launcher
	a.goSend(c, func(ctx context.Context) any {
		ex, err := launcher.Wait(ctx, rec)
		if err != nil {
			return nil // ctx ended: the actor is stopping; the process lives on
		}
		return &ended{rec: rec, exit: ex}
	})
}

func (a *Actor) onStop(c actor.Context, to *actor.PID) {
	if a.adopting || a.starting {
		// Decided once the adoption or start is over (a stop right after a
		// daemon restart must not fail because adoption is still running).
		a.waitingStops = append(a.waitingStops, to)
		return
	}
	if a.rec == nil {
		a.reply(c, to, &StopResponse{Err: fmt.Errorf("terminal %s/%s: %w", a.agent, a.session, ErrNotRunning)})
		return
	}
	a.stops = append(a.stops, to)
	if a.stopping {
		return
	}
	a.stopping = true
	rec, launcher, grace := *a.rec, a.launcher, a.cfg.CancelGrace
	a.goSend(c, func(ctx context.Context) any {
		if err := launcher.Stop(ctx, rec, grace); err != nil {
			return &stopFailed{err: err}
		}
		return nil // Wait reports the end
	})
}

func (a *Actor) onStopFailed(c actor.Context, m *stopFailed) {
	a.stopping = false
	a.log.Warn("terminal stop failed", "err", m.err)
	for _, to := range a.stops {
		a.reply(c, to, &StopResponse{Err: m.err})
	}
	a.stops = nil
	a.replayStarts(c)
}

func (a *Actor) onEnded(c actor.Context, m *ended) {
	if a.rec == nil || a.rec.Generation != m.rec.Generation {
		return
	}
	reason := "exited"
	if a.stopping {
		reason = "stop"
	} else if m.gone {
		reason = "gone"
	}
	l := a.cfg.Layout
	rec, ex, held, shell := m.rec, m.exit, a.held, a.shell
	a.held, a.shell = nil, nil
	a.goSend(c, func(ctx context.Context) any {
		// ctxterm is gone; its sandboxed process goes too (a ctxterm
		// killed outright leaves it running unsupervised), and only
		// then its placeholders, its walls. spec: B1
		shell.kill()
		held.Ended()
		c, err := recordEnd(l, rec, reason, ex)
		return &finished{cleanup: c, err: err}
	})
}

func (a *Actor) onFinished(c actor.Context, m *finished) {
	if m.err != nil {
		a.log.Warn("terminal end not fully recorded", "generation", m.cleanup.Generation, "err", m.err)
	}
	a.log.Info(EventAgentStop, "reason", m.cleanup.Reason, "launcher", m.cleanup.Launcher, "unit", m.cleanup.Unit,
		"pid", m.cleanup.PID, "generation", m.cleanup.Generation, "status", statusText(m.cleanup.Status))
	a.rec, a.stopping = nil, false
	for _, to := range a.stops {
		a.reply(c, to, &StopResponse{Cleanup: m.cleanup})
	}
	a.stops = nil
	a.replayStarts(c)
}

// onStatus reads the resource files off the actor and answers the asker.
func (a *Actor) onStatus(c actor.Context) {
	to, l, agent, session := c.Sender(), a.cfg.Layout, a.agent, a.session
	if to == nil {
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		st, err := Describe(l, agent, session)
		root.RequestWithCustomSender(to, &StatusResponse{Status: st, Err: err}, self)
	}()
}

func (a *Actor) reply(c actor.Context, to *actor.PID, m any) {
	if to != nil {
		c.Send(to, m)
	}
}

// onStopping: the daemon is shutting down (or the actor restarts). The
// terminal keeps running; its receipt lets the next daemon adopt it.
func (a *Actor) onStopping() {
	a.cancel()
	a.wg.Wait()
	a.shell.release()
	a.shell = nil
}

// launch prepares the terminal resource and starts the terminal: the id
// (T5), the socket directory and ABI link (T3), the sandbox (B1–B4), then
// the launcher; it writes the launch receipt (L2) and the agent.start event.
func launch(ctx context.Context, cfg *config.Config, launcher Launcher, agent, session, workspace string) (_ Receipt, _ *sandbox.Held, _ *shellPin, err error) {
	// The view's placeholders are the caller's once the terminal runs;
	// until then, every failure ends them (an error's return leaves the
	// result nil, so they are kept here).
	var held *sandbox.Held
	var abi string
	defer func() {
		if err != nil {
			held.Ended() // the placeholders of a terminal that never ran
			// The ABI alias names a live endpoint only (L6).
			if fi, lerr := os.Lstat(abi); abi != "" && lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
				_ = os.Remove(abi)
			}
		}
	}()
	l := cfg.Layout
	if err := layout.CheckName("session", session); err != nil {
		return Receipt{}, nil, nil, err
	}
	def, err := agentdef.Load(l, agent)
	if err != nil {
		return Receipt{}, nil, nil, err
	}
	// The same rules as a request's workspace on the agent socket
	// (agentdef.OpenWorkspace): the terminal then binds its real path.
	wd, err := agentdef.OpenWorkspace(l, agent, workspace, cfg.Log)
	if err != nil {
		return Receipt{}, nil, nil, fmt.Errorf("%v: %w", err, ErrBadWorkspace)
	}
	workspace = wd.Path
	wd.Close()
	dir := l.TerminalDir(agent, session)
	_, idErr := termres.ID(dir)
	id, err := termres.Ensure(dir) // spec: T5
	if err != nil {
		return Receipt{}, nil, nil, err
	}
	// The session directory is writable inside every sandbox of the agent,
	// and terminal/ is only bound read-only once it exists: refuse a
	// terminal/ that is not a real directory (a symlink planted from inside).
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return Receipt{}, nil, nil, fmt.Errorf("terminal resource %s: not a directory", dir)
	}
	if errors.Is(idErr, os.ErrNotExist) {
		if err := termres.Append(dir, termres.Event{Type: termres.Created, ID: id}); err != nil {
			return Receipt{}, nil, nil, err
		}
	}
	if err := touch(filepath.Join(dir, termres.EventsFile)); err != nil {
		return Receipt{}, nil, nil, err
	}
	gen := readHistory(dir).LastGeneration + 1
	if c, err := ReadReceipt(CleanupReceiptPath(l, agent, session)); err == nil && c.Generation >= gen {
		gen = c.Generation + 1
	}
	sock := l.RuntimeTerminalSocket(agent, session)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return Receipt{}, nil, nil, fmt.Errorf("terminal socket dir: %w", err)
	}
	// spec: T3, L6 — the ABI path aliases the runtime socket.
	abi = ABISocket(l, agent, session)
	if fi, err := os.Lstat(abi); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		_ = os.Remove(abi)
	}
	if err := os.Symlink(sock, abi); err != nil && !errors.Is(err, os.ErrExist) {
		return Receipt{}, nil, nil, fmt.Errorf("terminal ABI socket link: %w", err)
	}
	// View FIFOs a daemon that died mid-start left behind (each try
	// removes its own).
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(sock), "view-g*.fifo"))
	for _, f := range stale {
		_ = os.Remove(f)
	}
	// A start the view check refused ran nothing: sandbox.Start walks
	// and starts it again (a directory moved on the host while the
	// terminal started costs a walk, not the start), each try a
	// generation of its own (a refused try's unit name is not reused).
	v := View(l, def, session, id, workspace, cfg.Placeholders)
	v.Log = cfg.Log
	try := 0
	st, held, err := sandbox.Start(ctx, v, []string{Program}, Env(v), func(spec bwrap.Spec) (started, error) {
		finish(&spec)
		g := gen + try
		try++
		return startOnce(ctx, cfg, launcher, spec, LaunchSpec{
			Env:      LaunchEnv(spec),
			HoldFIFO: filepath.Join(filepath.Dir(sock), "hold.fifo"),
			Unit:     UnitName(l, agent, session, g),
			Log:      filepath.Join(filepath.Dir(filepath.Dir(sock)), session+".log"),
			Ident:    launchroot.Identity{UID: l.UID, Agent: agent, Session: session, Run: id},
			Receipt: Receipt{Kind: KindLaunch, Role: "terminal", UID: l.UID, Socket: sock, ABISocket: abi,
				Agent: agent, Session: session, Generation: g, Terminal: id, Workspace: workspace},
		})
	})
	if err != nil {
		if errors.Is(err, bwrap.ErrMoved) {
			return Receipt{}, nil, nil, fmt.Errorf("terminal view: %w (start it again)", err)
		}
		return Receipt{}, nil, nil, err
	}
	if err := appendEvent(dir, daemonEvent{Type: EventAgentStart, ID: id, Launcher: st.rec.Launcher, Unit: st.rec.Unit,
		Invocation: st.rec.Invocation, PID: st.rec.PID, Generation: st.rec.Generation, Workspace: workspace}); err != nil {
		cfg.Log.Warn("record agent.start", "err", err)
	}
	return st.rec, held, st.shell, nil
}

// started is one try's terminal: its launch receipt, and its sandboxed
// process pinned (shellPin).
type started struct {
	rec   Receipt
	shell *shellPin
}

// noView marks a try whose ctxterm ended by itself before its shell was
// released: bwrap.ErrNoView to sandbox.Start, which tries again when the
// host shows a protected path moved (bwrap failed on a bind source moved
// under it) — the message stays the start's own.
type noView struct{ error }

func (e noView) Unwrap() error        { return e.error }
func (e noView) Is(target error) bool { return target == bwrap.ErrNoView }

// startOnce starts one try of a terminal with bwrap spec s: the launcher
// starts ctxterm (held until the launch root is registered, U2), ctxterm
// serves its socket and starts bwrap, which holds the shell once its view
// is made; the view is checked against the walk and released through a
// FIFO of the try's own (ctxterm --view-hold), and the launch receipt is
// written (L2). A try that fails after the launcher started it is ended —
// its held process killed through its pin, ctxterm stopped and waited
// for — before it returns: its sandbox has the view's placeholders
// mounted, and the launcher lets go of what it keeps for a terminal (its
// launch root, its child) in Wait. spec: B1 T1 L2
func startOnce(ctx context.Context, cfg *config.Config, launcher Launcher, s bwrap.Spec, ls LaunchSpec) (started, error) {
	l, r := cfg.Layout, ls.Receipt
	bw := cfg.Bwrap
	viewFIFO := filepath.Join(filepath.Dir(r.Socket), "view-g"+strconv.Itoa(r.Generation)+".fifo")
	if err := holdfifo.Make(viewFIFO); err != nil {
		return started{}, fmt.Errorf("terminal view: %w", err)
	}
	defer os.Remove(viewFIFO)
	// Whatever is at the socket's path now is not this try's: a socket
	// left by a killed ctxterm, or a live one the actor does not know of
	// (ctxterm refuses to take over a live one, ErrInUse).
	before := stampOf(r.Socket)
	ls.Command = func(h Hold) ([]string, error) {
		h.View = viewFIFO
		return Command(l, r.Agent, r.Session, bw, s, h)
	}
	rec, err := launcher.Start(ctx, ls)
	if err != nil {
		return started{}, err
	}
	// Started means served: wait for ctxterm's socket (bind and listen
	// happen together), so a watch right after start finds it.
	var shell *shellPin
	err = waitSocket(ctx, rec, ls.Log, before)
	if err == nil {
		shell, err = checkView(rec.PID, s.Anchors, 10*time.Second)
	}
	if err == nil {
		err = holdfifo.Release(viewFIFO, func() bool { return Alive(rec) }, 10*time.Second)
	}
	if err == nil {
		rec.Started = time.Now().UTC().Format(time.RFC3339Nano)
		err = WriteReceipt(LaunchReceiptPath(l, r.Agent, r.Session), rec)
	}
	if err == nil {
		return started{rec: rec, shell: shell}, nil
	}
	if !Alive(rec) && !errors.Is(err, bwrap.ErrNoView) {
		err = noView{err}
	}
	shell.kill()
	_ = launcher.Stop(context.Background(), rec, 0)
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, _ = launcher.Wait(wctx, rec)
	cancel()
	return started{}, err
}

// recordEnd writes what is left of an ended generation: an "exited" event
// when ctxterm could not write its own (it was killed), the cleanup
// receipt (L3, projected into meta.json), the agent.stop event; and it
// removes the launch receipt (the generation may no longer be stopped).
// Every step is tried; what failed is returned, joined, for the log — a
// missing receipt or event must be visible, not silently absent.
func recordEnd(l layout.Layout, rec Receipt, reason string, ex Exit) (Receipt, error) {
	now := time.Now()
	dir := l.TerminalDir(rec.Agent, rec.Session)
	var errs []error
	fail := func(what string, err error) {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	if !readHistory(dir).ExitedSince {
		ev := termres.Event{Type: termres.Exited, ID: rec.Terminal, PID: rec.PID, Reason: "recorded by the supervisor: " + ex.Reason}
		if ex.Known {
			ev.Status = termres.Int(ex.Status)
		}
		fail("the exited event", termres.Append(dir, ev))
	}
	c := Cleanup(rec, reason, ex, now)
	fail("the cleanup receipt", WriteReceipt(CleanupReceiptPath(l, rec.Agent, rec.Session), c))
	fail("meta.json", ProjectMeta(l, c))
	fail("the agent.stop event", appendEvent(dir, daemonEvent{Type: EventAgentStop, ID: rec.Terminal, Launcher: rec.Launcher, Unit: rec.Unit,
		Invocation: rec.Invocation, PID: rec.PID, Generation: rec.Generation, Reason: reason, Status: c.Status}))
	fail("removing the launch receipt", os.Remove(LaunchReceiptPath(l, rec.Agent, rec.Session)))
	// The socket and its ABI alias name a live endpoint only (L6).
	fail("removing the socket", os.Remove(rec.Socket))
	if fi, err := os.Lstat(rec.ABISocket); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		fail("removing the ABI socket alias", os.Remove(rec.ABISocket))
	}
	return c, errors.Join(errs...)
}

// touch creates p if needed; p must be a regular file, never a symlink
// (ctxterm appends to it from the host).
func touch(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("terminal: %s: not a regular file", p)
	}
	return nil
}

// ErrNotServed: the terminal's process did not serve its socket in time.
var ErrNotServed = errors.New("terminal did not come up")

// SocketTimeout bounds the wait for a started terminal's socket.
const SocketTimeout = 10 * time.Second

// A stamp tells a file at a path from the one there before: an inode
// number freed by an unlink may come back at once, its change time not.
type stamp struct {
	socket   bool
	dev, ino uint64
	ctime    unix.Timespec
}

// stampOf is the stamp of what is at path (the zero stamp: nothing).
func stampOf(path string) stamp {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return stamp{}
	}
	return stamp{socket: st.Mode&unix.S_IFMT == unix.S_IFSOCK, dev: st.Dev, ino: st.Ino, ctime: st.Ctim}
}

// waitSocket waits for rec's ctxterm to serve its socket: a socket at
// rec.Socket that is not before (what was there before the start).
func waitSocket(ctx context.Context, rec Receipt, log string, before stamp) error {
	deadline := time.Now().Add(SocketTimeout)
	for {
		if now := stampOf(rec.Socket); now.socket && now != before {
			return nil
		}
		if !Alive(rec) || time.Now().After(deadline) || ctx.Err() != nil {
			tail, _ := os.ReadFile(log)
			if len(tail) > 2048 {
				tail = tail[len(tail)-2048:]
			}
			return fmt.Errorf("%w: no socket at %s (pid %d alive: %v); log %s: %s", ErrNotServed, rec.Socket, rec.PID, Alive(rec), log, bytes.TrimSpace(tail))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statusText(p *int) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprint(*p)
}
