package sandbox

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/bwrap"

	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/workspace"
)

// What a started view holds until its sandbox ends: the placeholders of
// absent protected names and their warnings.

// Held is what a built view holds on the host.
type Held struct {
	files    []*os.File
	releases []func()
	warnings []string
	// absent: the absent sources (by kind) opened once per view;
	// each bind gets a duplicate (bwrap closes a --bind-fd descriptor).
	absent     map[string]*os.File
	absentPath map[string]string
	// tidy: where a refused start may have left mount points bwrap made
	// (Held.tidyUp); closed by Ended.
	tidy []tidyDir
}

// absentSource is a new descriptor of the absent source for the protected
// name (workspace.AbsentSource), each source checked once per view.
func (h *Held) absentSource(runtime, name string) (*os.File, string, error) {
	i := "file"
	switch {
	case workspace.IsDirName(name):
		i = "dir"
	case name == ".mcp.json":
		i = name
	}
	if h.absent == nil {
		h.absent, h.absentPath = map[string]*os.File{}, map[string]string{}
	}
	if h.absent[i] == nil {
		f, p, err := workspace.AbsentSource(runtime, name)
		if err != nil {
			return nil, "", err
		}
		h.files = append(h.files, f) // closed by Started
		h.absent[i], h.absentPath[i] = f, p
	}
	f, err := safefs.Dup(h.absent[i])
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	return f, h.absentPath[i], nil
}

// Warnings are what the run should be told about this sandbox: a
// directory bound read-only because its protected paths could not all be
// found, and the grant that lifts it.
func (h *Held) Warnings() []string {
	if h == nil {
		return nil
	}
	return h.warnings
}

// Started closes the descriptors bwrap inherited (it has its own copies).
func (h *Held) Started() {
	if h == nil {
		return
	}
	for _, f := range h.files {
		f.Close()
	}
	h.files = nil
	h.absent = nil
}

// Ended releases the placeholders (the last use removes them) and closes
// what Started did not.
func (h *Held) Ended() {
	if h == nil {
		return
	}
	h.Started()
	for _, r := range h.releases {
		r()
	}
	h.releases = nil
	h.dropTidy()
}

// tidyDir is a writable host directory of the view with anchored
// protected paths below it (bwrap.Anchor): the directory as bwrap got it,
// and each anchor's path in it (deepest first) with the entry the walk's
// listing had there.
type tidyDir struct {
	dir     *os.File
	entries []tidyEntry
}

type tidyEntry struct {
	rel   string
	under safefs.Identity
}

// keepTidy records the anchors a view has below d (bound at dst) for
// tidyUp. Without a descriptor of d nothing is recorded: tidying is a
// courtesy, the view check is the wall.
func (h *Held) keepTidy(d *workspace.Dir, dst string, anchors []bwrap.Anchor) {
	var es []tidyEntry
	for _, a := range anchors {
		rel, ok := strings.CutPrefix(a.Dst, dst+"/")
		if ok && a.Under != (safefs.Identity{}) {
			es = append(es, tidyEntry{rel: rel, under: a.Under})
		}
	}
	if len(es) == 0 {
		return
	}
	f, err := safefs.Dup(d.File)
	if err != nil {
		return
	}
	slices.SortStableFunc(es, func(a, b tidyEntry) int { return strings.Count(b.rel, "/") - strings.Count(a.rel, "/") })
	h.tidy = append(h.tidy, tidyDir{dir: f, entries: es})
}

// tidyUp removes what a start the view check refused (bwrap.ErrMoved)
// left in the host's directories. bwrap makes a missing mount point
// (mkdir -p): when a directory holding a protected path moved between the
// walk and the mount, an empty directory of the moved one's name — and the
// protected name in it — appeared in the host's workspace, and stood in
// the way of the directory's next move back (ENOTEMPTY). An anchored path
// is removed, deepest first, only when it is what bwrap could have made
// for this start: not the entry the walk's listing had there (compared
// listing to listing, as the view check does), a directory of the
// daemon's user made after the start began (a host rmdir would also take
// a mount of another running sandbox off it), and empty (rmdir removes
// nothing with content). It is reached below the bound directory without
// following a symlink. It returns how many were removed. spec: B1
func (h *Held) tidyUp(since time.Time) int {
	// File times come from the kernel's coarse clock, a tick behind.
	since = since.Add(-50 * time.Millisecond)
	n, uid := 0, uint32(os.Geteuid())
	h.eachAnchored(func(dirfd int, name string, ino uint64, e tidyEntry) bool {
		if ino == e.under.Ino {
			return true
		}
		var st unix.Statx_t
		if unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_UID|unix.STATX_CTIME|unix.STATX_BTIME, &st) != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uid {
			return true
		}
		made := st.Ctime
		if st.Mask&unix.STATX_BTIME != 0 {
			made = st.Btime
		}
		if time.Unix(made.Sec, int64(made.Nsec)).After(since) && unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR) == nil {
			n++
		}
		return true
	})
	return n
}

// moved reports whether an anchored path of the view is no longer the
// entry the walk's listing had there (gone, or another file), by its
// directory's listing now: bwrap, making the view, met a directory moved
// on the host.
func (h *Held) moved() bool {
	moved := false
	h.eachAnchored(func(_ int, _ string, ino uint64, e tidyEntry) bool {
		moved = ino != e.under.Ino
		return !moved
	})
	return moved
}

// eachAnchored calls fn, deepest first, with each anchored path's
// directory (reached below the bound directory without a symlink; -1 when
// it cannot be), its name and the inode its directory's listing gives the
// name now (0: not there, or the directory is not the one the walk listed
// — another device), until fn returns false.
func (h *Held) eachAnchored(fn func(dirfd int, name string, ino uint64, e tidyEntry) bool) {
	if h == nil {
		return
	}
	buf := make([]byte, 8<<10)
	for _, t := range h.tidy {
		for _, e := range t.entries {
			parent, name := path.Dir(e.rel), path.Base(e.rel)
			pf, err := safefs.OpenBeneath(t.dir, parent, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				if !fn(-1, name, 0, e) {
					return
				}
				continue
			}
			var ino uint64
			if id, err := safefs.ID(pf); err == nil && id.Dev == e.under.Dev {
				_ = safefs.ReadDirentsIno(int(pf.Fd()), buf, func(n []byte, i uint64, _ byte) error {
					if string(n) == name {
						ino = i
					}
					return nil
				})
			}
			more := fn(int(pf.Fd()), name, ino, e)
			pf.Close()
			if !more {
				return
			}
		}
	}
}

// dropTidy closes what tidying needed once the start ran: nothing is
// tidied after.
func (h *Held) dropTidy() {
	if h == nil {
		return
	}
	for _, t := range h.tidy {
		t.dir.Close()
	}
	h.tidy = nil
}
