// Package cgroup confines each run — all of its agent steps and tool calls —
// to one control group with the agent's limits (.d/limits), and kills what
// is left in it when the run ends or after a daemon crash
// (and 7, "Limits per run"). A session's runs, which follow one another,
// take turns in one group where the backend can keep it (lease.go).
//
// The mode is chosen once per daemon, best first: a transient scope of the
// systemd user manager (D-Bus), a writable cgroup v2 subtree, cgroup v1
// hierarchies (pids, memory, cpu, freezer), and rlimits as the last resort.
package cgroup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/limits"
)

// Mode is how runs are confined.
type Mode string

// Modes, best first.
const (
	ModeSystemd Mode = "systemd"
	ModeV2      Mode = "cgroup2"
	ModeV1      Mode = "cgroup1"
	ModeRlimit  Mode = "rlimit"
)

// ErrClosed is returned by Place once the run's group was closed: a process
// that starts after its run ended never runs.
var ErrClosed = errors.New("the run's cgroup is closed")

// backend is one way of confining runs. Names are group names (run-…).
type backend interface {
	mode() Mode
	describe() string
	// place moves pid into the group, creating it with l when absent.
	place(name string, l limits.Limits, pid int) error
	// procs lists the processes in the group (none when it does not exist).
	procs(name string) ([]int, error)
	// kill kills everything in the group and returns once it is empty.
	kill(name string) error
	// remove deletes the (empty) group; a missing group is not an error.
	remove(name string) error
	// leftovers lists the run groups of this CTX_ROOT that exist.
	leftovers() ([]string, error)
	// release removes the base when no group is left in it.
	release()
}

// Manager hands out one Group per run. Its methods are safe for concurrent use.
type Manager struct {
	b        backend
	sweepers []backend // the backend and any other place a previous daemon may have used
	why      string    // why no better mode is in force
	log      *slog.Logger

	// The sessions' kept groups (lease.go).
	slotMu   sync.Mutex
	slots    map[string]*slot
	slotGen  int
	idle     int // kept groups no run holds
	released bool
	cleaning sync.WaitGroup // removals of kept groups under way
	keepFor  time.Duration  // how long an idle group is kept (tests shorten it)
	keepMax  int            // how many idle groups are kept at once
}

// Mode in force.
func (m *Manager) Mode() Mode { return m.b.mode() }

// Describe says where runs go, for logs and `ctx doctor`.
func (m *Manager) Describe() string { return m.b.describe() }

// Why says why the better modes were not used ("" when the best one is).
func (m *Manager) Why() string { return m.why }

// BaseName is the directory (or unit prefix) of one CTX_ROOT's runs:
// ctx-<uid>-<12 hex digits of sha256(CTX_ROOT)>.
func BaseName(uid int, root string) string {
	h := sha256.Sum256([]byte(root))
	return "ctx-" + strconv.Itoa(uid) + "-" + hex.EncodeToString(h[:6])
}

var safeRun = regexp.MustCompile(`^run-[A-Za-z0-9_.-]{1,80}$`)

// GroupName is the group of a run id: the id itself when it is a safe
// run-… name, else run- and a hash of it.
func GroupName(run string) string {
	if safeRun.MatchString(run) {
		return run
	}
	h := sha256.Sum256([]byte(run))
	return "run-x" + hex.EncodeToString(h[:8])
}

// Group is one run's cgroup. It is created by the first Place and removed
// by Close; a nil *Group does nothing (no manager configured).
type Group struct {
	m      *Manager
	name   string
	lim    limits.Limits
	mu     sync.Mutex
	used   bool
	closed bool
	// entered: a thread or a process joined the group (Enter, Place).
	// One only made (Prepare), or leased empty, holds nothing at Close.
	entered bool
	// inside counts the daemon's threads that entered the group and have
	// not left it yet: Close waits for them, since killing the group
	// kills every process a thread of it belongs to — the daemon's own.
	inside sync.WaitGroup
	// made is closed when Prepare's creation ended (nil: not prepared);
	// ready says it made the group (Enter then only joins it).
	made  chan struct{}
	ready bool
	// slot: the session's kept group this one is (Manager.Lease); Close
	// empties it and gives it back instead of removing it.
	slot *slot
}

// Group returns the run's group; nothing is created until Place.
func (m *Manager) Group(run string, l limits.Limits) *Group {
	if m == nil {
		return nil
	}
	return &Group{m: m, name: GroupName(run), lim: l}
}

// enterer is a backend whose groups can take a single thread (cgroup v1),
// so a process can be born inside a group (proc.Options.Enter).
type enterer interface {
	enter(name string, l limits.Limits, tid int, made bool) (leave func() error, err error)
}

