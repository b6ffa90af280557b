// Package supervisor is the root of the daemon: it builds the actor system,
// supervises one agent actor per definition (restarting crashed children),
// serves the system socket and shuts everything down in order.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/actors/session"
	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/binstall"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/reaper"
	"github.com/cortexfs/ctx/internal/toolset"
	"github.com/cortexfs/ctx/ipc"
)

// Daemon is `ctx daemon`.
type Daemon struct {
	Cfg *config.Config
	// Listener is the system socket from socket activation (LISTEN_FDS), or nil.
	Listener *net.UnixListener
	// BinDir holds the tsh and ctxterm binaries to install under CTX_ROOT/bin.
	BinDir string
	// Reaper, when set, is the argv of the reaper (internal/reaper): a
	// process that outlives the daemon and sweeps its run cgroups once it
	// is gone. ReaperLog receives the reaper's log.
	Reaper    []string
	ReaperLog *os.File
}

// Run serves until ctx is cancelled, then shuts down: running runs are
// concluded, their sandboxes get SIGTERM and the grace period, sockets are removed.
func (d *Daemon) Run(ctx context.Context) error {
	cfg := d.Cfg
	l := cfg.Layout
	if err := l.EnsureRuntime(); err != nil {
		return err
	}
	for _, dir := range []string{l.Root, l.AgentDir(), l.BinDir(), l.ToolDir(), l.UserHome()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
	}
	unlock, err := lockDaemon(l.UserHome())
	if err != nil {
		return err
	}
	defer unlock()
	bw, err := bwrap.Find(cfg.Bwrap)
	if err != nil {
		cfg.Log.Warn("bwrap unavailable: agent and tool starts will fail closed", "err", err)
		bw = bwrap.DefaultPath
	}
	cfg.Bwrap = bw
	// A previous daemon's reaper sweeps first: then it cannot sweep this
	// daemon's runs.
	reapLock, err := reaper.Lock(l.Runtime, 30*time.Second)
	if err != nil {
		cfg.Log.Error("waiting for a previous daemon's reaper", "err", err)
	}
	cfg.Cgroups = startCgroups(ctx, cfg)
	cfg.StartMCP() // after the cgroups: each server gets one (README "Limits")
	// The disk reserve: a ticker while runs are active (README "The disk").
	cfg.Disk = diskreserve.New(diskreserve.Options{Root: l.Root, Reserve: cfg.DiskReserve, Log: cfg.Log.With("component", "disk")})
	defer cfg.Disk.Close()
	reap := d.startReaper(reapLock)
	defer reap.Close(10 * time.Second) // after the shutdown below: it sweeps what is left
	roots, err := launchroot.New(l.UID)
	if err != nil {
		return fmt.Errorf("daemon: launch roots: %w", err)
	}
	cfg.Roots = roots
	launcher, err := SelectLauncher(ctx, roots, cfg.Log.With("component", "launcher"))
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	ledger, err := ctlsock.OpenLedger(ctlsock.LedgerPath(l))
	if err != nil {
		return fmt.Errorf("daemon: control ledger: %w", err)
	}
	ctlLn, err := ctlsock.Listen(l.ControlSocket())
	if err != nil {
		return fmt.Errorf("daemon: control socket: %w", err)
	}
	// The pinned path is a symlink to the socket (replaced atomically).
	tmpLink := l.ControlSocketLink() + ".new"
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Join("control", "control.sock"), tmpLink); err != nil {
		return fmt.Errorf("daemon: control socket link: %w", err)
	}
	if err := os.Rename(tmpLink, l.ControlSocketLink()); err != nil {
		return fmt.Errorf("daemon: control socket link: %w", err)
	}
	ctlCtx, stopCtl := context.WithCancel(context.Background())
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		srv := &ctlsock.Server{Registry: roots, Layout: l, Owner: l.UID, Ledger: ledger, Log: cfg.Log.With("actor", "control"), Gate: updateGate{cfg}}
		if err := srv.Serve(ctlCtx, ctlLn); err != nil {
			cfg.Log.Error("control socket", "err", err)
		}
	}()
	defer func() { stopCtl(); <-ctlDone }()
	// issue 15 item 4: the sockets first, then the installs. Requests
	// that may start a sandbox wait for cfg.Warmed (tsh, ctxterm and the
	// tools in place); ping answers at once.
	warmDone := cfg.StartWarmup()
	ln := d.Listener
	if ln == nil {
		if ln, err = ipc.Listen(l.SystemSocket()); err != nil {
			return fmt.Errorf("daemon: system socket: %w", err)
		}
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return cfg.Log.With("lib", "protoactor")
	}), actor.WithDeveloperSupervisionLogging(os.Getenv("CTX_DEBUG") == "1"))
	rootProps := actor.PropsFromProducer(func() actor.Actor { return &rootActor{cfg: cfg, launcher: launcher} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(10, time.Minute, func(any) actor.Directive { return actor.RestartDirective })))
	root, err := system.Root.SpawnNamed(rootProps, "supervisor")
	if err != nil {
		ln.Close()
		return fmt.Errorf("daemon: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveSystem(cfg, ln, func(req *TerminalRequest) *TerminalReply {
			return serveTerminal(system, root, l, launcher.Name(), req)
		})
	}()
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		defer warmDone()
		d.install(l)
	}()
	wdCtx, stopWD := context.WithCancel(ctx)
	wdDone := make(chan struct{})
	go func() { defer close(wdDone); runWatchdog(wdCtx) }()
	memDone := make(chan struct{})
	go func() { defer close(memDone); returnMemory(wdCtx, cfg, memoryEvery, memoryWave) }()
	cfg.Log.Info("daemon ready", "root", l.Root, "runtime", l.Runtime, "bwrap", bw, "launcher", launcher.Name(), "pid", os.Getpid())
	notifyReady(cfg.Log) // STYLE 7: READY after the sockets are bound
	<-ctx.Done()
	notifyStopping()
	stopWD()
	<-wdDone
	<-memDone
	cfg.Log.Info("daemon shutting down")
	ln.Close()
	<-warmed
	drain(system, root, cfg)
	if err := system.Root.PoisonFuture(root).Wait(); err != nil {
		cfg.Log.Warn("stop actors", "err", err)
	}
	// issue 13: every MCP server stops with the daemon (its sandbox dies
	// with the daemon anyway: --die-with-parent).
	mctx, mcancel := context.WithTimeout(context.Background(), cfg.CancelGrace+3*time.Second)
	if err := cfg.MCP.Close(mctx); err != nil {
		cfg.Log.Warn("mcp servers", "err", err)
	}
	mcancel()
	// Sandboxes got SIGTERM; give them their grace period to exit.
	waited := make(chan struct{})
	go func() { cfg.Procs.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(cfg.CancelGrace + 3*time.Second):
		cfg.Log.Warn("sandboxes still running after the grace period")
	}
	wg.Wait()
	cfg.Cgroups.Release()
	system.Shutdown()
	return nil
}

