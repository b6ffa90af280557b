package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// Registry holds the placeholders the daemon created so that absent
// protected names cannot be created from a sandbox. A placeholder is the
// host's mount point for a bind that keeps the name: an empty directory of
// mode 01500 for a directory name, a FIFO of mode 000 for a file name (the
// "signature"; the file names of a directory are hard links of one FIFO,
// linkFIFO). Both are what `git status` never lists (git skips empty
// directories and non-regular files, with or without --ignored), no host
// program blocks on the FIFO without a reader's permission, and a readable
// directory gives git no warning. Inside a sandbox the placeholder is never
// seen: an absent source (AbsentSource) is bound over it. It is shared by every
// sandbox using it and removed when the last one ended, if it is still the
// same empty inode. A run pins the placeholders its sandboxes used
// (AcquireFor) until it ends (EndRun): its steps and tool calls, one
// sandbox after another, reuse them instead of making and unlinking an
// inode in the workspace for every call, and none is left once the run
// is over. One left by a crashed daemon carries the signature
// and is adopted, then removed, by the next run in that directory.
// One Registry serves the whole daemon (config.Config.Placeholders).
type Registry struct {
	mu   sync.Mutex
	held map[phKey]*placeholder
	// pins: per run, the placeholders it holds until EndRun.
	pins map[string]map[phKey]*placeholder
	// ended: the runs EndRun saw last (a sandbox of the run still being
	// built then pins nothing: no one would unpin it), oldest first.
	ended     map[string]bool
	endedFIFO []string
	// dirs holds one descriptor per directory with placeholders, shared by
	// them: a sandbox holds one descriptor per workspace, not one per
	// protected name (descriptors independent of the load).
	dirs map[safefs.Identity]*heldDir
	// shareDir, linger: Share.
	shareDir string
	linger   time.Duration
}

type heldDir struct {
	f    *os.File
	refs int // placeholders in it
	// fifo is an O_PATH descriptor of a file placeholder this registry
	// made in the directory: the next file placeholder there is a hard
	// link of it (linkFIFO), not a new inode. nil when there is none.
	fifo *os.File
	// Shared mode (Share): the node's shared lock on the directory,
	// held while it holds any placeholder there.
	lock     *os.File
	lockPath string
	idle     time.Time // when its last placeholder here was released (refs 0)
}

type phKey struct {
	dir  safefs.Identity
	name string
}

// placeholder is one in use; its directory (Registry.dirs, by phKey.dir)
// is held until its removal: the caller's descriptors close at the start.
type placeholder struct {
	refs int
	id   safefs.Identity
	dir  bool
}

// Share makes the registry one of several — cluster nodes — binding
// placeholders in the same shared workspaces: a node holds a shared lock
// (flock) on a file in dir named after the workspace directory's path
// from before it makes or adopts a placeholder there until it leaves the
// directory, linger after its last use there ended (a busy directory's
// placeholders are not made and removed for every run: on a filesystem
// whose inode allocator skips recently freed inodes that churn made 60
// concurrent run starts 4–6× slower). Leaving, it removes the
// placeholders only if it can take the lock exclusively (no other node
// holds it), else it leaves them to the last node. A node that waits to
// enter while another removes waits for it (at most shareWait). dir is on
// the shared root; the workspace paths are the same on every node (a
// request names a host path).
func (r *Registry) Share(dir string, linger time.Duration) {
	r.mu.Lock()
	r.shareDir, r.linger = dir, linger
	r.mu.Unlock()
}

// shareWait bounds a node's wait to enter a directory another node is
// clearing: the removal is a few unlinks.
const shareWait = 10 * time.Second

// enterShared takes the node's shared lock on parent's directory.
func (r *Registry) enterShared(parent *os.File) (*os.File, string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(parent.Fd())))
	if err != nil {
		return nil, "", fmt.Errorf("shared placeholders: %w", err)
	}
	sum := sha256.Sum256([]byte(p))
	path := filepath.Join(r.shareDir, hex.EncodeToString(sum[:16])+".lock")
	if err := os.MkdirAll(r.shareDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("shared placeholders: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("shared placeholders: %w", err)
	}
	for deadline := time.Now().Add(shareWait); ; time.Sleep(5 * time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return f, path, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR || time.Now().After(deadline) {
			f.Close()
			return nil, "", fmt.Errorf("shared placeholders of %s: %w", p, err)
		}
	}
}