// EnterFunc is the proc.Options.Enter hook of the group: nil where the
// backend cannot take a thread (v2, systemd, rlimits), which then place
// the held sandbox with PlaceFunc.
func (g *Group) EnterFunc() func(tid int) (func() error, error) {
	if g == nil {
		return nil
	}
	e, ok := g.m.b.(enterer)
	if !ok {
		return nil
	}
	return func(tid int) (func() error, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed {
			return nil, ErrClosed
		}
		g.used, g.entered = true, true
		g.inside.Add(1)
		leave, err := e.enter(g.name, g.lim, tid, g.ready)
		var once sync.Once
		left := func() { once.Do(g.inside.Done) }
		if leave == nil {
			left()
		} else {
			// Counted out whether or not the move back succeeded: a
			// thread that cannot leave is ended by its caller.
			inner := leave
			leave = func() error { defer left(); return inner() }
		}
		if err != nil {
			return leave, fmt.Errorf("cgroup %s (%s): %w", g.name, g.m.b.mode(), err)
		}
		return leave, nil
	}
}

// creator is a backend that can make a group before any process joins it
// (v1, v2): the mkdir and the limits, without the move.
type creator interface {
	create(name string, l limits.Limits) (existed bool, err error)
}

// Prepare makes the group in the background now, where the backend can
// (v1, v2), so that the first process's Enter or Place only joins it: the
// mkdir and the limits are off the sandbox's start, done while the run
// still reads its definition and checks its first call. A group that no
// process joins is removed by Close all the same. A failed creation is
// only logged: the first join makes the group itself and reports.
func (g *Group) Prepare() {
	if g == nil {
		return
	}
	c, ok := g.m.b.(creator)
	if !ok {
		return
	}
	g.mu.Lock()
	if g.closed || g.used || g.made != nil {
		g.mu.Unlock()
		return
	}
	made := make(chan struct{})
	g.made = made
	g.mu.Unlock()
	go func() { // owned by the group: Close waits for it
		defer close(made)
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed || g.used {
			return
		}
		g.used = true // made, so Close removes it
		existed, err := c.create(g.name, g.lim)
		if err != nil {
			g.m.log.Debug("cgroup not made ahead (its first process makes it)", "group", g.name, "err", err)
		} else {
			g.ready = true
		}
		// A new group's name found taken (a crashed daemon's group its
		// sweep could not kill): what is inside is unknown, so Close
		// lists it and kills what it finds.
		g.entered = g.entered || existed
	}()
}

// Procs lists the processes in the group now (none for a nil or unused
// group, or where the backend cannot list them: rlimits). The disk
// watcher reads it for files the run deleted but still holds open.
func (g *Group) Procs() []int {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	used, closed := g.used, g.closed
	g.mu.Unlock()
	if !used || closed {
		return nil
	}
	ps, _ := g.m.b.procs(g.name)
	return ps
}

// PlaceFunc is the proc.Options.Place hook of the group (nil for a nil group).
func (g *Group) PlaceFunc() func(pid int) error {
	if g == nil {
		return nil
	}
	return g.Place
}

// Place moves pid — bwrap, held before it runs anything — and everything
// it already started into the group, creating the group on first use.
// One cgroup per run
func (g *Group) Place(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.used, g.entered = true, true
	if err := g.m.b.place(g.name, g.lim, pid); err != nil {
		return fmt.Errorf("cgroup %s (%s): %w", g.name, g.m.b.mode(), err)
	}
	// bwrap may already have cloned its PID 1 (held on --block-fd, not yet
	// running anything): it joins too. Anything it clones later inherits.
	ds := killtree.Descendants(pid)
	if _, rlimits := g.m.b.(*rlimitOnly); rlimits {
		// An rlimit is copied when a process is cloned, not serialised
		// with the clone as a cgroup move is: a child whose clone began
		// before bwrap's prlimit and is not listed yet would run
		// unlimited. bwrap always clones its sandbox's PID 1, which waits
		// on --block-fd: wait until it is listed, then limit it too.
		ds = awaitChild(pid, time.Second)
	}
	for _, d := range ds {
		if err := g.m.b.place(g.name, g.lim, d); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cgroup %s (%s): pid %d: %w", g.name, g.m.b.mode(), d, err)
		}
	}
	return nil
}

