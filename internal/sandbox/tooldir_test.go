package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cortexfs/ctx/internal/policy"
)

// TestListToolsSeesEveryChange: a tool directory's listing is kept
// between views (tooldir.go), and every change a view must show is in the
// very next listing — a tool made or removed, a policy made in an
// existing .d/, a policy rewritten, a policy written through another hard
// link, a .d/ renamed over, a tool chmod'ed (the tree's quick key), the
// directory itself replaced — each compared with DecideTool's fresh
// reads; a .d/ that is a symlink makes the directory be read for every
// view. spec: V3
func TestListToolsSeesEveryChange(t *testing.T) {
	v, dir := toolView(t)
	outside := t.TempDir()
	tool := func(name string) { os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755) }
	write := func(path, text string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(text)
		f.Close()
	}
	for _, n := range []string{"alpha", "beta", "gamma", "zeta"} {
		tool(n)
		os.MkdirAll(filepath.Join(dir, n+".d"), 0o755)
		os.WriteFile(filepath.Join(dir, n+".d", "tool.json"), []byte(`{"description":"x"}`), 0o644)
	}
	kept := func() bool {
		toolDirs.mu.Lock()
		d := toolDirs.m[dir]
		toolDirs.mu.Unlock()
		if d == nil {
			return false
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.fd >= 0
	}
	check := func(step string) (names []string, qk string) {
		t.Helper()
		ap, aerr := policy.Load(policy.AgentPolicy, filepath.Join(v.Def.Control, "policy"))
		names, qk, qerr, err := listTools(dir, "", ap, aerr)
		if err != nil || qerr != nil {
			t.Fatal(step, err, qerr)
		}
		if want := decided(v, dir); !slices.Equal(names, want) {
			t.Errorf("%s: listed %v, DecideTool allows %v", step, names, want)
		}
		return names, qk
	}
	check("first")
	_, qk := check("again")
	if !kept() {
		t.Fatal("the listing of a watched directory is not kept: the test would not test the cache")
	}
	tool("delta")
	check("a tool made")
	write(filepath.Join(dir, "beta.d", "policy"), "deny label *\n")
	check("a policy made in an existing .d/")
	write(filepath.Join(dir, "beta.d", "policy"), "allow label *\n")
	check("a policy rewritten")
	other := filepath.Join(outside, "policy-link")
	if err := os.Link(filepath.Join(dir, "beta.d", "policy"), other); err != nil {
		t.Fatal(err)
	}
	check("a hard link made")
	write(other, "deny label *\n")
	if names, _ := check("a policy written through another hard link"); slices.Contains(names, "beta") {
		t.Error("beta listed after its policy denied it")
	}
	nd := filepath.Join(outside, "new.d")
	os.MkdirAll(nd, 0o755)
	write(filepath.Join(nd, "policy"), "deny label *\n")
	os.Rename(filepath.Join(dir, "gamma.d"), filepath.Join(outside, "old-gamma.d"))
	if err := os.Rename(nd, filepath.Join(dir, "gamma.d")); err != nil {
		t.Fatal(err)
	}
	check("a .d/ renamed over")
	os.Chmod(filepath.Join(dir, "zeta"), 0o700)
	if _, qk2 := check("a tool chmod'ed"); qk2 == qk {
		t.Error("the quick key did not change when a tool's mode did")
	}
	os.Remove(filepath.Join(dir, "alpha"))
	check("a tool removed")
	if !kept() {
		t.Error("the listing is not kept after the changes")
	}
	os.Rename(dir, dir+".old")
	os.MkdirAll(dir, 0o755)
	tool("omega")
	if names, _ := check("the directory replaced"); !slices.Equal(names, []string{"omega"}) {
		t.Errorf("the replaced directory lists %v", names)
	}
	// A .d/ that is a symlink is read through: not watched, read every time.
	os.MkdirAll(filepath.Join(outside, "target.d"), 0o755)
	tool("sym")
	os.Symlink(filepath.Join(outside, "target.d"), filepath.Join(dir, "sym.d"))
	check("a symlinked .d/")
	if kept() {
		t.Error("a directory with a symlinked .d/ is kept")
	}
	write(filepath.Join(outside, "target.d", "policy"), "deny label *\n")
	if names, _ := check("a policy behind a symlinked .d/"); slices.Contains(names, "sym") {
		t.Error("sym listed after its policy (behind the symlink) denied it")
	}
}

// TestToolDirsKeptBounded: the kept listings (an inotify instance each, a
// per-user limit shared with the user's other programs) stay at most
// dirsKept, however many directories are listed; a listing read after
// its entry was evicted is right and keeps nothing.
func TestToolDirsKeptBounded(t *testing.T) {
	ap, aerr := policy.Load(policy.AgentPolicy, filepath.Join(t.TempDir(), "none"))
	var first string
	for i := range dirsKept * 2 {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755)
		if i == 0 {
			first = dir
		}
		if names, _, _, err := listTools(dir, "", ap, aerr); err != nil || !slices.Equal(names, []string{"tool"}) {
			t.Fatalf("listing %d: %v %v", i, names, err)
		}
		toolDirs.mu.Lock()
		n := len(toolDirs.m)
		toolDirs.mu.Unlock()
		if n > dirsKept {
			t.Fatalf("%d listings kept, at most %d", n, dirsKept)
		}
	}
	toolDirs.mu.Lock()
	d := toolDirs.m[first]
	toolDirs.mu.Unlock()
	if d != nil {
		t.Fatal("the first directory is still kept after the cache was cleared")
	}
}
