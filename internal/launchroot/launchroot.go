// Package launchroot keeps the registry of launch roots (runtime.md U2): the
// host pids of the bwrap processes the daemon started, each bound to a
// capability identity, and verifies that a socket peer descends from one.
package launchroot

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/procstat"
)

// MaxAncestors is how many ppid links Verify follows from the peer before
// it gives up. spec: U2
const MaxAncestors = 64

// Identity is the capability a launch root carries (interfaces.md "Control
// socket"): the owner uid and the agent, session and run it was started for.
// A terminal's Run is its terminal resource id.
type Identity struct {
	UID     int
	Agent   string
	Session string
	Run     string
}

// ErrDenied is matched (errors.Is) by every refusal of Verify and VerifyPeer;
// the control socket answers it with EPERM.
var ErrDenied = errors.New("launchroot: denied")

// Denial is a class of refusal. Each is its own sentinel and also Is ErrDenied.
type Denial struct{ reason string }

func (d *Denial) Error() string        { return "launchroot: " + d.reason }
func (d *Denial) Is(target error) bool { return target == ErrDenied }

// The refusals Verify returns (wrapped with the pid concerned). spec: U2
var (
	// ErrWrongUID: the SO_PEERCRED uid is not the owner (no root exception, A4).
	ErrWrongUID = &Denial{"peer uid is not the owner"}
	// ErrNoProcess: a pid on the chain has no /proc entry (or it cannot be read).
	ErrNoProcess = &Denial{"missing /proc entry"}
	// ErrPIDReused: a registered root's start time differs from the recorded
	// one, or a parent is younger than its child: the pid names another process.
	ErrPIDReused = &Denial{"start time mismatch (pid reused)"}
	// ErrNoRoot: the chain reached pid 1, a pid whose ppid is 0, the daemon
	// itself or a dying ancestor before any registered root: the peer is not a
	// descendant, or was reparented to init or a subreaper outside the sandbox.
	ErrNoRoot = &Denial{"no registered launch root among ancestors (not a descendant, or reparented)"}
	// ErrCycle: the ppid chain came back to a pid already seen.
	ErrCycle = &Denial{"ppid cycle"}
	// ErrTooDeep: more than MaxAncestors ancestors without meeting a root.
	ErrTooDeep = &Denial{fmt.Sprintf("more than %d ancestors", MaxAncestors)}
	// ErrPeerGone: the pinned peer process exited during verification.
	ErrPeerGone = &Denial{"peer exited"}
)

// Entry is one registered launch root: what a launch receipt binds (L2).
type Entry struct {
	PID       int
	StartTime uint64 // /proc/<pid>/stat field 22
	BootID    string
	Identity  Identity
}

type rootEntry struct {
	Entry
	pidfd int // pins the process; -1 when the kernel has no pidfd_open
}

// Registry is the set of live launch roots. It is safe for concurrent use
// and starts no goroutines.
type Registry struct {
	owner  int
	self   int
	bootID string
	// stat reads /proc/<pid>/stat; tests replace it to build chains the
	// kernel would not (cycles, depth > 64).
	stat func(pid int) (procstat.Stat, error)

	mu    sync.Mutex
	roots map[int]*rootEntry
	// registered counts registrations: every pruneEvery-th prunes the
	// whole map (a signal to each root) — not every one, which cost a
	// syscall per live root per start (a hundred runs at once: a hundred
	// each).
	registered int
}

// pruneEvery: how many registrations a dead entry whose release was
// never called may outlast (a pid registered again replaces its own dead
// entry at once).
const pruneEvery = 64

// New returns an empty registry for the daemon's owner uid.
func New(owner int) (*Registry, error) {
	boot, err := procstat.BootID()
	if err != nil {
		return nil, fmt.Errorf("launchroot: %w", err)
	}
	return &Registry{owner: owner, self: os.Getpid(), bootID: boot, stat: procstat.Read, roots: map[int]*rootEntry{}}, nil
}

// Owner is the only uid Verify accepts.
func (r *Registry) Owner() int { return r.owner }

// Register records pid, which must be a child the caller started and has
// not reaped yet (so the pid cannot be reused meanwhile), as a launch root
// carrying ident. release removes the entry; call it once the root has been
// waited for. It is safe to call more than once. spec: U2
func (r *Registry) Register(pid int, ident Identity) (release func(), err error) {
	if ident.UID != r.owner {
		return nil, fmt.Errorf("launchroot: register pid %d: identity uid %d is not the owner %d", pid, ident.UID, r.owner)
	}
	st, err := r.stat(pid)
	if err != nil {
		return nil, fmt.Errorf("launchroot: register pid %d: %w", pid, err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOSYS):
		fd = -1
	default:
		return nil, fmt.Errorf("launchroot: register pid %d: pidfd_open: %w", pid, err)
	}
	// Re-read after pinning: the pidfd and the start time now name the same process.
	if st2, err := r.stat(pid); err != nil || st2.StartTime != st.StartTime {
		closeFD(fd)
		return nil, fmt.Errorf("launchroot: register pid %d: process changed while registering: %w", pid, ErrPIDReused)
	}
	e := &rootEntry{Entry: Entry{PID: pid, StartTime: st.StartTime, BootID: r.bootID, Identity: ident}, pidfd: fd}

	r.mu.Lock()
	if r.registered++; r.registered%pruneEvery == 0 {
		r.pruneLocked()
	} else if old, ok := r.roots[pid]; ok && !r.aliveLocked(old) {
		delete(r.roots, pid) // a reused pid's dead entry; its release still closes its pidfd
	}
	if old, ok := r.roots[pid]; ok {
		r.mu.Unlock()
		closeFD(fd)
		return nil, fmt.Errorf("launchroot: register pid %d: already registered for %+v", pid, old.Identity)
	}
	r.roots[pid] = e
	r.mu.Unlock()

	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.roots[pid] == e {
				delete(r.roots, pid)
			}
			r.mu.Unlock()
			closeFD(e.pidfd)
		})
	}, nil
}

