package workspace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// Bounds of the protected-path walk (README "What the workspace may
// change"): .git is looked for down to MaxDepth directories below the top,
// at most MaxEntries directory entries are read, for at most MaxWalk, and
// at most MaxProtected paths are protected. Past a bound the walk stops
// (Found.Truncated): what lies further is unknown, so the directory is
// bound read-only unless a `partial` grant takes it as it is (Protect).
const (
	MaxDepth     = 8
	MaxEntries   = 200_000
	MaxWalk      = 2 * time.Second
	MaxProtected = 1024
)

// Kind of a found path.
type Kind int

// Kinds.
const (
	KindFile Kind = iota
	KindDir
	KindSymlink // never followed, never bound; a symlinked .git is reported
	KindAbsent  // a top-level protected name that does not exist
)

// Entry is one protected path, relative to the walked directory.
type Entry struct {
	Rel  string
	Kind Kind
	// Repo: Rel is a repository's .git (or a bare repository's hooks or
	// config), watched for changes that run code on the host.
	Repo bool
	// Dir is the directory holding Rel as the walk listed it. A view that
	// mounts Rel's protection checks, once its mounts are made, that the
	// mount sits in this very directory (bwrap.Anchor): a directory moved
	// since the walk would otherwise take its repository out from under
	// a protection mounted by path.
	Dir safefs.Identity
}

// Found is the result of a walk.
type Found struct {
	Entries   []Entry
	Bare      []string // bare repositories (their hooks/ and config are in Entries)
	Truncated string   // why the walk stopped early, or ""
}

// Walk finds the protected paths below dir without following a symlink:
// every .git to MaxDepth, bare repositories' hooks/ and config, and the
// other Protected names wherever the walk sees them; at the top level an
// absent protected name is listed as KindAbsent (for a placeholder)
// unless granted writable or creatable. skip are relative paths not walked
// (the runtime's hidden trees).
func Walk(dir *os.File, g Grants, skip []string) Found {
	// spec: B1 — the walk is what keeps every .git read-only.
	// A walk reads one directory after another; something moving a
	// directory meanwhile (another sandbox of the workspace, in a loop)
	// could hide a repository from it. So a walk checks at its end that
	// no listed directory vanished before its turn and that every one it
	// listed still gives what the walk took from it (its stamp unchanged,
	// or read again: project), and walks again if not; a directory that
	// keeps changing so is cut short (bound read-only), never taken as it
	// was half seen.
	for range maxWalkTries - 1 {
		if out, consistent := walkOnce(dir, g, skip); consistent || out.Truncated != "" {
			return out
		}
	}
	out, consistent := walkOnce(dir, g, skip)
	if !consistent && out.Truncated == "" {
		out.Truncated = "it changed during each of " + strconv.Itoa(maxWalkTries) + " walks"
	}
	return out
}

// maxWalkTries bounds the walks of a directory that changes meanwhile.
const maxWalkTries = 3