// leaveIdle leaves the directory of d when it is still d and has been
// unused here for linger (a later use and release set a later timer).
func (r *Registry) leaveIdle(id safefs.Identity, d *heldDir) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirs[id] != d || d.refs > 0 || time.Since(d.idle) < r.linger {
		return
	}
	delete(r.dirs, id)
	r.leaveShared(d)
	d.close()
}

// leaveShared ends the node's use of d: its shared lock goes, and when
// no other node holds one (the exclusive lock is free) every placeholder
// in d is removed — each protected name still carrying the signature,
// whichever node made it (the first node to leave may have made some the
// last never used).
func (r *Registry) leaveShared(d *heldDir) {
	d.lock.Close()
	f, err := os.OpenFile(d.lockPath, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return // another node still binds here: it removes them
	}
	for _, name := range slices.Concat(Protected, []string{"hooks"}) {
		if signature(d.f, name, safefs.Identity{}) < 0 {
			continue
		}
		flags := 0
		if _, isDir := isDirID(d.f, name); isDir {
			flags = unix.AT_REMOVEDIR // fails unless empty
		}
		_ = unix.Unlinkat(int(d.f.Fd()), name, flags)
	}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{held: map[phKey]*placeholder{}, dirs: map[safefs.Identity]*heldDir{},
		pins: map[string]map[phKey]*placeholder{}}
}

