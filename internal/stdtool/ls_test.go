package stdtool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLs: the tree, its depth, what it leaves out and how it shows links.
// The standard toolset: ls [PATH] [--depth N].
func TestLs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	outside := t.TempDir()
	searchTree(t, dir, map[string]string{
		".git/HEAD":          "",
		".gitignore":         "node_modules/\n*.log\n",
		"node_modules/x/y":   "",
		"app.log":            "",
		"README.md":          "hello",
		"src/main.go":        "",
		"src/lib/util.go":    "",
		"src/lib/deep/z.go":  "",
		"src/debug.log":      "",
		"docs/":              "",
		"link-in":            "-> src",
		"link-out":           "-> " + outside,
		"caf\xe9.txt":        "",
		"src/lib/.gitignore": "deep/\n",
	})
	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"default depth 2", nil, dir + "/\n" +
			"  .gitignore\n  README.md\n  caf\xe9.txt\n  docs/\n  link-in -> src\n  link-out -> " + outside + "\n  src/\n    lib/\n    main.go\n" +
			"[not shown (.gitignore, .git): .git, app.log, node_modules, src/debug.log]\n", 0},
		{"depth 3 and nested .gitignore", []string{"src", "--depth", "3"}, "src/\n  lib/\n    .gitignore\n    util.go\n  main.go\n" +
			"[not shown (.gitignore, .git): debug.log, lib/deep]\n", 0},
		{"depth 1", []string{"--depth=1", "src/lib"}, "src/lib/\n  .gitignore\n  util.go\n[not shown (.gitignore, .git): deep]\n", 0},
		{"an ignored dir, named", []string{"node_modules"}, "node_modules/\n  x/\n    y\n", 0},
		{"through a symlink", []string{"link-in", "--depth", "1"}, "link-in/\n  lib/\n  main.go\n[not shown (.gitignore, .git): debug.log]\n", 0},
		{"a file", []string{"README.md"}, "README.md (a file of 5 bytes; read it with read)\n", 0},
		{"absent", []string{"nope"}, "ls: nope: no such file or directory\n", 1},
		{"bad depth", []string{"--depth", "11"}, "ls: flag --depth: \"11\" is not a whole number from 1 to 10\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, code := searchRun(t, "ls", c.args...)
			if got != strings.ReplaceAll(c.want, "\xe9", "\uFFFD") || code != c.code {
				t.Errorf("ls %q: exit %d\n%s\nwant exit %d\n%s", c.args, code, got, c.code, c.want)
			}
		})
	}
}

// TestLsCaps: at most lsPerDir entries of a directory, then "… N more";
// the whole tree within the budget, with a note saying what was cut.
// The standard toolset: entries per directory capped; total bounded.
func TestLsCaps(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for i := range 150 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), nil, 0o644)
	}
	got, _ := searchRun(t, "ls", ".")
	if !strings.HasSuffix(got, "  f099\n  … 50 more\n") || strings.Count(got, "\n") != 102 {
		t.Errorf("per-dir cap: %q", got[max(0, len(got)-60):])
	}
	for i := range 40 {
		for j := range 40 {
			p := filepath.Join(dir, "tree", fmt.Sprintf("d%02d", i), fmt.Sprintf("some-longer-file-name-%02d.go", j))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, nil, 0o644)
		}
	}
	got, code := searchRun(t, "ls", "tree")
	if code != 0 || len(got) > Budget+200 ||
		!strings.HasSuffix(got, " not shown; list a subdirectory, or use a smaller --depth]\n") {
		t.Errorf("budget: exit %d, %d bytes, ends %q", code, len(got), got[max(0, len(got)-120):])
	}
}
