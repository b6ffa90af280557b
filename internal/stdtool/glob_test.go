package stdtool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGlob: ** patterns, newest first, .gitignore, symlinks, and the
// pattern's leading directories.
// The standard toolset: glob PATTERN [PATH].
func TestGlob(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	outside := t.TempDir()
	searchTree(t, outside, map[string]string{"o.go": ""})
	searchTree(t, dir, map[string]string{
		".git/x.go":        "",
		".gitignore":       "gen/\n",
		"a.go":             "",
		"b.go":             "",
		"sub/c.go":         "",
		"sub/deep/d.go":    "",
		"sub/deep/e.txt":   "",
		"gen/g.go":         "",
		"linkdir":          "-> sub",
		"out":              "-> " + outside,
		"link.go":          "-> a.go",
		"caf\xe9/f.go":     "",
		"brace/{x}.go":     "",
		"other/sub/h.go":   "",
		"sub/deep/old.go":  "",
		"sub/deep/new2.go": "",
	})
	// mtimes: old.go oldest, new2.go newest; the rest share one time
	base := time.Now().Add(-time.Hour)
	tv := []unix.Timeval{unix.NsecToTimeval(base.UnixNano()), unix.NsecToTimeval(base.UnixNano())}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
		return unix.Lutimes(p, tv) // a symlink's own time
	})
	os.Chtimes(filepath.Join(dir, "sub/deep/old.go"), base.Add(-time.Hour), base.Add(-time.Hour))
	os.Chtimes(filepath.Join(dir, "sub/deep/new2.go"), base.Add(time.Minute), base.Add(time.Minute))

	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"**, newest first then by path", []string{"**/*.go"},
			"sub/deep/new2.go\na.go\nb.go\nbrace/{x}.go\ncaf\uFFFD/f.go\nlink.go\nother/sub/h.go\nsub/c.go\nsub/deep/d.go\nsub/deep/old.go\n", 0},
		{"one directory", []string{"*.go"}, "a.go\nb.go\nlink.go\n", 0},
		{"leading directories", []string{"sub/**/*.go"}, "sub/deep/new2.go\nsub/c.go\nsub/deep/d.go\nsub/deep/old.go\n", 0},
		{"wildcard directory", []string{"*/sub/*.go"}, "other/sub/h.go\n", 0},
		{"PATH", []string{"*.go", "sub/deep"}, "sub/deep/new2.go\nsub/deep/d.go\nsub/deep/old.go\n", 0},
		{"PATH through a symlink", []string{"*.go", "linkdir"}, "linkdir/c.go\n", 0},
		{"alternatives", []string{"**/{c,d}.{go,txt}"}, "sub/c.go\nsub/deep/d.go\n", 0},
		{"absolute pattern", []string{filepath.Join(dir, "sub/deep/*.txt")}, "sub/deep/e.txt\n", 0},
		{"an ignored dir, named", []string{"gen/*.go"}, "gen/g.go\n", 0},
		{"no match", []string{"*.rs"}, "no files match \"*.rs\" in . (2 entries ignored by .gitignore or .git)\n" +
			"[the pattern matches paths relative to .: use **/*.rs to look in subdirectories]\n", 0},
		{"no such dir", []string{"nope/*.go"}, "no files match \"nope/*.go\" in .: nope does not exist\n", 0},
		{"bad pattern", []string{"[a"}, "glob: \"[a\" is not a valid pattern (unclosed [ or {, or a trailing \\)\n", 1},
		{"PATH not a dir", []string{"*", "a.go"}, "glob: a.go is not a directory\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, code := searchRun(t, "glob", c.args...)
			if got != c.want || code != c.code {
				t.Errorf("glob %q: exit %d\n%s\nwant exit %d\n%s", c.args, code, got, c.code, c.want)
			}
		})
	}
}

// TestGlobCap: at most globMax paths, the newest, with a note.
// The standard toolset: capped, with a note.
func TestGlobCap(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	now := time.Now()
	for i := range globMax + 20 {
		p := filepath.Join(dir, fmt.Sprintf("%04d.t", i))
		os.WriteFile(p, nil, 0o644)
		mt := now.Add(time.Duration(i) * time.Second)
		os.Chtimes(p, mt, mt)
	}
	got, code := searchRun(t, "glob", "*.t")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	// 1000 names of 7 bytes fit the budget
	if code != 0 || len(lines) != globMax+1 || lines[0] != "1019.t" || lines[globMax-1] != "0020.t" ||
		lines[globMax] != "[1020 files match, the 1000 newest shown; narrow the search with a PATH or a longer pattern]" {
		t.Errorf("exit %d, %d lines: first %q, last %q", code, len(lines), lines[0], lines[len(lines)-1])
	}
}