// install puts the helper binaries, the agent.update tool and the
// standard toolset from BinDir into CTX_ROOT (when they differ).
func (d *Daemon) install(l layout.Layout) {
	cfg := d.Cfg
	if d.BinDir != "" {
		if err := Install(d.BinDir, l.BinDir()); err != nil {
			cfg.Log.Warn("install binaries", "err", err)
		}
	}
	if err := installTool(d.BinDir, l); err != nil {
		cfg.Log.Warn("install the agent.update tool", "err", err)
	}
	// issue 12: the standard toolset from the ctxtools beside the daemon
	// (an upgrade reaches CTX_ROOT/tool on the next start); a user's own
	// tool of the same name is kept.
	if bin := filepath.Join(d.BinDir, toolset.Binary); d.BinDir != "" && fileExists(bin) {
		if rep, err := toolset.Install(bin, l.ToolDir()); err != nil {
			cfg.Log.Warn("install the standard toolset", "err", err)
		} else if len(rep.Kept) > 0 {
			cfg.Log.Info("standard tools not installed: a tool of that name is the user's own", "kept", rep.Kept)
		}
	}
}

// startCgroups chooses how runs are confined and, before anything is
// served, kills and removes every run cgroup this CTX_ROOT still has: at
// start they can only be a crashed daemon's (the daemon lock is held), so
// nothing of its runs survives the restart. Terminals are not runs and
// live elsewhere. issue 11 items 6, 7
func startCgroups(ctx context.Context, cfg *config.Config) *cgroup.Manager {
	log := cfg.Log.With("component", "cgroup")
	m := cgroup.New(ctx, cfg.Layout.UID, cfg.Layout.Root, log)
	if m.Mode() == cgroup.ModeRlimit {
		log.Warn("runs are confined by rlimits only; see ctx doctor", "why", m.Why(), "weakness", m.Describe())
	} else {
		log.Info("one cgroup per run", "mode", m.Mode(), "where", m.Describe())
	}
	n, err := m.Sweep()
	if n > 0 {
		log.Warn("swept run cgroups a previous daemon left", "groups", n)
	}
	if err != nil {
		log.Error("sweeping leftover run cgroups", "err", err)
	}
	return m
}