// Prune removes entries whose process has exited (the reaper check behind
// release) and returns how many it removed.
func (r *Registry) Prune() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pruneLocked()
}

func (r *Registry) pruneLocked() int {
	n := 0
	for pid, e := range r.roots {
		if r.aliveLocked(e) {
			continue
		}
		// The release func still closes the pidfd; only forget the entry.
		delete(r.roots, pid)
		n++
	}
	return n
}

// aliveLocked says whether e still names a live process. A zombie still
// counts until it is reaped: its pid cannot be reused before that.
func (r *Registry) aliveLocked(e *rootEntry) bool {
	if e.pidfd >= 0 {
		return unix.PidfdSendSignal(e.pidfd, 0, nil, 0) == nil
	}
	st, err := r.stat(e.PID)
	return err == nil && st.StartTime == e.StartTime
}

// Entries returns a snapshot of the live launch roots (for receipts and
// status).
func (r *Registry) Entries() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Entry, 0, len(r.roots))
	for _, e := range r.roots {
		out = append(out, e.Entry)
	}
	return out
}

// lookup returns the identity of the root registered at pid if its start
// time is start and it is still alive.
func (r *Registry) lookup(pid int, start uint64) (Identity, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.roots[pid]
	if !ok {
		return Identity{}, false, nil
	}
	// spec: U2 — PID reuse: a registered pid whose start time differs, or
	// whose pinned process is gone, is not the root that was registered.
	if e.StartTime != start || e.BootID != r.bootID || !r.aliveLocked(e) {
		return Identity{}, true, fmt.Errorf("root pid %d (recorded start %d, now %d): %w", pid, e.StartTime, start, ErrPIDReused)
	}
	return e.Identity, true, nil
}

// Verify says which capability the process peerPID, connected with
// SO_PEERCRED uid peerUID, holds: peerUID must be the owner, and walking
// ppid links from peerPID (itself included) must reach a registered root
// whose start time matches, within MaxAncestors links. Every refusal
// Is ErrDenied. Verify does not pin the peer; VerifyPeer does. spec: U2
func (r *Registry) Verify(peerPID, peerUID int) (Identity, error) {
	// spec: U2, A4 — only the owner uid, no uid 0 exception.
	if peerUID != r.owner {
		return Identity{}, fmt.Errorf("peer pid %d uid %d, owner %d: %w", peerPID, peerUID, r.owner, ErrWrongUID)
	}
	seen := make(map[int]bool, 8)
	var child *procstat.Stat
	pid := peerPID
	for depth := 0; ; depth++ {
		if depth > MaxAncestors {
			return Identity{}, fmt.Errorf("peer pid %d: %w", peerPID, ErrTooDeep)
		}
		if pid <= 0 {
			// SO_PEERCRED gives 0 for a peer outside our pid namespace.
			return Identity{}, fmt.Errorf("peer pid %d: pid %d: %w", peerPID, pid, ErrNoProcess)
		}
		if seen[pid] {
			return Identity{}, fmt.Errorf("peer pid %d: at pid %d: %w", peerPID, pid, ErrCycle)
		}
		seen[pid] = true
		st, err := r.stat(pid)
		if err != nil {
			return Identity{}, fmt.Errorf("peer pid %d: %v: %w", peerPID, err, ErrNoProcess)
		}
		if child != nil && st.StartTime > child.StartTime {
			// A parent cannot be younger than its child: the child's ppid
			// was reused between our two reads.
			return Identity{}, fmt.Errorf("peer pid %d: parent %d younger than child %d: %w", peerPID, pid, child.PID, ErrPIDReused)
		}
		if st.State == 'Z' || st.State == 'X' {
			// An exiting process's children are being reparented.
			return Identity{}, fmt.Errorf("peer pid %d: pid %d is exiting: %w", peerPID, pid, ErrNoRoot)
		}
		id, found, err := r.lookup(pid, st.StartTime)
		if err != nil {
			return Identity{}, fmt.Errorf("peer pid %d: %w", peerPID, err)
		}
		if found {
			if id.UID != peerUID {
				return Identity{}, fmt.Errorf("peer pid %d: root %d belongs to uid %d: %w", peerPID, pid, id.UID, ErrWrongUID)
			}
			return id, nil
		}
		// spec: U2 — reparenting: an orphan's new parent is init or a
		// subreaper, which lies outside every sandbox, so the walk reaches
		// pid 1, a ppid of 0, or the daemon (the parent of every root)
		// before any root.
		if pid == 1 || st.PPID == 0 || pid == r.self {
			return Identity{}, fmt.Errorf("peer pid %d: reached pid %d: %w", peerPID, pid, ErrNoRoot)
		}
		child = &st
		pid = st.PPID
	}
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}
