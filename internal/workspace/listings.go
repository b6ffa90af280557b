package workspace

import (
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// A workspace is walked for its protected paths at every sandbox start
// and at a run's start and end (Walk); on a tree of thousands of
// directories each walk is tens of milliseconds, nearly all the kernel's
// directory reads. The walk keeps each directory's listing (names and
// types) from the last complete walk of the same top directory, with the
// directory's stamp — device, inode, mtime and ctime, taken before it was
// read. A directory whose stamp is unchanged has the same entries: every
// create, remove, rename and link in it changes its mtime and ctime, and
// a directory moved or replaced is another inode or has a new ctime. So
// the next walk stats each directory and reads only those whose stamp
// changed; what it finds is computed from the listings exactly as from a
// fresh read (the grants, the skipped paths, the depth are applied anew).
// This is git's untracked cache, with its caveat: a change in the same
// clock tick as the read could leave the stamp as it was, so a listing
// is kept for reuse only when its directory's times were already older
// than listingRacy (listingCoarseRacy for a filesystem without
// nanoseconds) when it was read. Only filesystems that keep directory
// times locally are trusted (not NFS, FUSE or overlayfs, whose times
// another host or layer may change late), and only directories on the
// top's own filesystem (not a mount below it); elsewhere every directory
// is read at every walk. Nothing is kept from a walk that was cut short
// or that was not a snapshot (Walk), nor across a wall clock set back.
const (
	listingRacy       = 100 * time.Millisecond
	listingCoarseRacy = 2 * time.Second
	// maxListingTops and maxListingBytes bound what is kept: the
	// listings of at most 8 top directories, none of more than 8 MiB (a
	// tree of ~150k entries; a bigger one is read at every walk).
	maxListingTops  = 8
	maxListingBytes = 8 << 20
)

// trustedFS are the filesystems (statfs f_type) whose directory times
// the cache trusts.
var trustedFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2, ext3, ext4
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
	unix.F2FS_SUPER_MAGIC:  true,
}

// dirNode is one directory's listing and the stamp it was read under.
type dirNode struct {
	dev, ino     uint64
	mtime, ctime unix.Timespec
	listing
}

// size is what n holds in memory, roughly.
func (n *dirNode) size() int {
	return len(n.names) + len(n.ents)*int(unsafe.Sizeof(dirent{})) + int(unsafe.Sizeof(*n)) + 64
}

func (n *dirNode) same(st *unix.Stat_t) bool {
	return n.dev == st.Dev && n.ino == st.Ino && n.mtime == st.Mtim && n.ctime == st.Ctim
}

// settled reports whether st's times were older than the racy window at
// t: only then can an unchanged stamp later mean unchanged entries.
func settled(st *unix.Stat_t, t time.Time) bool {
	limit := t.Add(-listingRacy).UnixNano()
	if st.Mtim.Nsec == 0 || st.Ctim.Nsec == 0 {
		limit = t.Add(-listingCoarseRacy).UnixNano()
	}
	return st.Mtim.Nano() < limit && st.Ctim.Nano() < limit
}

// listingCache holds the listings of the last complete walk of each top
// directory (by identity). A walk takes the map as it was and stores a
// new one: stored maps are never changed.
type listingCache struct {
	mu   sync.Mutex
	tops map[safefs.Identity]*kept
}

// kept are one top directory's listings and when they were stored.
type kept struct {
	nodes map[string]*dirNode
	at    time.Time // with its monotonic reading
}

var walkListings = &listingCache{tops: map[safefs.Identity]*kept{}}

// listingsRead counts the directories walks read (not taken from the
// cache); tests read it.
var listingsRead atomic.Int64

// listingWalk is one walk's use of the cache.
type listingWalk struct {
	c         *listingCache
	id        safefs.Identity
	cacheable bool
	prev      map[string]*dirNode // the last walk's, or nil
	next      map[string]*dirNode // this walk's
	bytes     int                 // in next
	// stamps: every directory this walk listed, with the stamp it was
	// listed under; raced: a directory listed by its parent was gone or
	// replaced at its turn. Both say whether the walk was a snapshot.
	stamps []stamp
	raced  bool
}

type stamp struct {
	rel          string
	dev, ino     uint64
	mtime, ctime unix.Timespec
	depth        int
	used         *listing // the listing the walk used (it owns its memory)
}

// begin starts a walk of the directory top.
func (c *listingCache) begin(top int) *listingWalk {
	w := &listingWalk{c: c}
	var st unix.Stat_t
	var fs unix.Statfs_t
	if unix.Fstat(top, &st) != nil || unix.Fstatfs(top, &fs) != nil || !trustedFS[int64(fs.Type)] {
		return w
	}
	w.id, w.cacheable = safefs.Identity{Dev: st.Dev, Ino: st.Ino}, true
	w.next = map[string]*dirNode{}
	c.mu.Lock()
	if k := c.tops[w.id]; k != nil {
		// A wall clock set back since (an NTP step, a restored VM) could
		// stamp a change with times a kept listing already has.
		if time.Now().Round(0).Sub(k.at.Round(0)) < time.Since(k.at)-time.Second {
			delete(c.tops, w.id)
		} else {
			w.prev = k.nodes
		}
	}
	c.mu.Unlock()
	return w
}

