package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/reaper"
	"github.com/cortexfs/ctx/internal/workers"
	"github.com/cortexfs/ctx/ipc"
)

// wiring holds the daemon's services while its components build them,
// each from those built before it.
type wiring struct {
	d   *Daemon
	s   config.Settings // the daemon's copy; Bwrap resolved by the "bwrap" component before any service uses it
	log *slog.Logger

	unlock   func()
	reapLock *os.File
	cgroups  *cgroup.Manager
	disk     *diskreserve.Watcher
	reap     *reaper.Reaper
	roots    *launchroot.Registry
	launcher terminal.Launcher
	updates  *ctlsock.Approvers
	system   *actor.ActorSystem
	pool     *workers.Pool // runs the actors' mailboxes (config.Config.Dispatcher)
	procs    *sync.WaitGroup
	mcp      *mcphost.Manager
	runs     *config.RunCount
	warm     chan struct{}
	cfg      *config.Config
	root     *actor.PID
	// loops counts the root actor's goroutines (the definitions scanner,
	// the receipts reader): the actor stops them without waiting inside
	// Receive; the "actors" component waits for them after the actor is gone.
	loops sync.WaitGroup
}

// drainMargin is what a shutdown adds to the cancel grace for the runs it
// cancelled to conclude and for their sandboxes to exit.
const drainMargin = 3 * time.Second

// components lists the daemon's parts in start order. Shutdown runs the
// list backwards: the watchdog and tickers, the installs, the system
// socket, the actors (runs drained first), the MCP servers, the
// sandboxes' grace period, the actor system, the control socket, the
// reaper, the disk watcher, the cgroups, the daemon lock.
func (w *wiring) components() []component {
	s, l := &w.s, w.s.Layout
	grace := s.CancelGrace + drainMargin
	return []component{
		{Name: "daemon lock", Start: func(context.Context) (err error) {
			lockDir := l.UserHome()
			if w.d.Cluster != nil {
				lockDir = l.Runtime // one node per runtime directory; the root is shared
			}
			w.unlock, err = lockDaemon(lockDir)
			return err
		}, Stop: func(context.Context) error { w.unlock(); return nil }},
		{Name: "bwrap", Start: func(context.Context) error {
			bw, err := bwrap.Find(s.Bwrap)
			if err != nil {
				w.log.Warn("bwrap unavailable: agent and tool starts will fail closed", "err", err)
				bw = bwrap.DefaultPath
			}
			s.Bwrap = bw // resolved once, before anything that starts a sandbox is built
			return nil
		}},
		{Name: "cgroups", Start: func(ctx context.Context) error {
			// A previous daemon's reaper sweeps first: then it cannot
			// sweep this daemon's runs.
			var err error
			if w.reapLock, err = reaper.Lock(l.Runtime, 30*time.Second); err != nil {
				w.log.Error("waiting for a previous daemon's reaper", "err", err)
			}
			w.cgroups = startCgroups(ctx, w.d.cgroupLayout(), w.log)
			return nil
		}, Stop: func(context.Context) error { w.cgroups.Release(); return nil }},
		{Name: "disk reserve", Start: func(context.Context) error {
			// A ticker while runs are active (README "The disk").
			w.disk = diskreserve.New(diskreserve.Options{Root: l.Root, Reserve: s.DiskReserve, Log: w.log.With("component", "disk")})
			return nil
		}, Stop: func(context.Context) error { w.disk.Close(); return nil }},
		{Name: "reaper", Deadline: reaperWait + time.Second, Start: func(context.Context) error {
			w.reap = w.d.startReaper(w.reapLock, w.cgroups, w.log)
			return nil
		}, Stop: func(context.Context) error { w.reap.Close(reaperWait); return nil }}, // it sweeps what the stops before it left
		{Name: "launcher", Deadline: stopGrace(s.CancelGrace) + time.Second, Start: func(ctx context.Context) (err error) {
			if w.roots, err = launchroot.New(l.UID); err != nil {
				return fmt.Errorf("daemon: launch roots: %w", err)
			}
			if w.launcher, err = SelectLauncher(ctx, w.roots, w.log.With("component", "launcher")); err != nil {
				return fmt.Errorf("daemon: %w", err)
			}
			return nil
		}, Stop: func(ctx context.Context) error {
			if c, ok := w.launcher.(closer); ok {
				return c.Close(ctx)
			}
			return nil
		}},
		w.controlSocket(),
		{Name: "actor system", Start: func(context.Context) error {
			w.pool = workers.New(workerIdle)
			w.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return w.log.With("lib", "protoactor")
			}), actor.WithDeveloperSupervisionLogging(os.Getenv("CTX_DEBUG") == "1"))
			return nil
		}, Stop: func(context.Context) error { w.system.Shutdown(); w.pool.Close(); return nil }},
		{Name: "sandboxes", Deadline: grace, Start: func(context.Context) error {
			w.procs = &sync.WaitGroup{}
			return nil
		}, Stop: func(ctx context.Context) error {
			// Sandboxes got SIGTERM when their runs were cancelled; give
			// them their grace period to exit. One still running dies with
			// the daemon (--die-with-parent); this waiter ends with it.
			exited := make(chan struct{})
			go func() { w.procs.Wait(); close(exited) }()
			select {
			case <-exited:
				return nil
			case <-ctx.Done():
				return errors.New("sandboxes still running after the grace period")
			}
		}},
		{Name: "mcp servers", Deadline: grace, Start: func(context.Context) error {
			// After the cgroups: each server gets one (README "Limits").
			w.mcp = mcphost.New(s.MCPOptions(w.log, w.cgroups))
			return nil
		}, Stop: func(ctx context.Context) error {
			// Every MCP server stops with the daemon (its sandbox dies
			// with the daemon anyway: --die-with-parent).
			return w.mcp.Close(ctx)
		}},
		w.actors(),
		w.systemSocket(),
		w.installs(),
		w.loop("watchdog", runWatchdog),
		w.loop("memory", func(ctx context.Context) { returnMemory(ctx, w.cfg, memoryEvery, memoryWave) }),
	}
}