// AcquireFor is Acquire by a sandbox of run: a placeholder it returns
// stays, for the run's next sandboxes, until EndRun(run) — not only
// until release. An empty run pins nothing.
func (r *Registry) AcquireFor(run string, top *os.File, rel string, isDir bool) (*os.File, bool, func(), error) {
	f, ph, release, k, err := r.acquire(top, rel, isDir)
	if err != nil || !ph || run == "" {
		return f, ph, release, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.held[k]
	if p == nil || r.pins[run][k] == p || r.ended[run] {
		return f, ph, release, nil // pinned already, gone meanwhile, or the run is over
	}
	if r.pins[run] == nil {
		r.pins[run] = map[phKey]*placeholder{}
	}
	r.pins[run][k] = p
	p.refs++
	return f, ph, release, nil
}

// EndRun drops run's pins: each placeholder no sandbox uses any more is
// removed now. A sandbox of the run built after it (one whose start was
// under way) pins nothing: its placeholders go with it.
func (r *Registry) EndRun(run string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.pins[run] {
		if r.held[k] == p { // not replaced since
			r.releaseLocked(k)
		}
	}
	delete(r.pins, run)
	if r.ended == nil {
		r.ended = map[string]bool{}
	}
	if !r.ended[run] {
		r.ended[run] = true
		r.endedFIFO = append(r.endedFIFO, run)
		if len(r.endedFIFO) > maxEnded {
			delete(r.ended, r.endedFIFO[0])
			r.endedFIFO = r.endedFIFO[1:]
		}
	}
}

// maxEnded bounds the ended runs remembered: far more than can have a
// sandbox still being built when they end.
const maxEnded = 4096

// Signature modes of placeholders (Registry).
const (
	PlaceholderDirMode  = 0o1500 // sticky, owner r-x: empty, unwritable, readable by the host's git
	PlaceholderFileMode = 0      // a FIFO nobody but root may open
)

// Acquire returns an O_PATH descriptor of rel below top to bind read-only:
// the existing file or directory, or a placeholder created now (a
// directory when isDir, else a FIFO). ph says f is a placeholder: the
// caller binds an absent source over it, never f itself. release ends
// this use; the last use of a placeholder removes it when it is still
// empty and the same inode.
func (r *Registry) Acquire(top *os.File, rel string, isDir bool) (f *os.File, ph bool, release func(), err error) {
	f, ph, release, _, err = r.acquire(top, rel, isDir)
	return f, ph, release, err
}

// acquire is Acquire, with the placeholder's key (AcquireFor pins it).
// A name at the top (rel without a directory, the common case: every
// protected name but a bare repository's hooks/) is made below top
// itself, not below a descriptor of it opened again: one open and one
// stat fewer for each of a view's ~22 names.
func (r *Registry) acquire(top *os.File, rel string, isDir bool) (f *os.File, ph bool, release func(), k phKey, err error) {
	parent, owned := top, false
	if dir := path.Dir(rel); dir != "." {
		if parent, err = safefs.OpenBeneath(top, dir, unix.O_PATH|unix.O_DIRECTORY); err != nil {
			return nil, false, nil, k, fmt.Errorf("placeholder %s: %w", rel, err)
		}
		owned = true
	}
	keep := false
	defer func() {
		if owned && !keep {
			parent.Close()
		}
	}()
	pid, err := safefs.ID(parent)
	if err != nil {
		return nil, false, nil, k, err
	}
	name := path.Base(rel)
	k = phKey{pid, name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.held[k]; p != nil {
		// Held already (by the run's earlier sandboxes, or another run
		// here): only checked to be the same inode still, not made again.
		if f, err = safefs.OpenBeneath(parent, name, unix.O_PATH); err == nil {
			if id, err := safefs.ID(f); err == nil && id == p.id {
				p.refs++
				var once sync.Once
				return f, true, func() { once.Do(func() { r.release(k) }) }, k, nil
			}
			f.Close()
		}
	}
	var lock *os.File
	lockPath := ""
	if r.shareDir != "" && r.dirs[pid] == nil {
		// Entered before anything is made here: a node clearing the
		// directory is waited for, never raced.
		if lock, lockPath, err = r.enterShared(parent); err != nil {
			return nil, false, nil, k, fmt.Errorf("placeholder %s: %w", rel, err)
		}
		defer func() {
			if lock != nil {
				lock.Close() // not kept: nothing of ours here
			}
		}()
	}
	if isDir {
		// mkdir applies the umask; the signature needs the exact mode.
		if err = unix.Mkdirat(int(parent.Fd()), name, 0); err == nil {
			err = unix.Fchmodat(int(parent.Fd()), name, PlaceholderDirMode, 0)
			if err != nil {
				_ = unix.Unlinkat(int(parent.Fd()), name, unix.AT_REMOVEDIR)
			}
		}
	} else if err = r.linkFIFO(pid, parent, name); err != nil && !errors.Is(err, unix.EEXIST) {
		// A FIFO, not an empty file: git lists untracked regular files
		// and symlinks only. Never opened by the daemon (O_PATH only).
		err = unix.Mkfifoat(int(parent.Fd()), name, PlaceholderFileMode)
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			// A filesystem without FIFOs (vfat, some FUSE): the empty
			// mode-000 file of older daemons, which git does list.
			var fd int
			fd, err = unix.Openat(int(parent.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
		}
	}
	created := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, false, nil, k, fmt.Errorf("placeholder %s: %w", rel, err)
	}
	// O_PATH never opens a FIFO for reading: it cannot block.
	f, err = safefs.OpenBeneath(parent, name, unix.O_PATH)
	if err != nil {
		return nil, false, nil, k, fmt.Errorf("placeholder %s: %w", rel, err)
	}
	id, err := safefs.ID(f)
	if err != nil {
		f.Close()
		return nil, false, nil, k, err
	}
	p := r.held[k]
	switch {
	case p != nil && p.id == id:
		p.refs++
	case created || signature(parent, name, id) >= 0:
		// Ours: created now, or left by a crashed daemon (of either kind).
		if !created {
			_, isDir = isDirID(parent, name)
		}
		d := r.dirs[pid]
		if d == nil {
			held := parent
			if !owned { // the caller's: the registry keeps a copy
				if held, err = safefs.Dup(parent); err != nil {
					f.Close()
					return nil, false, nil, k, fmt.Errorf("placeholder %s: %w", rel, err)
				}
			}
			d = &heldDir{f: held, lock: lock, lockPath: lockPath}
			r.dirs[pid] = d
			keep, lock = true, nil
		}
		if p == nil {
			d.refs++ // a placeholder replacing one of the same name keeps its reference
		}
		p = &placeholder{refs: 1, id: id, dir: isDir}
		r.held[k] = p
		if created && !isDir && (d.fifo == nil || !sameID(d.fifo, id)) {
			d.setFIFO(f) // made now (not linked): the next ones link to it
		}
	default:
		return f, false, func() {}, k, nil // a real file: bound read-only, never removed
	}
	var once sync.Once
	return f, true, func() { once.Do(func() { r.release(k) }) }, k, nil
}

func (r *Registry) release(k phKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(k)
}

func (r *Registry) releaseLocked(k phKey) {
	p := r.held[k]
	if p == nil {
		return
	}
	if p.refs--; p.refs > 0 {
		return
	}
	delete(r.held, k)
	d := r.dirs[k.dir]
	if r.shareDir != "" {
		// Left (and cleared, if this node is the last) once idle for linger.
		if d.refs--; d.refs <= 0 {
			d.idle = time.Now()
			time.AfterFunc(r.linger, func() { r.leaveIdle(k.dir, d) })
		}
		return
	}
	defer func() {
		if d.refs--; d.refs <= 0 {
			delete(r.dirs, k.dir)
			d.close()
		}
	}()
	parent := d.f
	if signature(parent, k.name, p.id) < 0 {
		return // changed since: not ours any more
	}
	flags := 0
	if p.dir {
		flags = unix.AT_REMOVEDIR // fails unless empty
	}
	_ = unix.Unlinkat(int(parent.Fd()), k.name, flags)
}

// linkFIFO makes name in parent a hard link of the file placeholder the
// registry holds a descriptor of in that directory: one inode for every
// absent file name there instead of one each (a one-call run makes and
// removes its workspace's placeholders; on a filesystem whose allocator
// skips recently freed inodes, each new one costs more than the last).
// The link is made from the descriptor, never from a name, so it is the
// inode this registry made whatever happened to its names since. Any
// error (none held, every name of it already removed, a filesystem
// without hard links) leaves the caller to make a new one. r.mu is held.
func (r *Registry) linkFIFO(dir safefs.Identity, parent *os.File, name string) error {
	d := r.dirs[dir]
	if d == nil || d.fifo == nil {
		return unix.ENOENT
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.fifo.Fd()), &st); err != nil || st.Mode&0o7777 != PlaceholderFileMode ||
		st.Mode&unix.S_IFMT != unix.S_IFIFO && (st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0) {
		d.fifo.Close() // changed since it was made: not a placeholder to copy
		d.fifo = nil
		return unix.ENOENT
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(d.fifo.Fd())), int(parent.Fd()), name, unix.AT_SYMLINK_FOLLOW)
}