// walkOnce is one walk; consistent reports that no directory it listed
// changed or vanished before the walk's end.
func walkOnce(dir *os.File, g Grants, skip []string) (_ Found, consistent bool) {
	var out Found
	start := time.Now()
	entries := 0
	type item struct {
		rel   string
		depth int
	}
	top, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		out.Truncated = "cannot read the top directory: " + err.Error()
		return out, false
	}
	topFile := os.NewFile(uintptr(top), dir.Name())
	defer topFile.Close()
	add := func(e Entry) bool {
		if len(out.Entries) >= MaxProtected {
			out.Truncated = "more than " + strconv.Itoa(MaxProtected) + " protected paths"
			return false
		}
		out.Entries = append(out.Entries, e)
		return true
	}
	skipSet := make(map[string]bool, len(skip))
	for _, s := range skip {
		skipSet[s] = true
	}
	// The listings of the last complete walk of this directory: one whose
	// directory still has the stamp it had is used again instead of
	// being read (listings.go).
	lc := walkListings.begin(top)
	// One listing buffer for the whole walk: a directory's names are bytes
	// in it, made into strings only for what is kept (a protected path, a
	// directory to walk) — most of a workspace is neither.
	var l lister
	var relBuf []byte
	seenBuf := make([]bool, len(Protected))
	queue := []item{{"", 0}}
	for len(queue) > 0 && out.Truncated == "" {
		it := queue[0]
		queue = queue[1:]
		cur, err := lc.listing(topFile, it.rel, it.depth, &l)
		if err != nil && cur == nil {
			if it.rel != "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, safefs.ErrSymlink) || errors.Is(err, unix.ENOTDIR)) {
				// Gone or replaced since its parent was listed: not a
				// directory to walk, but the walk is not a snapshot.
				lc.raced = true
				continue
			}
			out.Truncated = "cannot read " + shown(it.rel) + ": " + err.Error()
			continue
		}
		dirID := lc.lastID()
		entries += len(cur.ents)
		if entries > MaxEntries {
			out.Truncated = "more than " + strconv.Itoa(MaxEntries) + " directory entries"
		} else if time.Since(start) > MaxWalk {
			out.Truncated = "the walk took longer than " + MaxWalk.String()
		}
		if err != nil && out.Truncated == "" {
			// An unreadable directory may hold a repository the sandbox's
			// owner can make readable again inside: unknown, so cut short.
			out.Truncated = "cannot read " + shown(it.rel) + ": " + err.Error()
		}
		if out.Truncated != "" {
			continue
		}
		// A bare repository: HEAD, objects/ and refs/ side by side. Its
		// hooks/ and config are protected; nothing below is walked. (An
		// absent HEAD passes as a regular one: the test has always been
		// the mode bits of a name the listing may not hold.)
		if it.rel != "" && cur.typeOf("HEAD").IsRegular() && cur.typeOf("objects").IsDir() && cur.typeOf("refs").IsDir() {
			out.Bare = append(out.Bare, it.rel)
			for _, n := range []string{"hooks", "config"} {
				k := cur.kindOf(n)
				if k == KindAbsent && n == "config" {
					continue
				}
				if !add(Entry{Rel: path.Join(it.rel, n), Kind: k, Repo: true, Dir: dirID}) {
					break
				}
			}
			continue
		}
		seen := seenBuf[:len(Protected)] // which of Protected this directory holds
		clear(seen)
		for i := range cur.ents {
			e := &cur.ents[i]
			name := cur.name(e)
			pi, protected := protectedIndex[string(name)]
			if protected {
				seen[pi] = true // present, walked or not
			}
			if len(skipSet) > 0 {
				relBuf = appendRel(relBuf[:0], it.rel, name)
				if skipSet[string(relBuf)] {
					continue
				}
			}
			if protected {
				if g.Writable[string(name)] {
					// Granted writable: walked like any other name below.
				} else {
					n := string(name)
					if !add(Entry{Rel: path.Join(it.rel, n), Kind: kindOfMode(e.mode), Repo: n == ".git", Dir: dirID}) {
						break
					}
					continue // protected whole: not walked
				}
			}
			if e.mode.IsDir() && it.depth < MaxDepth {
				queue = append(queue, item{path.Join(it.rel, string(name)), it.depth + 1})
			}
		}
		if it.rel == "" {
			for i, n := range Protected {
				if !seen[i] && !g.Writable[n] && !g.Creatable[n] {
					add(Entry{Rel: n, Kind: KindAbsent, Repo: n == ".git", Dir: dirID})
				}
			}
		}
	}
	consistent = out.Truncated == "" && lc.unchanged(topFile, g, skipSet)
	lc.end(consistent)
	return out, consistent
}

