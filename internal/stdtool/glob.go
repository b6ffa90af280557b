package stdtool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

func init() {
	register(&Tool{
		Name:  "glob",
		Usage: "glob PATTERN [PATH]",
		Min:   1, Max: 2,
		Meta: Meta{Description: `Find files by name pattern, newest (last modified) first.
argv: glob PATTERN [PATH]
PATTERN matches paths relative to PATH (default .): * and ? stay within a directory, ** crosses directories, {a,b} and [abc] as in shells. So *.go finds Go files in PATH itself, **/*.go in every subdirectory.
Files ignored by .gitignore and .git are skipped; symlinks are listed, not followed. Directories are not listed (use ls).
At most 1000 paths; narrow a large result with a PATH or a longer pattern.
Example: glob 'internal/**/*_test.go'`},
		Run: runGlob,
	})
}

// globMax is how many paths glob lists.
const globMax = 1000

type globMatch struct {
	disp  string
	mtime time.Time
}

func runGlob(ctx context.Context, a *Args, out *Output) error {
	pattern := filepath.ToSlash(a.Arg(0, ""))
	if pattern == "" {
		return Failf("glob: empty pattern")
	}
	if !doublestar.ValidatePattern(pattern) {
		return Failf("glob: %q is not a valid pattern (unclosed [ or {, or a trailing \\)", pattern)
	}
	arg := a.Arg(1, ".")
	// The pattern's leading directories without a wildcard are where the
	// walk starts: glob 'internal/*/x.go' walks internal only.
	base, rest := doublestar.SplitPattern(pattern)
	dir := base
	if !filepath.IsAbs(base) {
		dir = filepath.Join(arg, base)
	}
	root, err := Abs(dir)
	if err != nil {
		return err
	}
	fi, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && base != "." {
			out.Printf("no files match %q in %s: %s does not exist\n", pattern, arg, dir)
			return nil
		}
		return Failf("glob: %s: %v", dir, errReason(err))
	}
	if !fi.IsDir() {
		return Failf("glob: %s is not a directory", dir)
	}
	if rest == "" {
		rest = "*"
	}
	segs := strings.Split(rest, "/")
	prune := !strings.Contains(rest, "{") // an alternative may hold a '/'
	disp := displayBase(root)
	var found []globMatch
	st, err := walkTree(ctx, root, func(e walkEntry) error {
		if e.Type.IsDir() {
			if prune && !globCouldMatch(segs, e.Rel) {
				return fs.SkipDir
			}
			return nil
		}
		if ok, _ := doublestar.Match(rest, e.Rel); !ok {
			return nil
		}
		m := globMatch{disp: joinDisplay(disp, e.Rel)}
		if info, err := os.Lstat(e.Abs); err == nil {
			m.mtime = info.ModTime()
		}
		found = append(found, m)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(found, func(i, j int) bool {
		if !found[i].mtime.Equal(found[j].mtime) {
			return found[i].mtime.After(found[j].mtime)
		}
		return found[i].disp < found[j].disp
	})
	if len(found) == 0 {
		msg := fmt.Sprintf("no files match %q in %s", pattern, arg)
		if st.Ignored > 0 {
			msg += fmt.Sprintf(" (%s ignored by .gitignore or .git)", countNoun(st.Ignored, "entry", "entries"))
		}
		out.WriteString(msg + "\n")
		if !strings.Contains(pattern, "/") && !strings.HasPrefix(pattern, "**") {
			out.Note("[the pattern matches paths relative to %s: use **/%s to look in subdirectories]", arg, pattern)
		}
	}
	for i, m := range found {
		if i == globMax {
			break
		}
		out.WriteString(m.disp + "\n")
	}
	if len(found) > globMax || out.Full() {
		shown := min(len(found), globMax) - int(out.lines)
		out.Note("[%d files match, the %d newest shown; narrow the search with a PATH or a longer pattern]", len(found), shown)
	}
	if n := describeWalkErrors(st); n != "" {
		out.Note("%s", n)
	}
	return nil
}

// globCouldMatch reports whether a path below the directory rel could match
// the pattern made of segs: false when a leading segment before any **
// fails to match rel's segment, or the pattern has no segment left for a
// path below rel.
func globCouldMatch(segs []string, rel string) bool {
	dirs := strings.Split(rel, "/")
	for i, d := range dirs {
		if i >= len(segs) {
			return false
		}
		if strings.Contains(segs[i], "**") {
			return true
		}
		if ok, _ := doublestar.Match(segs[i], d); !ok {
			return false
		}
	}
	return len(segs) > len(dirs)
}