// setFIFO keeps a descriptor of f (a file placeholder made now) as the
// source of the directory's next links.
func (d *heldDir) setFIFO(f *os.File) {
	dup, err := safefs.Dup(f)
	if err != nil {
		return // no link source: the next one is made anew
	}
	if d.fifo != nil {
		d.fifo.Close()
	}
	d.fifo = dup
}

// close closes the directory's descriptors.
func (d *heldDir) close() {
	d.f.Close()
	if d.fifo != nil {
		d.fifo.Close()
		d.fifo = nil
	}
}

// sameID says whether f is the inode id.
func sameID(f *os.File, id safefs.Identity) bool {
	got, err := safefs.ID(f)
	return err == nil && got == id
}

// signature is 0 when name in parent is still a placeholder with identity
// id (id zero: any), else -1: a directory of PlaceholderDirMode, a FIFO of
// PlaceholderFileMode, or what an older daemon left (a mode-000 directory,
// an empty mode-000 file), adopted after a crash all the same.
func signature(parent *os.File, name string, id safefs.Identity) int {
	var st unix.Stat_t
	if unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return -1
	}
	if (id != safefs.Identity{}) && (safefs.Identity{Dev: st.Dev, Ino: st.Ino}) != id {
		return -1
	}
	perm := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		if perm == PlaceholderFileMode {
			return 0
		}
	case unix.S_IFREG:
		if perm == 0 && st.Size == 0 {
			return 0
		}
	case unix.S_IFDIR:
		if perm == PlaceholderDirMode || perm == 0 {
			return 0 // emptiness is rmdir's own check
		}
	}
	return -1
}

func isDirID(parent *os.File, name string) (safefs.Identity, bool) {
	var st unix.Stat_t
	if unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return safefs.Identity{}, false
	}
	return safefs.Identity{Dev: st.Dev, Ino: st.Ino}, st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// IsDirName says whether a protected name's placeholder is a directory.
func IsDirName(name string) bool {
	for _, d := range protectedDirs {
		if d == name {
			return true
		}
	}
	return name == "hooks"
}
