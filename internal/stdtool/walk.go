package stdtool

import (
	"bytes"
	"context"
	"fmt"
	"github.com/cortexfs/ctx/internal/safefs"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"
)

// The tree walk grep, glob and ls share. It keeps git's view of a tree:
//   - .gitignore files are honoured, each one's patterns scoped to its
//     directory, nested ones overriding their parents (negation `!` too);
//   - when the walked directory is inside a git repository (a .git above
//     it), .git/info/exclude and the .gitignore files from the repository
//     root down to the walked directory apply as well;
//   - .git (a directory, or the file of a worktree) is always skipped;
//   - symlinks are listed, never followed: a symlinked directory is not
//     descended into, so a link out of the tree shows nothing of its target.
//
// A path given explicitly (the walk's root) is walked even when .gitignore
// ignores it, as rg does: an anchored pattern above the root that matches
// the root itself is dropped for that walk.
//
// Patterns are parsed and matched by go-git's gitignore package. Its
// matcher also matches a name-only pattern against every parent directory
// of a path; the walk has already judged each parent on its way down, so a
// name-only pattern is matched against the entry's own name only (that is
// git's rule: "foo" and "foo/" match a name at any depth, and `*` + `!*/`
// + `!*.go` keeps only Go files).

// gitDirName is the repository directory the walk always skips.
const gitDirName = ".git"

// maxIgnoreFile bounds a .gitignore read.
const maxIgnoreFile = 1 << 20

// ignoreRule is one line of a .gitignore (or of .git/info/exclude).
type ignoreRule struct {
	pat gitignore.Pattern
	// depth is the number of path components of the directory the rule's
	// file is in, relative to the ignore base: the rule applies below it.
	depth int
	// anchored rules hold a '/' before their end ("/build", "doc/*.html",
	// "**/gen"): matched against the path below their directory. The
	// others match the entry's name.
	anchored bool
}

// ignoreScope is the ignore rules in force in one directory: those of the
// .gitignore files of its parents, then its own (last match wins).
type ignoreScope struct {
	comps []string // the directory's path components below the ignore base
	rules []ignoreRule
}

// ignored reports whether the entry name of the scope's directory is
// ignored: a .git entry always, else by the last rule that matches it.
// scratch is reused between calls (one per goroutine).
func (s *ignoreScope) ignored(name string, isDir bool, scratch *[2][]string) bool {
	if name == gitDirName {
		return true
	}
	if len(s.rules) == 0 {
		return false
	}
	full := append(append(scratch[0][:0], s.comps...), name)
	scratch[0] = full
	for i := len(s.rules) - 1; i >= 0; i-- {
		r := &s.rules[i]
		path := full
		if !r.anchored {
			path = append(append(scratch[1][:0], s.comps[:r.depth]...), name)
			scratch[1] = path
		}
		switch r.pat.Match(path, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
		}
	}
	return false
}

// child is the scope of the subdirectory name of s's directory; ignoreFile,
// when not "", is that subdirectory's .gitignore to read.
func (s *ignoreScope) child(name, ignoreFile string) *ignoreScope {
	c := &ignoreScope{comps: append(s.comps[:len(s.comps):len(s.comps)], name), rules: s.rules}
	if ignoreFile != "" {
		if more := readIgnoreFile(ignoreFile, c.comps); len(more) > 0 {
			c.rules = append(s.rules[:len(s.rules):len(s.rules)], more...)
		}
	}
	return c
}

// readIgnoreFile parses the ignore file at path, whose rules apply below
// the directory domain (components below the ignore base). A file that
// cannot be read (absent, a symlink — git does not follow a symlinked
// .gitignore either — or unreadable) holds no rules.
func readIgnoreFile(path string, domain []string) []ignoreRule {
	data, err := safefs.ReadRegular(path, maxIgnoreFile) // no symlink followed, no FIFO blocking
	if err != nil {
		return nil
	}
	var rules []ignoreRule
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		body := strings.TrimPrefix(line, "!")
		body = strings.TrimRight(body, " ")
		body = strings.TrimSuffix(body, "/")
		if body == "" {
			continue
		}
		rules = append(rules, ignoreRule{
			pat:      gitignore.ParsePattern(line, domain),
			depth:    len(domain),
			anchored: strings.Contains(body, "/"),
		})
	}
	return rules
}

