package workspace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
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
	var out Found
	start := time.Now()
	entries := 0
	type item struct {
		fd    int
		rel   string
		depth int
	}
	top, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		out.Truncated = "cannot read the top directory: " + err.Error()
		return out
	}
	queue := []item{{top, "", 0}}
	defer func() {
		for _, it := range queue {
			unix.Close(it.fd)
		}
	}()
	add := func(e Entry) bool {
		if len(out.Entries) >= MaxProtected {
			out.Truncated = "more than " + strconv.Itoa(MaxProtected) + " protected paths"
			return false
		}
		out.Entries = append(out.Entries, e)
		return true
	}
	for len(queue) > 0 && out.Truncated == "" {
		it := queue[0]
		queue = queue[1:]
		f := os.NewFile(uintptr(it.fd), it.rel)
		ents, err := f.ReadDir(-1)
		names := map[string]os.FileMode{}
		for _, e := range ents {
			names[e.Name()] = e.Type()
		}
		entries += len(ents)
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
			f.Close()
			continue
		}
		// A bare repository: HEAD, objects/ and refs/ side by side. Its
		// hooks/ and config are protected; nothing below is walked.
		if it.rel != "" && names["HEAD"].IsRegular() && names["objects"].IsDir() && names["refs"].IsDir() {
			out.Bare = append(out.Bare, it.rel)
			for _, n := range []string{"hooks", "config"} {
				k := kindOf(names, n)
				if k == KindAbsent && n == "config" {
					continue
				}
				if !add(Entry{Rel: path.Join(it.rel, n), Kind: k, Repo: true}) {
					break
				}
			}
			f.Close()
			continue
		}
		for _, e := range ents {
			n, rel := e.Name(), path.Join(it.rel, e.Name())
			if slices.Contains(skip, rel) {
				continue
			}
			if slices.Contains(Protected, n) && !g.Writable[n] {
				if !add(Entry{Rel: rel, Kind: kindOf(names, n), Repo: n == ".git"}) {
					break
				}
				continue // protected whole: not walked
			}
			if e.IsDir() && it.depth < MaxDepth {
				fd, err := unix.Openat(it.fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
				switch {
				case err == nil:
					queue = append(queue, item{fd, rel, it.depth + 1})
				case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
					// Gone or replaced since it was listed: not a directory to walk.
				default:
					out.Truncated = "cannot read " + shown(rel) + ": " + err.Error()
				}
			}
		}
		if it.rel == "" {
			for _, n := range Protected {
				if _, ok := names[n]; !ok && !g.Writable[n] && !g.Creatable[n] {
					add(Entry{Rel: n, Kind: KindAbsent, Repo: n == ".git"})
				}
			}
		}
		f.Close()
	}
	return out
}

// shown names a walked path in a message.
func shown(rel string) string {
	if rel == "" {
		return "the top directory"
	}
	return rel
}

func kindOf(names map[string]os.FileMode, n string) Kind {
	t, ok := names[n]
	switch {
	case !ok:
		return KindAbsent
	case t&os.ModeSymlink != 0:
		return KindSymlink
	case t.IsDir():
		return KindDir
	}
	return KindFile
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