// awaitChild polls pid's descendants until it has one (or wait passed).
func awaitChild(pid int, wait time.Duration) []int {
	deadline := time.Now().Add(wait)
	for {
		ds := killtree.Descendants(pid)
		if len(ds) > 0 || time.Now().After(deadline) {
			return ds
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// Close ends the group: no process joins any more; what is still inside
// after grace is killed, and the group is removed — or, for a session's
// kept group (Lease), given back empty for the session's next run. It
// blocks (up to grace and the kill): call it off any actor.
func (g *Group) Close(grace time.Duration) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	g.closed = true // no thread enters any more, nothing is prepared
	made := g.made
	g.mu.Unlock()
	if made != nil {
		<-made
	}
	g.inside.Wait() // every thread of the daemon is out before the kill
	g.mu.Lock()
	used, entered := g.used, g.entered
	g.mu.Unlock()
	if !used {
		if g.slot != nil {
			g.m.forget(g.slot) // never made: nothing to keep
		}
		return nil
	}
	deadline := time.Now().Add(grace)
	// Nothing ever joined it (a run whose sandbox never started — an MCP
	// call's tsh op): it is as empty as it was made or leased, and is
	// not listed.
	empty := !entered
	for !empty {
		ps, err := g.m.b.procs(g.name)
		if err == nil && len(ps) == 0 {
			// Closed, no daemon thread inside, and no process left to
			// fork one: it stays empty, and the kill would only list it
			// again.
			empty = true
			break
		}
		if err != nil || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Nothing of a concluded run survives it.
	var errs []error
	var err error
	if !empty {
		err = g.m.b.kill(g.name)
	}
	if err != nil {
		errs = append(errs, err)
	} else if g.slot != nil {
		// spec: L4 — found empty, or the kill returned: the group is
		// empty (and nothing else joins it), so the session's next run
		// inherits no process of this one.
		g.m.giveBack(g.slot)
		return nil
	}
	if g.slot != nil {
		g.m.forget(g.slot) // not emptied: removed, never taken again
	}
	if err := g.m.b.remove(g.name); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return nil
}

// Sweep kills and removes every run group of this CTX_ROOT: at daemon start
// (before serving) they can only be a crashed daemon's. It returns how
// many it found.
func (m *Manager) Sweep() (int, error) {
	n := 0
	var errs []error
	for _, b := range m.sweepers {
		names, err := b.leftovers()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.mode(), err))
			continue
		}
		for _, name := range names {
			n++
			ps, _ := b.procs(name)
			if len(ps) > 0 {
				m.log.Warn("killing what a previous daemon's run left behind", "group", name, "mode", b.mode(), "pids", ps)
			}
			if err := b.kill(name); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", b.mode(), name, err))
				continue
			}
			if err := b.remove(name); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", b.mode(), name, err))
			}
		}
	}
	return n, errors.Join(errs...)
}

// Release removes this CTX_ROOT's base directories if they are empty (at
// daemon stop, so test roots leave nothing behind); a later Place makes
// them again.
func (m *Manager) Release() {
	if m != nil {
		m.releaseSlots()
		m.b.release()
	}
}

// killLoop SIGKILLs every process list() returns until it is empty, with
// freeze/thaw around each round when given (a frozen fork bomb cannot
// fork between the listing and the kill).
func killLoop(list func() ([]int, error), freeze, thaw func() error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ps, err := list()
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("still %d processes after %v: %v", len(ps), timeout, ps)
		}
		frozen := freeze != nil && freeze() == nil
		if frozen {
			if ps, err = list(); err != nil {
				return err
			}
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if frozen {
			_ = thaw()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// parsePids reads a cgroup.procs file's content.
func parsePids(b []byte) []int {
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// New chooses the mode for runs of CTX_ROOT root owned by uid, best first,
// and creates its base where one is needed. It never fails: rlimits are
// the last resort, and Why says what was missing.
func New(ctx context.Context, uid int, root string, log *slog.Logger) *Manager {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	cg, _ := os.ReadFile("/proc/self/cgroup")
	return choose(ctx, ParseMountinfo(mi), cg, BaseName(uid, root), log, newScopes)
}

func choose(ctx context.Context, mounts Mounts, selfCgroup []byte, base string, log *slog.Logger,
	systemd func(ctx context.Context, base, mount string) (*scopes, error)) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{log: log, keepFor: keepFor, keepMax: keepMax}
	use := func(b backend, whys []string) *Manager {
		m.b, m.sweepers, m.why = b, []backend{b}, strings.Join(whys, "; ")
		return m
	}
	var whys []string
	own, _ := OwnCgroups(selfCgroup)
	// A user manager can apply limits only where the unified hierarchy
	// holds the controllers (a pure cgroup v2 host).
	pureV2 := mounts.V2 != "" && mounts.V1["pids"] == "" && mounts.V1["memory"] == ""
	if pureV2 && systemd != nil {
		s, err := systemd(ctx, base, mounts.V2)
		if err == nil {
			return use(s, nil)
		}
		whys = append(whys, "no systemd user manager answers ("+err.Error()+")")
	} else if !pureV2 {
		whys = append(whys, "systemd scopes need a pure cgroup v2 host")
	}
	if mounts.V2 != "" {
		v, err := newV2(mounts.V2, own, base)
		if err == nil {
			return use(v, whys)
		}
		whys = append(whys, "cgroup v2: "+err.Error())
	} else {
		whys = append(whys, "no cgroup v2 hierarchy")
	}
	if v, err := newV1(mounts, base); err == nil {
		return use(v, whys)
	} else {
		whys = append(whys, "cgroup v1: "+err.Error())
	}
	return use(&rlimitOnly{}, whys)
}