// readFD reads fd to its end (or limit bytes) into buf[:0], growing it.
func readFD(fd int, buf []byte, limit int, path string) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(cap(buf), limit)
		n, err := unix.Read(fd, buf[len(buf):end])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

// rootScope is the ignore scope of the directory root (absolute, clean):
// the rules of the repository it is in, if any, from the repository root
// down to root's own .gitignore; without a repository, root's .gitignore.
func rootScope(root string) *ignoreScope {
	base := root
	inRepo := false
	for d := root; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, gitDirName)); err == nil {
			base, inRepo = d, true
			break
		}
		if d == "/" || d == "." {
			break
		}
	}
	s := &ignoreScope{}
	if inRepo {
		s.rules = readIgnoreFile(filepath.Join(base, gitDirName, "info", "exclude"), nil)
	}
	s.rules = append(s.rules, readIgnoreFile(filepath.Join(base, ".gitignore"), nil)...)
	if rel, err := filepath.Rel(base, root); err == nil && rel != "." {
		comps := strings.Split(filepath.ToSlash(rel), "/")
		for i := range comps {
			s.rules = append(s.rules, readIgnoreFile(filepath.Join(base, filepath.Join(comps[:i+1]...), ".gitignore"), comps[:i+1])...)
		}
		s.comps = comps
		// The root was named explicitly: an anchored rule that ignores it
		// (or a directory between the repository and it) is not applied.
		kept := s.rules[:0:0]
		for _, r := range s.rules {
			if !r.anchored || !matchesAncestor(r, comps) {
				kept = append(kept, r)
			}
		}
		s.rules = kept
	}
	return s
}

// matchesAncestor reports whether rule r excludes comps (the walk root) or
// one of its parents below r's directory.
func matchesAncestor(r ignoreRule, comps []string) bool {
	for k := r.depth + 1; k <= len(comps); k++ {
		if r.pat.Match(comps[:k], true) == gitignore.Exclude {
			return true
		}
	}
	return false
}

// dirListing is one directory's entries as the walk sees them.
type dirListing struct {
	entries []fs.DirEntry // not ignored, in name order
	ignored []string      // names ignored (.gitignore, .git)
	scope   *ignoreScope  // the directory's own scope
}

// listDir reads the directory abs and drops what it ignores. A child
// directory's scope is derived from its parent's and its own .gitignore
// (seen in the listing): pass the parent's scope and the child's name; for
// the walk's root pass its rootScope and "".
func listDir(abs string, scope *ignoreScope, name string, scratch *[2][]string) (dirListing, error) {
	ents, err := os.ReadDir(abs)
	if name != "" {
		ignoreFile := ""
		for _, e := range ents {
			if e.Name() == ".gitignore" {
				ignoreFile = filepath.Join(abs, ".gitignore")
				break
			}
		}
		scope = scope.child(name, ignoreFile)
	}
	l := dirListing{scope: scope}
	if err != nil && len(ents) == 0 {
		return l, err
	}
	kept := ents[:0]
	for _, e := range ents {
		if isPlaceholder(e) {
			continue // absent for every purpose: the sandbox keeps the name from being created
		}
		if scope.ignored(e.Name(), e.IsDir(), scratch) {
			l.ignored = append(l.ignored, e.Name())
			continue
		}
		kept = append(kept, e)
	}
	l.entries = kept
	return l, err
}

