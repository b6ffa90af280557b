package stdtool

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// searchRun runs the tool name through Main, as ctxtools does, and returns
// its stdout and exit status (stderr must stay empty).
func searchRun(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	return searchRunCtx(t, context.Background(), name, args...)
}

func searchRunCtx(t *testing.T, ctx context.Context, name string, args ...string) (string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, name, args, &stdout, &stderr)
	if stderr.Len() > 0 {
		t.Errorf("%s %q wrote to stderr: %s", name, args, stderr.String())
	}
	return stdout.String(), code
}

// searchTree makes the files (path → content) under dir; a path ending in
// "/" is a directory, content "-> target" makes a symlink.
func searchTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// walked is every path walkTree visits under root.
func walked(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	if _, err := walkTree(context.Background(), root, func(e walkEntry) error {
		p := e.Rel
		if e.Type.IsDir() {
			p += "/"
		}
		got = append(got, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWalkIgnore: .gitignore at the root and nested, negation, anchored
// patterns, directory-only patterns, .git/info/exclude, .git skipped, and
// git's rule that a whitelist (`*`, `!*/`, `!*.go`) keeps only what it
// names.
// The standard toolset: grep, glob and ls honour .gitignore and skip .git.
func TestWalkIgnore(t *testing.T) {
	dir := t.TempDir()
	searchTree(t, dir, map[string]string{
		".git/HEAD":         "ref: refs/heads/main\n",
		".git/info/exclude": "# local\nsecret.txt\n",
		".gitignore":        "*.log\n!keep.log\nbuild/\n/rootonly.txt\n# comment\n\ndocs/*.html\n",
		"a.go":              "package a\n",
		"x.log":             "",
		"keep.log":          "",
		"secret.txt":        "",
		"rootonly.txt":      "",
		"build/out.bin":     "",
		"sub/rootonly.txt":  "", // anchored at the root: kept here
		"sub/build":         "", // build/ is for directories: a file is kept
		"sub/y.log":         "",
		"sub/.gitignore":    "*.tmp\n!important.tmp\n",
		"sub/a.tmp":         "",
		"sub/important.tmp": "",
		"sub/deep/b.tmp":    "",
		"sub/deep/build/z":  "",
		"other/c.tmp":       "", // sub's .gitignore does not reach here
		"docs/index.html":   "",
		"docs/api/x.html":   "", // docs/*.html: * does not cross a /
		"wl/.gitignore":     "*\n!*/\n!*.go\n",
		"wl/keep.go":        "",
		"wl/drop.txt":       "",
		"wl/in/keep2.go":    "",
		"wl/in/drop2.txt":   "",
		"nested/.git":       "gitdir: elsewhere\n", // a worktree's .git file
		"nested/n.go":       "",
	})
	got := walked(t, dir)
	want := []string{
		".gitignore", "a.go", "docs/", "docs/api/", "docs/api/x.html", "keep.log",
		"nested/", "nested/n.go", "other/", "other/c.tmp",
		"sub/", "sub/.gitignore", "sub/build", "sub/deep/", "sub/important.tmp", "sub/rootonly.txt",
		"wl/", "wl/in/", "wl/in/keep2.go", "wl/keep.go",
	}
	if !slices.Equal(got, want) {
		t.Errorf("walk:\n got %q\nwant %q", got, want)
	}
}

// TestWalkExplicitRoot: a directory named explicitly is walked even when a
// parent's .gitignore ignores it, and the parents' other rules still apply
// (rg's behaviour); below a repository root its .gitignore applies.
func TestWalkExplicitRoot(t *testing.T) {
	dir := t.TempDir()
	searchTree(t, dir, map[string]string{
		".git/HEAD":            "",
		".gitignore":           "/build\n*.log\nvendor/\n",
		"build/a.go":           "",
		"build/a.log":          "",
		"src/vendor/pkg/v.go":  "",
		"src/vendor/pkg/v.log": "",
		"src/main.go":          "",
		"src/main.log":         "",
	})
	if got, want := walked(t, filepath.Join(dir, "build")), []string{"a.go"}; !slices.Equal(got, want) {
		t.Errorf("walk build: got %q, want %q", got, want)
	}
	if got, want := walked(t, filepath.Join(dir, "src")), []string{"main.go"}; !slices.Equal(got, want) {
		t.Errorf("walk src: got %q, want %q", got, want)
	}
	if got, want := walked(t, filepath.Join(dir, "src/vendor")), []string{"pkg/", "pkg/v.go"}; !slices.Equal(got, want) {
		t.Errorf("walk src/vendor: got %q, want %q", got, want)
	}
}

// TestWalkSymlinksAndNames: symlinks are listed, not followed (a link to a
// directory of the tree and one out of it), and a name that is not UTF-8
// is walked like any other.
func TestWalkSymlinksAndNames(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	searchTree(t, outside, map[string]string{"secret.go": "package secret\n"})
	searchTree(t, dir, map[string]string{
		"real/r.go":    "",
		"loop":         "-> .",
		"linkdir":      "-> real",
		"out":          "-> " + outside,
		"out.go":       "-> " + filepath.Join(outside, "secret.go"),
		"dangling":     "-> nowhere",
		"caf\xe9.go":   "",
		"sp ace/\t.go": "",
	})
	got := walked(t, dir)
	want := []string{"caf\xe9.go", "dangling", "linkdir", "loop", "out", "out.go", "real/", "real/r.go", "sp ace/", "sp ace/\t.go"}
	if !slices.Equal(got, want) {
		t.Errorf("walk:\n got %q\nwant %q", got, want)
	}
}

// TestWalkUnreadableDir: a directory the walk cannot list is counted and
// named; the rest of the tree is walked. (Root reads every directory, so
// the case is skipped when the tests run as root, as CI does.)
func TestWalkUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a mode 000 directory")
	}
	dir := t.TempDir()
	searchTree(t, dir, map[string]string{"locked/x.go": "", "open/y.go": ""})
	os.Chmod(filepath.Join(dir, "locked"), 0)
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
	var files []string
	st, err := walkTree(context.Background(), dir, func(e walkEntry) error {
		files = append(files, e.Rel)
		return nil
	})
	if err != nil || st.Unreadable != 1 || !strings.Contains(describeWalkErrors(st), "permission denied") {
		t.Errorf("stats %+v err %v note %q", st, err, describeWalkErrors(st))
	}
	if !slices.Contains(files, "open/y.go") {
		t.Errorf("walked %q", files)
	}
}

// TestWalkStops: fs.SkipDir skips a directory, fs.SkipAll and a cancelled
// context stop the walk.
func TestWalkStops(t *testing.T) {
	dir := t.TempDir()
	searchTree(t, dir, map[string]string{"a/1": "", "b/2": "", "c/3": ""})
	var got []string
	walkTree(context.Background(), dir, func(e walkEntry) error {
		got = append(got, e.Rel)
		switch e.Rel {
		case "a":
			return fs.SkipDir
		case "b/2":
			return fs.SkipAll
		}
		return nil
	})
	if want := []string{"a", "b", "b/2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := walkTree(ctx, dir, func(walkEntry) error { return nil }); err != context.Canceled {
		t.Errorf("cancelled walk: %v", err)
	}
}

// TestWalkSkipsPlaceholders: the sandbox's placeholders of absent
// protected names (empty, mode 000) are not entries for grep, glob and ls,
// and not "could not be read" noise; a real mode-000 file with content is
// still reported. (protected paths).
func TestWalkSkipsPlaceholders(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile("main.go", []byte("package main\n"), 0o644)
	os.WriteFile(".envrc", nil, 0o000)
	os.Mkdir(".vscode", 0o000)
	t.Cleanup(func() { os.Chmod(".vscode", 0o755) })
	os.WriteFile(".secret", []byte("x"), 0o000)
	// Today's absent sources: an empty sticky read-only file and directory.
	os.WriteFile(".mcp.json", []byte(`{"mcpServers":{}}`+"\n"), 0o444)
	os.Chmod(".mcp.json", 0o444|os.ModeSticky)
	os.Mkdir(".claude", 0o555|os.ModeSticky)
	os.Chmod(".claude", 0o555|os.ModeSticky)
	os.WriteFile(".notes", nil, 0o444) // read-only and empty, not sticky: a real file
	got, code := searchRun(t, "ls")
	if code != 0 || strings.Contains(got, ".envrc") || strings.Contains(got, ".vscode") || !strings.Contains(got, ".secret") || !strings.Contains(got, "main.go") ||
		strings.Contains(got, ".mcp.json") || strings.Contains(got, ".claude") || !strings.Contains(got, ".notes") {
		t.Errorf("ls: exit %d\n%s", code, got)
	}
	got, _ = searchRun(t, "grep", "package")
	if strings.Contains(got, ".envrc") || strings.Contains(got, ".vscode") {
		t.Errorf("grep: %s", got)
	}
}
