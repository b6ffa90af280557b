package workspace

import (
	"sync"
	"sync/atomic"
	"time"

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
// is read at every walk. Nothing is kept from a walk that was cut short.
const (
	listingRacy       = 100 * time.Millisecond
	listingCoarseRacy = 2 * time.Second
	// maxListingTops and maxListingEntries bound what is kept: the
	// listings of at most 8 top directories, none of more than 100,000
	// entries (a few MiB each; a bigger tree is read at every walk).
	maxListingTops    = 8
	maxListingEntries = 100_000
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
	tops map[safefs.Identity]map[string]*dirNode
}

var walkListings = &listingCache{tops: map[safefs.Identity]map[string]*dirNode{}}

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
	entries   int                 // in next
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
	w.prev = c.tops[w.id]
	c.mu.Unlock()
	return w
}

// listing is the listing of rel (below top; "" is top itself): the last
// walk's when the directory's stamp is unchanged and was settled, else
// read into l (valid until l's next read). An error with a nil listing
// means the directory could not be opened; with a listing, that the read
// stopped partway (what was read is returned).
func (w *listingWalk) listing(top int, rel string, l *lister) (*listing, error) {
	if w.prev != nil {
		t := time.Now()
		var st unix.Stat_t
		var err error
		if rel == "" {
			err = unix.Fstat(top, &st)
		} else {
			err = unix.Fstatat(top, rel, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if n := w.prev[rel]; err == nil && n != nil && n.same(&st) && settled(&st, t) {
			w.next[rel] = n
			w.entries += len(n.ents)
			return &n.listing, nil
		}
	}
	fd := top
	if rel != "" {
		var err error
		fd, err = unix.Openat2(top, rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
	}
	listingsRead.Add(1)
	t := time.Now()
	var st unix.Stat_t
	stampErr := unix.Fstat(fd, &st) // before the read: a change during it shows later
	if err := l.list(fd); err != nil {
		return &l.listing, err
	}
	// Only directories on the top's own filesystem: a mount below it (an
	// NFS or FUSE one) is judged by its own kind, so it is read every time.
	if w.cacheable && stampErr == nil && st.Dev == w.id.Dev && settled(&st, t) && w.entries+len(l.ents) <= maxListingEntries {
		w.next[rel] = &dirNode{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim, listing: l.listing.clone()}
		w.entries += len(l.ents)
	}
	return &l.listing, nil
}

// end stores this walk's listings for the next walk of the same top
// directory when the walk was complete; a walk cut short forgets them.
func (w *listingWalk) end(complete bool) {
	if !w.cacheable {
		return
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if !complete {
		delete(w.c.tops, w.id)
		return
	}
	if _, ok := w.c.tops[w.id]; !ok && len(w.c.tops) >= maxListingTops {
		for id := range w.c.tops { // any one: the bound is on memory, not on hits
			delete(w.c.tops, id)
			break
		}
	}
	w.c.tops[w.id] = w.next
}