// isPlaceholder reports whether e is a placeholder of the sandbox: an
// absent protected name (.envrc, .vscode, .bashrc …) at the workspace's
// top, held by a read-only bind that keeps it from being created (README
// "What the workspace may change"): a sticky read-only directory or small
// file (an absent source), or an older daemon's empty mode-000 entry. Only
// dot names are looked at: every protected name is one, and it keeps the
// lstat off other entries.
func isPlaceholder(e fs.DirEntry) bool {
	if !strings.HasPrefix(e.Name(), ".") || !(e.IsDir() || e.Type().IsRegular()) {
		return false
	}
	fi, err := e.Info()
	if err != nil {
		return false
	}
	m := fi.Mode()
	if m&fs.ModeSticky != 0 && m.Perm()&0o222 == 0 {
		return fi.IsDir() || fi.Size() <= 64 // an absent .mcp.json declares no server
	}
	return m.Perm() == 0 && (fi.IsDir() || fi.Size() == 0)
}

// walkEntry is one entry a walk visits.
type walkEntry struct {
	Rel  string      // slash-separated path relative to the walk's root
	Abs  string      // absolute path
	Type fs.FileMode // the type bits from the directory listing (fs.ModeDir, fs.ModeSymlink, …)
}

// walkStats is what a walk left out.
type walkStats struct {
	Ignored    int      // entries ignored (.gitignore, .git)
	Unreadable int      // directories that could not be listed
	Errors     []string // the first few of those, with the reason
}

// maxWalkErrors is how many unreadable directories a walk names.
const maxWalkErrors = 5

func (st *walkStats) addError(err error) {
	st.Unreadable++
	if len(st.Errors) < maxWalkErrors {
		st.Errors = append(st.Errors, err.Error())
	}
}

// walkTree visits every entry under root (an absolute directory) that is
// not ignored, depth first, in name order, calling fn for each. fn returns
// fs.SkipDir to not descend into a directory, fs.SkipAll to stop. The walk
// stops with ctx's error when ctx is done.
func walkTree(ctx context.Context, root string, fn func(walkEntry) error) (walkStats, error) {
	var st walkStats
	var scratch [2][]string
	var walk func(abs, rel, name string, scope *ignoreScope) error
	walk = func(abs, rel, name string, scope *ignoreScope) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := listDir(abs, scope, name, &scratch)
		st.Ignored += len(l.ignored)
		if err != nil {
			st.addError(err)
		}
		for _, e := range l.entries {
			name := e.Name()
			ent := walkEntry{Rel: name, Abs: filepath.Join(abs, name), Type: e.Type()}
			if rel != "" {
				ent.Rel = rel + "/" + name
			}
			switch err := fn(ent); {
			case err == fs.SkipDir:
				continue
			case err != nil:
				return err
			}
			if e.IsDir() {
				if err := walk(ent.Abs, ent.Rel, name, l.scope); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(root, "", "", rootScope(root))
	if err == fs.SkipAll {
		err = nil
	}
	return st, err
}

// displayBase is how paths under the directory abs are shown: relative to
// the cwd when abs is under it ("" for the cwd itself), else absolute.
func displayBase(abs string) string {
	cwd, err := os.Getwd()
	if err == nil && Inside(abs, cwd) {
		rel, err := filepath.Rel(cwd, abs)
		if err == nil {
			if rel == "." {
				return ""
			}
			return rel
		}
	}
	return abs
}

// joinDisplay joins a display base and a path relative to it.
func joinDisplay(base, rel string) string {
	switch {
	case base == "":
		return rel
	case rel == "":
		return base
	case strings.HasSuffix(base, "/"):
		return base + rel
	}
	return base + "/" + rel
}

// describeWalkErrors is the note for directories a walk could not list.
func describeWalkErrors(st walkStats) string {
	if st.Unreadable == 0 {
		return ""
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "[%d director", st.Unreadable)
	if st.Unreadable == 1 {
		b.WriteString("y")
	} else {
		b.WriteString("ies")
	}
	b.WriteString(" could not be read: ")
	b.WriteString(strings.Join(st.Errors, "; "))
	if st.Unreadable > len(st.Errors) {
		b.WriteString("; …")
	}
	b.WriteString("]")
	return b.String()
}