// project is what a walk takes from one directory's listing, in a form
// two listings can be compared by: the subdirectories it walks into, the
// protected names it finds and their kinds, and for a bare repository
// the names that make it one. At the top, protected names are left out:
// an absent one gets a placeholder and a present one is bound read-only,
// so either way it is protected, and other runs' placeholders come and go
// there. Inside a bare repository, hooks/ and config likewise.
func project(cur *listing, rel string, depth int, g Grants, skipSet map[string]bool) string {
	var items []string
	if rel != "" && cur.typeOf("HEAD").IsRegular() && cur.typeOf("objects").IsDir() && cur.typeOf("refs").IsDir() {
		for _, n := range []string{"HEAD", "objects", "refs"} {
			items = append(items, "b"+n+strconv.Itoa(int(kindOfMode(cur.typeOf(n)))))
		}
		return strings.Join(items, "\x00")
	}
	var relBuf []byte
	for i := range cur.ents {
		e := &cur.ents[i]
		name := cur.name(e)
		if len(skipSet) > 0 {
			relBuf = appendRel(relBuf[:0], rel, name)
			if skipSet[string(relBuf)] {
				continue
			}
		}
		if _, protected := protectedIndex[string(name)]; protected && !g.Writable[string(name)] {
			if rel != "" {
				items = append(items, "p"+string(name)+"\x00"+strconv.Itoa(int(kindOfMode(e.mode))))
			}
			continue
		}
		if e.mode.IsDir() && depth < MaxDepth {
			items = append(items, "d"+string(name))
		}
	}
	slices.Sort(items)
	return strings.Join(items, "\x00")
}

// protectedIndex is each Protected name's index.
var protectedIndex = func() map[string]int {
	m := make(map[string]int, len(Protected))
	for i, n := range Protected {
		m[n] = i
	}
	return m
}()

// appendRel appends path.Join(rel, name) for a name of one element.
func appendRel(b []byte, rel string, name []byte) []byte {
	if rel != "" {
		b = append(append(b, rel...), '/')
	}
	return append(b, name...)
}

// lister lists directories with getdents into buffers it keeps: a walk
// of thousands of directories allocates a few.
type lister struct {
	buf []byte // getdents
	listing
}

// listing is one directory's entries: names and types.
type listing struct {
	names []byte // back to back
	ents  []dirent
}

type dirent struct {
	off, end int         // the name in names
	mode     os.FileMode // type bits only, as os.DirEntry.Type
}

func (l *listing) name(e *dirent) []byte { return l.names[e.off:e.end] }

// clone is a copy of l that owns its memory.
func (l *listing) clone() listing {
	return listing{names: slices.Clone(l.names), ents: slices.Clone(l.ents)}
}

// list reads all of fd's entries ("." and ".." left out), in directory
// order, as File.ReadDir does: an entry of unknown type is lstat'ed, one
// gone since the listing is left out. On an error the entries read
// before it stay.
func (l *lister) list(fd int) error {
	if l.buf == nil {
		l.buf = make([]byte, 32<<10)
	}
	l.names, l.ents = l.names[:0], l.ents[:0]
	return safefs.ReadDirents(fd, l.buf, func(name []byte, typ byte) error {
		mode, ok := dtMode(typ)
		if !ok {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if err == unix.ENOENT {
					return nil // gone since it was listed
				}
				return &os.PathError{Op: "lstat", Path: string(name), Err: err}
			}
			mode, _ = dtMode(safefs.DirentType(st.Mode))
		}
		start := len(l.names)
		l.names = append(l.names, name...)
		l.ents = append(l.ents, dirent{start, len(l.names), mode})
		return nil
	})
}

// typeOf is the type of name in the listing (0 when absent).
func (l *listing) typeOf(name string) os.FileMode {
	for i := range l.ents {
		if string(l.name(&l.ents[i])) == name {
			return l.ents[i].mode
		}
	}
	return 0
}

func (l *listing) kindOf(name string) Kind {
	for i := range l.ents {
		if string(l.name(&l.ents[i])) == name {
			return kindOfMode(l.ents[i].mode)
		}
	}
	return KindAbsent
}

func kindOfMode(t os.FileMode) Kind {
	switch {
	case t&os.ModeSymlink != 0:
		return KindSymlink
	case t.IsDir():
		return KindDir
	}
	return KindFile
}