// listing is the listing of rel (below top; "" is top itself): the last
// walk's when the directory's stamp is unchanged and was settled, else
// read into l (valid until l's next read). An error with a nil listing
// means the directory could not be opened; with a listing, that the read
// stopped partway (what was read is returned).
func (w *listingWalk) listing(top *os.File, rel string, depth int, l *lister) (*listing, error) {
	if w.prev != nil {
		t := time.Now()
		var st unix.Stat_t
		var err error
		if rel == "" {
			err = unix.Fstat(int(top.Fd()), &st)
		} else {
			err = unix.Fstatat(int(top.Fd()), rel, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if n := w.prev[rel]; err == nil && n != nil && n.same(&st) && settled(&st, t) {
			w.next[rel] = n
			w.bytes += n.size()
			w.stamps = append(w.stamps, stamp{rel: rel, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim, depth: depth, used: &n.listing})
			return &n.listing, nil
		}
	}
	fd := int(top.Fd())
	if rel != "" {
		var err error
		if fd, err = openBeneath(top, rel); err != nil {
			return nil, err
		}
		defer unix.Close(fd)
	}
	listingsRead.Add(1)
	t := time.Now()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil { // before the read: a change during it shows later
		return nil, err
	}
	if err := l.list(fd); err != nil {
		return &l.listing, err
	}
	// A copy outlives l's next read: the end of the walk may compare it
	// (unchanged), and a settled one is kept for the next walk.
	used := l.listing.clone()
	w.stamps = append(w.stamps, stamp{rel: rel, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim, depth: depth, used: &used})
	// Only directories on the top's own filesystem: a mount below it (an
	// NFS or FUSE one) is judged by its own kind, so it is read every
	// time. This is also what keeps a stamp from another filesystem that
	// reuses device numbers (a btrfs snapshot copies inode numbers and
	// times, and a deleted subvolume's device number is given to the next
	// snapshot) from ever matching a kept one.
	if w.cacheable && st.Dev == w.id.Dev && settled(&st, t) {
		n := &dirNode{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim, listing: used}
		if w.bytes+n.size() <= maxListingBytes {
			w.next[rel] = n
			w.bytes += n.size()
		}
	}
	return &used, nil
}

// lastID is the identity of the directory listed last.
func (w *listingWalk) lastID() safefs.Identity {
	if len(w.stamps) == 0 {
		return safefs.Identity{}
	}
	s := w.stamps[len(w.stamps)-1]
	return safefs.Identity{Dev: s.dev, Ino: s.ino}
}

// unchanged reports whether the walk was a snapshot: no listed
// directory was gone at its turn, and every one either still has the
// stamp it was listed under or, read again, gives the walk what it took
// from it (project) — files made or removed meanwhile, and other runs'
// placeholders at the top, change a stamp but nothing the walk found.
func (w *listingWalk) unchanged(top *os.File, g Grants, skipSet map[string]bool) bool {
	if w.raced {
		return false
	}
	var l lister
	for _, s := range w.stamps {
		var st unix.Stat_t
		var err error
		if s.rel == "" {
			err = unix.Fstat(int(top.Fd()), &st)
		} else {
			err = unix.Fstatat(int(top.Fd()), s.rel, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err == nil && st.Dev == s.dev && st.Ino == s.ino && st.Mtim == s.mtime && st.Ctim == s.ctime {
			continue
		}
		if err != nil || st.Dev != s.dev || st.Ino != s.ino {
			return false // gone or another directory now
		}
		rel := s.rel
		if rel == "" {
			rel = "."
		}
		fd, err := openBeneath(top, rel)
		if err != nil {
			return false
		}
		err = l.list(fd)
		unix.Close(fd)
		if err != nil || project(&l.listing, s.rel, s.depth, g, skipSet) != project(s.used, s.rel, s.depth, g, skipSet) {
			return false
		}
	}
	return true
}

// end stores this walk's listings for the next walk of the same top
// directory when the walk was complete and a snapshot; otherwise the
// kept ones are forgotten.
func (w *listingWalk) end(keep bool) {
	if !w.cacheable {
		return
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if !keep {
		delete(w.c.tops, w.id)
		return
	}
	if _, ok := w.c.tops[w.id]; !ok && len(w.c.tops) >= maxListingTops {
		for id := range w.c.tops { // any one: the bound is on memory, not on hits
			delete(w.c.tops, id)
			break
		}
	}
	w.c.tops[w.id] = &kept{nodes: w.next, at: time.Now()}
}

// noOpenat2 is set once openat2 answered ENOSYS: the walk then opens
// through safefs, one component at a time.
var noOpenat2 atomic.Bool

// openBeneath opens the directory rel below top with no symlink in any
// component (ELOOP, or safefs.ErrSymlink from the fallback).
func openBeneath(top *os.File, rel string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	for !noOpenat2.Load() {
		fd, err := unix.Openat2(int(top.Fd()), rel, &unix.OpenHow{Flags: flags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR, unix.EAGAIN: // EAGAIN: a rename raced the lookup
			continue
		case unix.ENOSYS:
			noOpenat2.Store(true)
		default:
			return -1, err
		}
	}
	f, err := safefs.OpenBeneath(top, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	return fd, err
}
