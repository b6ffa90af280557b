package stdtool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func init() {
	register(&Tool{
		Name:  "ls",
		Usage: "ls [PATH] [--depth N]",
		Min:   0, Max: 1,
		Flags: []Flag{{Name: "--depth", Value: true}},
		Meta: Meta{Description: `List a directory as a tree.
argv: ls [PATH] [--depth N]
PATH defaults to .; --depth is how many levels to show (default 2, at most 10). Directories end with /, symlinks show as name -> target (not followed).
What .gitignore ignores and .git are left out (counted in a note). At most 100 entries per directory ("… N more"); list a subdirectory to see the rest.
Example: ls internal --depth 1`},
		Run: runLs,
	})
}

const (
	lsDefaultDepth = 2
	lsMaxDepth     = 10
	// lsPerDir is how many entries of one directory ls shows.
	lsPerDir = 100
	// lsIgnoredNamed is how many ignored entries the note names.
	lsIgnoredNamed = 8
	// lsMaxVisit bounds the entries ls visits: past the budget it goes on
	// counting what it does not show, up to this many.
	lsMaxVisit = 100_000
)

func runLs(ctx context.Context, a *Args, out *Output) error {
	depth, err := a.Int("--depth", lsDefaultDepth, 1, lsMaxDepth)
	if err != nil {
		return Failf("ls: %v", err)
	}
	arg := a.Arg(0, ".")
	root, err := Abs(arg)
	if err != nil {
		return err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return Failf("ls: %s: %v", arg, errReason(err))
	}
	if !fi.IsDir() {
		out.Printf("%s (a file of %d bytes; read it with read)\n", arg, fi.Size())
		return nil
	}
	l := &lister{ctx: ctx, out: out, depth: depth}
	head := displayBase(root)
	if head == "" {
		head = root // the cwd: say where that is
	}
	out.WriteString(strings.TrimSuffix(head, "/") + "/\n")
	if err := l.dir(root, "", rootScope(root), "", 1); err != nil {
		return err
	}
	out.Hint = "list a subdirectory, or use a smaller --depth"
	if l.visited >= lsMaxVisit {
		out.Note("[stopped after %d entries]", lsMaxVisit)
	}
	if len(l.ignored) > 0 {
		named := l.ignored[:min(len(l.ignored), lsIgnoredNamed)]
		more := ""
		if len(l.ignored) > len(named) {
			more = fmt.Sprintf(", and %d more", len(l.ignored)-len(named))
		}
		out.Note("[not shown (.gitignore, .git): %s%s]", strings.Join(named, ", "), more)
	}
	return nil
}

// lister writes the tree.
type lister struct {
	ctx     context.Context
	out     *Output
	depth   int
	ignored []string // ignored entries, relative to the root
	visited int
	scratch [2][]string
}

// dir lists the directory abs (rel below the root, "" for the root) at
// level depth; name and scope are as listDir takes them.
func (l *lister) dir(abs, rel string, scope *ignoreScope, name string, depth int) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	if l.visited >= lsMaxVisit {
		return nil
	}
	indent := strings.Repeat("  ", depth)
	ls, err := listDir(abs, scope, name, &l.scratch)
	for _, n := range ls.ignored {
		l.ignored = append(l.ignored, filepath.Join(rel, n))
	}
	if err != nil {
		l.out.Printf("%s[cannot list: %s]\n", indent, describeErr(err))
	}
	l.visited += len(ls.entries)
	for i, e := range ls.entries {
		if i == lsPerDir {
			l.out.Printf("%s… %d more\n", indent, len(ls.entries)-i)
			break
		}
		ename := e.Name()
		eabs := filepath.Join(abs, ename)
		switch {
		case e.IsDir():
			l.out.Printf("%s%s/\n", indent, ename)
			if depth < l.depth {
				if err := l.dir(eabs, filepath.Join(rel, ename), ls.scope, ename, depth+1); err != nil {
					return err
				}
			}
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(eabs)
			if err != nil {
				target = "?"
			}
			l.out.Printf("%s%s -> %s\n", indent, ename, target)
		default:
			l.out.Printf("%s%s\n", indent, ename)
		}
	}
	return nil
}