// reaperWait bounds how long a stopping daemon waits for its reaper's sweep.
const reaperWait = 10 * time.Second

// controlSocket serves the run capability socket (U2) and its pinned link.
func (w *wiring) controlSocket() component {
	l := w.s.Layout
	var stop context.CancelFunc
	done := make(chan struct{})
	return component{Name: "control socket", Deadline: 10 * time.Second, Start: func(context.Context) error {
		ledger, err := ctlsock.OpenLedger(ctlsock.LedgerPath(l))
		if err != nil {
			return fmt.Errorf("daemon: control ledger: %w", err)
		}
		ln, err := ctlsock.Listen(l.ControlSocket())
		if err != nil {
			return fmt.Errorf("daemon: control socket: %w", err)
		}
		// The pinned path is a symlink to the socket (replaced atomically).
		tmpLink := l.ControlSocketLink() + ".new"
		_ = os.Remove(tmpLink)
		if err := os.Symlink(filepath.Join("control", "control.sock"), tmpLink); err != nil {
			ln.Close()
			return fmt.Errorf("daemon: control socket link: %w", err)
		}
		if err := os.Rename(tmpLink, l.ControlSocketLink()); err != nil {
			ln.Close()
			return fmt.Errorf("daemon: control socket link: %w", err)
		}
		w.updates = &ctlsock.Approvers{}
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		srv := &ctlsock.Server{Registry: w.roots, Layout: l, Owner: l.UID, Ledger: ledger, Log: w.log.With("actor", "control"),
			Gate: updateGate{layout: l, approvalTimeout: w.s.ApprovalTimeout, updates: w.updates}}
		go func() {
			defer close(done)
			if err := srv.Serve(ctx, ln); err != nil {
				w.log.Error("control socket", "err", err)
			}
		}()
		return nil
	}, Stop: func(ctx context.Context) error {
		stop()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

// actors builds the Config every actor receives — complete, then never
// written — and spawns the root actor. Its stop drains the runs, then
// stops the actors.
func (w *wiring) actors() component {
	grace := w.s.CancelGrace + drainMargin
	return component{Name: "actors", Deadline: grace + actorStopWait, Start: func(context.Context) error {
		w.runs, w.warm = &config.RunCount{}, make(chan struct{})
		w.cfg = config.New(w.s, config.Services{Log: w.log, Procs: w.procs, Running: w.runs, Roots: w.roots,
			Updates: w.updates, Cgroups: w.cgroups, MCP: w.mcp, Disk: w.disk, Fault: w.d.Fault, Dispatcher: w.pool, Warm: w.warm})
		w.cfg.Cluster = w.d.Cluster
		if w.d.Cluster != nil {
			// A shared workspace's placeholders are bound by other nodes'
			// runs too, which this node's registry does not count: the
			// nodes hold a lock per workspace directory on the shared root,
			// and the last to leave (idle for the linger) removes them
			// (docs/cluster.md).
			w.cfg.Placeholders.Share(w.s.Layout.ClusterPlaceholderLocks(), w.s.PlaceholderLinger)
		}
		cfg, launcher, loops := w.cfg, w.launcher, &w.loops
		rootProps := cfg.Props(func() actor.Actor { return &rootActor{cfg: cfg, launcher: launcher, loops: loops} },
			actor.WithSupervisor(actor.NewOneForOneStrategy(10, time.Minute, func(any) actor.Directive { return actor.RestartDirective })))
		root, err := w.system.Root.SpawnNamed(rootProps, "supervisor")
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		w.root = root
		return nil
	}, Stop: func(ctx context.Context) error {
		dctx, cancel := context.WithTimeout(ctx, grace)
		drain(dctx, w.system, w.root, w.runs, w.log)
		cancel()
		var errs []error
		if err := w.system.Root.PoisonFuture(w.root).Wait(); err != nil {
			errs = append(errs, fmt.Errorf("stop actors: %w", err))
		}
		looped := make(chan struct{})
		go func() { w.loops.Wait(); close(looped) }()
		select {
		case <-looped:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("the root actor's loops: %w", ctx.Err()))
		}
		return errors.Join(errs...)
	}}
}

// workerIdle is how long a mailbox worker waits for work before it ends
// (internal/workers): a busy daemon keeps its workers and their grown
// stacks; an idle one has none a few seconds later.
const workerIdle = 5 * time.Second

// actorStopWait bounds the actors' own stop after the drain.
const actorStopWait = 12 * time.Second

// systemSocket serves the system socket (ping, terminals; A4). The
// sockets are bound before the installs start: ping answers at once.
func (w *wiring) systemSocket() component {
	var ln *net.UnixListener
	done := make(chan struct{})
	return component{Name: "system socket", Deadline: 5 * time.Second, Start: func(context.Context) error {
		ln = w.d.Listener
		if ln == nil {
			var err error
			if ln, err = ipc.Listen(w.s.Layout.SystemSocket()); err != nil {
				return fmt.Errorf("daemon: system socket: %w", err)
			}
		}
		system, root, l, name := w.system, w.root, w.s.Layout, w.launcher.Name()
		go func() {
			defer close(done)
			serveSystem(w.cfg, ln, func(req *TerminalRequest) *TerminalReply {
				return serveTerminal(system, root, l, name, req)
			})
		}()
		return nil
	}, Stop: func(ctx context.Context) error {
		ln.Close() // serveSystem closes its connections and returns
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

// installs puts tsh, ctxterm and the tools in place after the sockets are
// bound; requests that may start a sandbox wait for them (cfg.Warmed).
func (w *wiring) installs() component {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	return component{Name: "installs", Deadline: 30 * time.Second, Start: func(context.Context) error {
		go func() {
			defer close(done)
			defer close(w.warm)
			w.d.install(ctx, w.s.Layout)
		}()
		return nil
	}, Stop: func(sctx context.Context) error {
		defer cancel()
		select {
		case <-done:
			return nil
		case <-sctx.Done():
			cancel() // the steps not yet begun are skipped
			<-done   // the one under way is atomic and short
			return sctx.Err()
		}
	}}
}

// loop runs f in a goroutine until its component stops.
func (w *wiring) loop(name string, f func(ctx context.Context)) component {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	return component{Name: name, Deadline: time.Second, Start: func(context.Context) error {
		go func() { defer close(done); f(ctx) }()
		return nil
	}, Stop: func(context.Context) error { cancel(); <-done; return nil }}
}