// dtMode is the os.FileMode type bits of a dirent type, as File.ReadDir
// gives them; ok is false for DT_UNKNOWN.
func dtMode(t byte) (os.FileMode, bool) {
	switch t {
	case unix.DT_BLK:
		return os.ModeDevice, true
	case unix.DT_CHR:
		return os.ModeDevice | os.ModeCharDevice, true
	case unix.DT_DIR:
		return os.ModeDir, true
	case unix.DT_FIFO:
		return os.ModeNamedPipe, true
	case unix.DT_LNK:
		return os.ModeSymlink, true
	case unix.DT_REG:
		return 0, true
	case unix.DT_SOCK:
		return os.ModeSocket, true
	}
	return 0, false
}

// shown names a walked path in a message.
func shown(rel string) string {
	if rel == "" {
		return "the top directory"
	}
	return rel
}

// Protection is what a writable directory's walk found and how it may be
// bound: the protected paths are the authority for what stays read-only
// in it, so when they cannot all be found (the walk was cut short by a
// bound) the directory is not bound writable at all — unknown nested
// repositories would otherwise get writable config and hooks — unless its
// `partial DIR` grant says to take the walk as it is.
type Protection struct {
	Found
	// ReadOnly: the walk was cut short and no grant lifts it: bind the
	// whole directory read-only.
	ReadOnly bool
	// Granted is the `partial` grant that kept a cut-short directory
	// writable, or "".
	Granted string
}

// Protect walks d for its protected paths (Walk, with d.Hide skipped) and
// judges whether it may be bound writable.
func Protect(d *Dir, g Grants) Protection {
	p := Protection{Found: Walk(d.File, g, d.Hide)}
	if p.Truncated == "" && len(PinDirs(p.Entries, d.Hide)) > MaxPins {
		// More directories to pin than a view pins: one left unpinned
		// could be moved, with its repository, below the walk's reach.
		p.Truncated = "more than " + strconv.Itoa(MaxPins) + " directories lead to repositories"
	}
	if p.Truncated == "" {
		return p
	}
	if grant := g.partialFor(d); grant != "" {
		p.Granted = "partial " + grant
		return p
	}
	p.ReadOnly = true
	return p
}

// partialFor is the `partial` grant naming d (judged by identity, as
// `allow` is), or "".
func (g Grants) partialFor(d *Dir) string {
	id, err := safefs.ID(d.File)
	if err != nil {
		return ""
	}
	for _, a := range g.Partial {
		if aid, err := safefs.StatID(a); err == nil && aid == id {
			return a
		}
	}
	return ""
}

// Warning is the sentence a run shows when d (seen at at in the sandbox,
// agent's definition) is bound read-only: why, and the grant that lifts
// it. "" when it is not.
func (p Protection) Warning(d *Dir, at, agent string) string {
	if !p.ReadOnly {
		return ""
	}
	return fmt.Sprintf("%s is read-only for this run: the walk for its protected paths (nested .git, hooks, "+
		"editor and shell files) stopped early (%s), so nested repositories past that bound could not be protected; "+
		"to bind it writable with only the paths found protected, add the line `partial %s` to agent/%s.d/protect",
		at, p.Truncated, d.Path, agent)
}

// MaxPins bounds the directories a view pins (each is a mount): a
// directory whose walk finds more is cut short (Protect).
const MaxPins = 256

// PinDirs are the directories (relative, parents first) on the way to
// each nested repository's protected path (a .git, a bare repository's
// hooks/ and config) and to each hidden tree (Dir.Hide). A view binds
// each over itself so that no sandbox can rename or remove it — a mount
// point cannot be — and so move a repository below the walk's reach or
// away from a protection mounted by path. Other protected names are not
// pinned: what loads them asks first (direnv's allow, an editor's or an
// agent's trust), and every pin makes renames across it fail (EXDEV).
func PinDirs(entries []Entry, hide []string) []string {
	set := map[string]bool{}
	add := func(rel string) {
		for d := path.Dir(rel); d != "." && d != "/" && !set[d]; d = path.Dir(d) {
			set[d] = true
		}
	}
	for _, e := range entries {
		if e.Repo && e.Kind != KindSymlink && strings.Contains(e.Rel, "/") {
			add(e.Rel)
		}
	}
	for _, rel := range hide {
		add(rel) // slash-separated: Linux
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b string) int { // parents first
		if c := strings.Count(a, "/") - strings.Count(b, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return out
}