// startReaper starts the reaper with the lock (then closed here: the
// reaper holds it). No reaper where runs have no cgroup (nothing to sweep)
// or none is configured (package tests). docs/walls.md, "No sandbox
// outlives its daemon".
func (d *Daemon) startReaper(lock *os.File) *reaper.Reaper {
	cfg := d.Cfg
	if lock != nil {
		defer lock.Close()
	}
	if len(d.Reaper) == 0 || cfg.Cgroups.Mode() == cgroup.ModeRlimit {
		return nil
	}
	stderr := d.ReaperLog
	if stderr == nil {
		stderr = os.Stderr
	}
	r, err := reaper.Start(d.Reaper, cfg.Layout.Root, cfg.Layout.UID, lock, stderr, cfg.Log.With("component", "reaper"))
	if err != nil {
		cfg.Log.Error("no reaper: a crash would leave its runs to the next daemon's sweep", "err", err)
		return nil
	}
	return r
}

// drain cancels every active run and waits — at most the cancel grace and
// a margin — until each has concluded, so that clients following a run get
// its cancelled and done before their connections close (interfaces.md:
// "active runs cancelled with SIGTERM→SIGKILL"; issue 16 item 11).
func drain(system *actor.ActorSystem, root *actor.PID, cfg *config.Config) {
	system.Root.Send(root, &session.Drain{})
	deadline := time.Now().Add(cfg.CancelGrace + 3*time.Second)
	for cfg.Running.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := cfg.Running.Load(); n > 0 {
		cfg.Log.Warn("runs still active after the drain; concluding them cancelled", "runs", n)
	}
}

// ErrRunning means another daemon holds this user's CTX_ROOT.
var ErrRunning = errors.New("another ctx daemon is running for this CTX_ROOT")

// lockDaemon takes the per-user daemon lock: two daemons on one CTX_ROOT
// would both write session logs (and conclude each other's runs).
func lockDaemon(dir string) (func(), error) {
	p := filepath.Join(dir, "daemon.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(p)
		f.Close()
		return nil, fmt.Errorf("%w (pid %s, lock %s)", ErrRunning, strings.TrimSpace(string(b)), p)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// serveSystem serves the system socket: ping (readiness) and the terminal
// ops (terminals.go), answered by term. A4: the owner or uid 0.
func serveSystem(cfg *config.Config, ln *net.UnixListener, term func(*TerminalRequest) *TerminalReply) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	conns := map[*net.UnixConn]bool{}
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		cred, err := ipc.PeerCred(c)
		if err != nil || (int(cred.Uid) != cfg.Layout.UID && cred.Uid != 0) { // spec: A4
			uid := -1
			if cred != nil {
				uid = int(cred.Uid)
			}
			cfg.Log.Warn("system socket refused a connection", "uid", uid)
			c.Close()
			continue
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
			lr := ipc.NewLineReader(c)
			for {
				line, err := lr.Next()
				if err != nil {
					if errors.Is(err, ipc.ErrTooLarge) {
						c.Write(ipc.ErrorFrame("", err).Line())
					}
					return
				}
				if treq, ok, err := parseTerminalRequest(line); ok {
					reply := &TerminalReply{Type: ipc.TypeError, Code: ipc.Code(err)}
					if err != nil {
						reply.Message = err.Error()
					} else {
						<-cfg.Warmed() // a terminal runs ctxterm and tsh from CTX_ROOT/bin
						reply = term(treq)
					}
					b, _ := json.Marshal(reply)
					c.SetWriteDeadline(time.Now().Add(ipc.WriteTimeout))
					if _, err := c.Write(append(b, '\n')); err != nil {
						return
					}
					continue
				}
				req, err := ipc.ParseRequest(line)
				var f *ipc.Frame
				switch {
				case err != nil:
					f = ipc.ErrorFrame("", err)
				case req.Op == ipc.OpPing:
					f = &ipc.Frame{Type: ipc.TypePong, Version: config.Version}
				default:
					f = &ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeBadRequest, Message: "the system socket serves ping and terminal.start|stop|status; send " + req.Op + " to the agent socket"}
				}
				c.SetWriteDeadline(time.Now().Add(ipc.WriteTimeout))
				if _, err := c.Write(f.Line()); err != nil {
					return
				}
			}
		}()
	}
}

// Install copies tsh and ctxterm from src into CTX_ROOT/bin when they differ.
func Install(src, binDir string) error { return binstall.Install(src, binDir) }

// installTool installs the agent.update tool object (U1) under tool/.
func installTool(src string, l layout.Layout) error {
	if src == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(l.ToolDir(), ctlsock.ToolName+".d"), 0o755); err != nil {
		return err
	}
	if err := copyIfChanged(filepath.Join(src, ctlsock.ToolName), filepath.Join(l.ToolDir(), ctlsock.ToolName)); err != nil {
		return err
	}
	meta := filepath.Join(l.ToolDir(), ctlsock.ToolName+".d", "tool.json")
	if old, err := os.ReadFile(meta); err == nil && string(old) == ctlsock.ToolJSON {
		return nil
	}
	return atomicfile.WriteFile(meta, []byte(ctlsock.ToolJSON), 0o644)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func copyIfChanged(src, dst string) error { return binstall.CopyIfChanged(src, dst) }
