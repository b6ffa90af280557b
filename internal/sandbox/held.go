package sandbox

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

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
	for _, t := range h.tidy {
		t.dir.Close()
	}
	h.tidy = nil
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
// is removed, deepest first, when it is now a directory other than the
// entry the walk's listing had there, and empty (rmdir removes nothing
// else); it is reached below the bound directory without following a
// symlink. It returns how many were removed. spec: B1
func (h *Held) tidyUp() int {
	n := 0
	h.eachAnchored(func(dirfd int, name string, st *unix.Stat_t, e tidyEntry) bool {
		if st != nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && (safefs.Identity{Dev: st.Dev, Ino: st.Ino}) != e.under &&
			unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR) == nil {
			n++
		}
		return true
	})
	return n
}

// moved reports whether an anchored path of the view is no longer the
// entry the walk's listing had there (gone, or another file): bwrap,
// making the view, met a directory moved on the host.
func (h *Held) moved() bool {
	moved := false
	h.eachAnchored(func(_ int, _ string, st *unix.Stat_t, e tidyEntry) bool {
		moved = st == nil || (safefs.Identity{Dev: st.Dev, Ino: st.Ino}) != e.under
		return !moved
	})
	return moved
}

// eachAnchored calls fn, deepest first, with each anchored path's
// directory (reached below the bound directory without a symlink), its
// name and what is there now (nil when nothing or unreachable), until fn
// returns false.
func (h *Held) eachAnchored(fn func(dirfd int, name string, st *unix.Stat_t, e tidyEntry) bool) {
	if h == nil {
		return
	}
	for _, t := range h.tidy {
		for _, e := range t.entries {
			parent, name := path.Dir(e.rel), path.Base(e.rel)
			pf := t.dir
			if parent != "." {
				f, err := safefs.OpenBeneath(t.dir, parent, unix.O_PATH|unix.O_DIRECTORY)
				if err != nil {
					if !fn(-1, name, nil, e) {
						return
					}
					continue
				}
				pf = f
			}
			var st unix.Stat_t
			at := &st
			if unix.Fstatat(int(pf.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				at = nil
			}
			more := fn(int(pf.Fd()), name, at, e)
			if pf != t.dir {
				pf.Close()
			}
			if !more {
				return
			}
		}
	}
}
