// Package supervisor is the root of the daemon: it builds the actor system,
// supervises one agent actor per definition (restarting crashed children),
// serves the system socket and shuts everything down in order.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/actors/session"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/reaper"
)

// Daemon is `ctx daemon`.
type Daemon struct {
	// Settings are the tunables, parsed once (config.FromEnv).
	Settings config.Settings
	Log      *slog.Logger
	// Fault is the test-only fault hook (built with -tags ctxfault), or nil.
	Fault func(point string)
	// Listener is the system socket from socket activation (LISTEN_FDS), or nil.
	Listener *net.UnixListener
	// BinDir holds the tsh and ctxterm binaries to install under CTX_ROOT/bin.
	BinDir string
	// Reaper, when set, is the argv of the reaper (internal/reaper): a
	// process that outlives the daemon and sweeps its run cgroups once it
	// is gone. ReaperLog receives the reaper's log.
	Reaper    []string
	ReaperLog *os.File
	// Cluster is set by a cluster node (ctx-cluster), which serves a
	// shared root: its daemon lock and run cgroups are keyed by its own
	// runtime directory, not the root every node shares. A single daemon
	// (nil) refuses a cluster's root.
	Cluster config.Cluster
}

// Run serves until ctx is cancelled, then shuts down: running runs are
// concluded, their sandboxes get SIGTERM and the grace period, sockets are
// removed. Start-up and shutdown are one list of components (wiring):
// started in order, stopped in reverse, each stop within its deadline.
func (d *Daemon) Run(ctx context.Context) error {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	l := d.Settings.Layout
	if _, err := os.Lstat(l.ClusterMarker()); err == nil && d.Cluster == nil {
		// A single daemon would append to logs a cluster's owners seal
		// and own through etcd: refused before anything is written.
		return fmt.Errorf("daemon: %s is a cluster's shared root (%s): run its nodes with ctx-cluster daemon, or set CTX_ROOT to another directory", l.Root, l.ClusterMarker())
	}
	if err := l.EnsureRuntime(); err != nil {
		return err
	}
	for _, dir := range []string{l.Root, l.AgentDir(), l.BinDir(), l.ToolDir(), l.UserHome()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
	}
	w := &wiring{d: d, s: d.Settings, log: d.Log}
	cs := newComponents(d.Log)
	for _, c := range w.components() {
		if err := cs.start(ctx, c); err != nil {
			_ = cs.stopAll()
			return err
		}
	}
	d.Log.Info("daemon ready", "root", l.Root, "runtime", l.Runtime, "bwrap", w.s.Bwrap, "launcher", w.launcher.Name(), "pid", os.Getpid())
	notifyReady(d.Log) // STYLE 7: READY after the sockets are bound
	<-ctx.Done()
	notifyStopping()
	d.Log.Info("daemon shutting down")
	_ = cs.stopAll() // each failure or late stop is logged by the list
	return nil
}

// startCgroups chooses how runs are confined and, before anything is
// served, kills and removes every run cgroup this CTX_ROOT still has: at
// start they can only be a crashed daemon's (the daemon lock is held), so
// nothing of its runs survives the restart. Terminals are not runs and
// live elsewhere (README "Limits per run").
func startCgroups(ctx context.Context, l layout.Layout, log *slog.Logger) *cgroup.Manager {
	log = log.With("component", "cgroup")
	m := cgroup.New(ctx, l.UID, l.Root, log)
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

// cgroupLayout is the layout whose Root keys this daemon's run cgroups
// (cgroup.BaseName): CTX_ROOT, or on a cluster node its runtime
// directory — what names this daemon alone, so a node's sweep never kills
// another node's runs. The start's sweep and the reaper use the same key:
// a node's reaper keyed by the shared root swept nothing of its runs.
func (d *Daemon) cgroupLayout() layout.Layout {
	l := d.Settings.Layout
	if d.Cluster != nil {
		l.Root = l.Runtime
	}
	return l
}

// startReaper starts the reaper with the lock (then closed here: the
// reaper holds it). No reaper where runs have no cgroup (nothing to sweep)
// or none is configured (package tests). docs/walls.md, "No sandbox
// outlives its daemon".
func (d *Daemon) startReaper(lock *os.File, cg *cgroup.Manager, log *slog.Logger) *reaper.Reaper {
	if lock != nil {
		defer lock.Close()
	}
	if len(d.Reaper) == 0 || cg.Mode() == cgroup.ModeRlimit {
		return nil
	}
	stderr := d.ReaperLog
	if stderr == nil {
		stderr = os.Stderr
	}
	l := d.cgroupLayout()
	r, err := reaper.Start(d.Reaper, l.Root, l.UID, lock, stderr, log.With("component", "reaper"))
	if err != nil {
		log.Error("no reaper: a crash would leave its runs to the next daemon's sweep", "err", err)
		return nil
	}
	return r
}

// drain cancels every active run and waits — until ctx ends (the cancel
// grace and a margin) — for the last one to conclude, so that clients
// following a run get its cancelled and done before their connections
// close (interfaces.md "Daemon": active runs cancelled with SIGTERM→SIGKILL).
// It waits on the runs themselves: runs.Idle is closed when the last
// run's done is committed.
func drain(ctx context.Context, system *actor.ActorSystem, root *actor.PID, runs *config.RunCount, log *slog.Logger) {
	system.Root.Send(root, &session.Drain{})
	select {
	case <-runs.Idle():
	case <-ctx.Done():
		log.Warn("runs still active after the drain; concluding them cancelled", "runs", runs.Load())
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
