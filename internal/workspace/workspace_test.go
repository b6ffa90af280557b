package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/layout"
)

func TestParseGrants(t *testing.T) {
	for _, c := range []struct {
		in, err string
	}{
		{"", ""}, {"# c\n\nallow /home/u\n", ""}, {"writable .envrc\ncreatable .git\n", ""},
		{"allow rel\n", "clean absolute"}, {"allow /a/../b\n", "clean absolute"},
		{"writable .ssh\n", "not a protected name"}, {"deny /x\n", "unknown grant"},
		{"allow /x", "LF-terminated"}, {"allow /x y\n", "want"}, {"allow\n", "want"},
		{"partial /w\n", ""}, {"partial w\n", "clean absolute"}, {"partial /w/\n", "clean absolute"}, {"partial\n", "want"},
	} {
		_, err := ParseGrants([]byte(c.in))
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseGrants(%q) = %v, want %q", c.in, err, c.err)
		}
	}
	g, _ := ParseGrants([]byte("allow /h\nwritable .envrc\ncreatable .git\n"))
	if !slices.Equal(g.Allow, []string{"/h"}) || !g.Writable[".envrc"] || !g.Creatable[".git"] {
		t.Errorf("grants %+v", g)
	}
}

func FuzzParseGrants(f *testing.F) {
	for _, s := range []string{"allow /h\n", "partial /w\n", "partial ../w\n", "writable .git\n", "creatable .mcp.json\n# x\n", "allow\n", "x y z\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGrants(b)
		if err != nil {
			return
		}
		for _, a := range append(g.Allow, g.Partial...) {
			if !filepath.IsAbs(a) || filepath.Clean(a) != a {
				t.Fatalf("allowed %q", a)
			}
		}
		for n := range g.Writable {
			if !slices.Contains(Protected, n) {
				t.Fatalf("writable %q", n)
			}
		}
	})
}

// One validation of a workspace or mount source.
func TestOpen(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	l := layout.Layout{Root: filepath.Join(home, ".local/share/cortexfs"), Runtime: filepath.Join(base, "run")}
	for _, d := range []string{l.Root + "/agent", l.Runtime, home + "/proj", base + "/ws"} {
		os.MkdirAll(d, 0o755)
	}
	os.Symlink(home, base+"/homelink")
	os.Symlink(base+"/ws", base+"/wslink")
	os.WriteFile(base+"/file", nil, 0o644)
	o := Options{Layout: l, Homes: []string{home}, Write: true}
	for _, c := range []struct {
		path    string
		resolve bool
		grant   string
		want    string // "" ok, else in the error
		hide    []string
	}{
		{base + "/ws", false, "", "", nil},
		{home + "/proj", false, "", "", nil},
		{"rel", false, "", "not an absolute path", nil},
		{base + "/missing", false, "", "not an existing directory", nil},
		{base + "/file", false, "", "not an existing directory", nil},
		{base + "/wslink", false, "", "a symlink on the way", nil},
		{base + "/wslink", true, "", "", nil},
		{home, false, "", "home directory", nil},
		{base + "/homelink", true, "", "home directory", nil},
		{base, false, "", "home directory", nil},
		{"/", false, "", "root directory", nil},
		{home, false, home, "", []string{".local/share/cortexfs"}},
		{base, false, base, "", []string{"home/.local/share/cortexfs", "run"}},
		{l.Root + "/agent", false, "", "only the runtime writes", nil},
		{l.Runtime, false, "", "only the runtime writes", nil},
	} {
		o := o
		o.Resolve = c.resolve
		if c.grant != "" {
			o.Grants.Allow = []string{c.grant}
		}
		d, err := Open(c.path, o)
		if c.want != "" {
			if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open(%q) = %v, want %q", c.path, err, c.want)
			}
			if d != nil {
				d.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", c.path, err)
			continue
		}
		if !slices.Equal(d.Hide, c.hide) {
			t.Errorf("Open(%q).Hide = %v, want %v", c.path, d.Hide, c.hide)
		}
		d.Close()
	}
}

// Protected paths found without following symlinks, bounded.
func TestWalk(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{".git", "a/b/.git", "bare/objects", "bare/refs", "bare/hooks", "deep/1/2/3/4/5/6/7/8/9/.git", "src"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	os.WriteFile(filepath.Join(ws, "bare/HEAD"), []byte("ref: x\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "bare/config"), nil, 0o644)
	os.WriteFile(filepath.Join(ws, "src/.envrc"), nil, 0o644)
	os.Symlink("/etc", filepath.Join(ws, "src/.git"))
	os.Symlink(ws+"/a", filepath.Join(ws, "link"))
	d, err := Open(ws, Options{Homes: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	g, _ := ParseGrants([]byte("writable .bashrc\ncreatable .mcp.json\n"))
	f := Walk(d.File, g, nil)
	got := map[string]Kind{}
	for _, e := range f.Entries {
		got[e.Rel] = e.Kind
	}
	want := map[string]Kind{".git": KindDir, "a/b/.git": KindDir, "bare/hooks": KindDir, "bare/config": KindFile,
		"src/.envrc": KindFile, "src/.git": KindSymlink, ".envrc": KindAbsent, ".vscode": KindAbsent}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: kind %v (found %v), want %v", k, got[k], got, v)
		}
	}
	for _, k := range []string{".bashrc", ".mcp.json", "link/b/.git", "deep/1/2/3/4/5/6/7/8/9/.git"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s should not be protected (grant, symlink or depth %d)", k, MaxDepth)
		}
	}
	if !slices.Equal(f.Bare, []string{"bare"}) || f.Truncated != "" {
		t.Errorf("bare %v truncated %q", f.Bare, f.Truncated)
	}
}

// Placeholders: shared, removed by the last release, never a real file.
func TestPlaceholders(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".bashrc"), []byte("mine\n"), 0o644)
	d, _ := Open(ws, Options{Homes: []string{}})
	defer d.Close()
	r := NewRegistry()
	f1, _, rel1, err := r.Acquire(d.File, ".git", true)
	if err != nil {
		t.Fatal(err)
	}
	f2, _, rel2, _ := r.Acquire(d.File, ".git", true)
	f3, ph3, rel3, _ := r.Acquire(d.File, ".bashrc", false)
	f4, ph4, rel4, _ := r.Acquire(d.File, ".mcp.json", false)
	if ph3 || !ph4 {
		t.Errorf("placeholder: real .bashrc %v, absent .mcp.json %v", ph3, ph4)
	}
	// What the host's git status never lists: a FIFO, an empty directory.
	if fi, err := os.Lstat(filepath.Join(ws, ".mcp.json")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0 {
		t.Errorf(".mcp.json placeholder: %v %v, want a mode-000 FIFO", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !fi.IsDir() || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o500 {
		t.Errorf(".git placeholder: %v %v, want a directory of mode 01500", fi, err)
	}
	for _, f := range []*os.File{f1, f2, f3, f4} {
		f.Close()
	}
	rel1()
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err != nil {
		t.Error("placeholder removed while still in use")
	}
	rel2()
	rel3()
	rel4()
	ents, _ := os.ReadDir(ws)
	if len(ents) != 1 || ents[0].Name() != ".bashrc" {
		t.Errorf("after release: %v", ents)
	}
	// A placeholder someone filled is not ours any more: kept.
	_, _, rel, _ := r.Acquire(d.File, ".envrc", false)
	os.Chmod(filepath.Join(ws, ".envrc"), 0o644)
	rel()
	if _, err := os.Lstat(filepath.Join(ws, ".envrc")); err != nil {
		t.Error("a changed placeholder was removed")
	}
	// A held placeholder replaced on the host (someone made a real
	// .vscode there): the next sandbox's acquire — which only checks a
	// held one — binds the real directory, read-only, and the last
	// release leaves it.
	f5, _, rel5, err := r.Acquire(d.File, ".vscode", true)
	if err != nil {
		t.Fatal(err)
	}
	f5.Close()
	// Made before the placeholder goes, so not its inode number again.
	os.Mkdir(filepath.Join(ws, "real"), 0o755)
	os.Remove(filepath.Join(ws, ".vscode"))
	os.Rename(filepath.Join(ws, "real"), filepath.Join(ws, ".vscode"))
	f6, ph6, rel6, err := r.Acquire(d.File, ".vscode", true)
	if err != nil || ph6 {
		t.Errorf("a real .vscode in place of a held placeholder taken for one: %v %v", ph6, err)
	} else {
		f6.Close()
		rel6()
	}
	rel5()
	if fi, err := os.Lstat(filepath.Join(ws, ".vscode")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the real .vscode after the release: %v %v", fi, err)
	}
	// A crashed daemon's leftovers are adopted and removed: today's
	// signatures and an older daemon's (mode-000 directory and file).
	os.Mkdir(filepath.Join(ws, ".idea"), 0)
	os.Mkdir(filepath.Join(ws, ".codex"), 0)
	unix.Chmod(filepath.Join(ws, ".codex"), 0o1500)
	unix.Mkfifo(filepath.Join(ws, ".zshrc"), 0)
	os.WriteFile(filepath.Join(ws, ".profile"), nil, 0)
	for _, n := range []string{".idea", ".codex", ".zshrc", ".profile"} {
		f, ph, rel, err := NewRegistry().Acquire(d.File, n, IsDirName(n))
		if err != nil || !ph {
			t.Fatalf("%s: leftover not adopted: %v", n, err)
		}
		f.Close()
		rel()
		if _, err := os.Lstat(filepath.Join(ws, n)); err == nil {
			t.Errorf("a leftover placeholder %s was not removed", n)
		}
	}
}

// TestPlaceholdersPinnedByRun: a run's sandboxes, one after another, share
// one placeholder — the same inode, nothing made again — until the run
// ends; one a sandbox still uses outlives EndRun until its release.
func TestPlaceholdersPinnedByRun(t *testing.T) {
	ws := t.TempDir()
	d, _ := Open(ws, Options{Homes: []string{}})
	defer d.Close()
	r := NewRegistry()
	ino := func(name string) uint64 {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(ws, name), &st); err != nil {
			return 0
		}
		return st.Ino
	}
	use := func(run, name string) func() {
		f, ph, rel, err := r.AcquireFor(run, d.File, name, IsDirName(name))
		if err != nil || !ph {
			t.Fatalf("%s: %v %v", name, ph, err)
		}
		f.Close()
		return rel
	}
	use("run-1", ".git")()
	first := ino(".git")
	if first == 0 {
		t.Fatal("the placeholder went with its sandbox: the run should keep it")
	}
	for range 5 { // the run's steps and tool calls
		use("run-1", ".git")()
		if got := ino(".git"); got != first {
			t.Fatalf("a placeholder was made again (inode %d, then %d)", first, got)
		}
	}
	use("", ".envrc")() // no run: it goes with its last use
	if ino(".envrc") != 0 {
		t.Error("an unpinned placeholder stayed")
	}
	held := use("run-2", ".vscode") // still in use at its run's end
	use("run-1", ".vscode")()
	r.EndRun("run-1")
	if ino(".git") != 0 {
		t.Error("the run ended and its placeholder stayed")
	}
	if ino(".vscode") == 0 {
		t.Error("a placeholder another sandbox uses went at the run's end")
	}
	r.EndRun("run-2")
	if ino(".vscode") == 0 {
		t.Error("a placeholder a live sandbox uses went at its run's end")
	}
	held()
	if ino(".vscode") != 0 {
		t.Error("the placeholder stayed after its last use")
	}
	r.EndRun("run-1") // twice: nothing more
	// A sandbox of run-1 built after its end (its start was under way)
	// pins nothing: its placeholder goes with it.
	use("run-1", ".idea")()
	if ino(".idea") != 0 {
		t.Error("a run that ended pinned a placeholder")
	}
}

// What a run changed that runs code on the host.
func TestSnapshotChanges(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "r/.git/hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, "r/.git/HEAD"), []byte("ref: x\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "r/.git/config"), []byte("[core]\n\tbare = false\n"), 0o644)
	d, _ := Open(ws, Options{Homes: []string{}})
	defer d.Close()
	g, _ := ParseGrants([]byte("writable .envrc\n"))
	before := Take(d.File, g, nil)
	os.WriteFile(filepath.Join(ws, "r/.git/config"), []byte("[core]\n\tbare = false\n\tfsmonitor = /x.sh\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "r/.git/hooks/pre-commit"), []byte("x"), 0o755)
	os.MkdirAll(filepath.Join(ws, "n/.git"), 0o755)
	os.WriteFile(filepath.Join(ws, "n/.git/HEAD"), []byte("ref: x\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("x"), 0o644)
	got := strings.Join(before.Changes(Take(d.File, g, nil), "/workspace"), "\n")
	for _, want := range []string{"/workspace/r/.git/config: core.fsmonitor set to \"/x.sh\"", "hook /workspace/r/.git/hooks/pre-commit added",
		"a new repository at /workspace/n/.git", "/workspace/.envrc changed"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if c := before.Changes(before, "/w"); len(c) != 0 {
		t.Errorf("no change reported %v", c)
	}
}

func TestParseGitConfig(t *testing.T) {
	b := []byte("[core]\n\tFSMonitor = /a\n[filter \"lfs\"]\n smudge = x\n[Alias]\n st = !sh\n# c\n[bad\nk=v\n[include] path = /p\n")
	got := ParseGitConfig(b)
	var keys []string
	for _, kv := range got {
		if ExecKey(kv[0]) {
			keys = append(keys, kv[0]+"="+kv[1])
		}
	}
	want := []string{"core.fsmonitor=/a", "filter.lfs.smudge=x", "alias.st=!sh", "include.path=/p"}
	if !slices.Equal(keys, want) {
		t.Errorf("exec keys %q, want %q", keys, want)
	}
}

func FuzzParseGitConfig(f *testing.F) {
	for _, s := range []string{"[core]\n\tfsmonitor = /a\n", "[a \"b\"] k = v\n", "[", "k=v", "[x]\n=\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kv := range ParseGitConfig(b) {
			if kv[0] == "" || !strings.Contains(kv[0], ".") || strings.Contains(kv[0], "\n") {
				t.Fatalf("key %q", kv[0])
			}
		}
	})
}

// BenchmarkPrepare: what a run start's protected-path work costs on a
// workspace of 10,000 files and 50 nested repositories.
func BenchmarkPrepare(b *testing.B) {
	ws := b.TempDir()
	for i := 0; i < 50; i++ {
		os.MkdirAll(filepath.Join(ws, "repos", strconv.Itoa(i), ".git", "hooks"), 0o755)
	}
	for i := 0; i < 10000; i++ {
		dir := filepath.Join(ws, "src", strconv.Itoa(i/100), strconv.Itoa(i/10%10))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644)
	}
	d, err := Open(ws, Options{Homes: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	r := NewRegistry()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := Walk(d.File, Grants{}, nil)
		if len(f.Entries) < 50 || f.Truncated != "" {
			b.Fatalf("found %d, %q", len(f.Entries), f.Truncated)
		}
		var rels []func()
		for _, e := range f.Entries {
			if !strings.Contains(e.Rel, "/") {
				pf, _, rel, err := r.Acquire(d.File, e.Rel, IsDirName(e.Rel))
				if err != nil {
					b.Fatal(err)
				}
				pf.Close()
				rels = append(rels, rel)
			}
		}
		for _, rel := range rels {
			rel()
		}
	}
}

// fdsOn counts this process's descriptors open on path.
func fdsOn(path string) int {
	n := 0
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == path {
			n++
		}
	}
	return n
}

// Placeholders in one directory share one held descriptor of it, released
// with the last of them (a live sandbox holds descriptors per
// workspace, not per protected name).
func TestPlaceholdersShareTheirDirectory(t *testing.T) {
	ws := t.TempDir()
	d, _ := Open(ws, Options{Homes: []string{}})
	defer d.Close()
	before := fdsOn(ws)
	r := NewRegistry()
	var rels []func()
	for _, name := range []string{".git", ".envrc", ".mcp.json", ".idea", ".vscode"} {
		f, _, rel, err := r.Acquire(d.File, name, IsDirName(name))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		rels = append(rels, rel)
	}
	if got := fdsOn(ws); got != before+1 {
		t.Errorf("5 placeholders hold %d descriptors of their directory, want 1", got-before)
	}
	for _, rel := range rels {
		rel()
	}
	if got := fdsOn(ws); got != before {
		t.Errorf("after every release %d descriptors of the directory are open, want %d", got, before)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("placeholders left: %v", ents)
	}
}

// Absent sources: made once with their exact modes and content, the same
// inode on every later call, recognised by identity; a source someone
// changed is refused rather than bound.
func TestAbsentSource(t *testing.T) {
	run := t.TempDir()
	for _, c := range []struct {
		name, content string
		mode          uint32
	}{{".claude", "", unix.S_IFDIR | AbsentDirMode}, {".envrc", "", unix.S_IFREG | AbsentFileMode}, {".mcp.json", `{"mcpServers":{}}` + "\n", unix.S_IFREG | AbsentFileMode}} {
		f, p, err := AbsentSource(run, c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var st unix.Stat_t
		unix.Fstat(int(f.Fd()), &st)
		f.Close()
		if st.Mode != c.mode || !IsAbsentSource(st.Dev, st.Ino) {
			t.Errorf("%s: %s mode %o, want %o; recognised %v", c.name, p, st.Mode, c.mode, IsAbsentSource(st.Dev, st.Ino))
		}
		if c.mode&unix.S_IFMT == unix.S_IFREG {
			if b, _ := os.ReadFile(p); string(b) != c.content {
				t.Errorf("%s reads %q", c.name, b)
			}
		}
		f2, p2, err := AbsentSource(run, c.name)
		if err != nil || p2 != p {
			t.Fatalf("%s again: %s %v", c.name, p2, err)
		}
		var st2 unix.Stat_t
		unix.Fstat(int(f2.Fd()), &st2)
		f2.Close()
		if st2.Ino != st.Ino {
			t.Errorf("%s made again", c.name)
		}
	}
	if IsAbsentSource(0, 1) {
		t.Error("an unknown identity recognised")
	}
	// Changed: a file in the directory, content in the file.
	dir := filepath.Join(run, "absent")
	unix.Chmod(filepath.Join(dir, "dir"), 0o755)
	os.WriteFile(filepath.Join(dir, "dir", "settings.json"), []byte("{}"), 0o644)
	unix.Chmod(filepath.Join(dir, "dir"), AbsentDirMode)
	if _, _, err := AbsentSource(run, ".claude"); err == nil {
		t.Error("a directory source with a file in it was accepted")
	}
	unix.Chmod(filepath.Join(dir, "file"), 0o644)
	os.WriteFile(filepath.Join(dir, "file"), []byte("echo planted\n"), 0o644)
	unix.Chmod(filepath.Join(dir, "file"), AbsentFileMode)
	if _, _, err := AbsentSource(run, ".bashrc"); err == nil {
		t.Error("a file source with content was accepted")
	}
	unix.Chmod(filepath.Join(dir, "mcp.json"), 0o644)
	os.WriteFile(filepath.Join(dir, "mcp.json"), []byte(`{"mcpServers":{"x":{}}}`+"\n"), 0o644)
	unix.Chmod(filepath.Join(dir, "mcp.json"), AbsentFileMode)
	if _, _, err := AbsentSource(run, ".mcp.json"); err == nil {
		t.Error("a changed .mcp.json source was accepted")
	}
}

// TestSharedPlaceholdersGoWithTheLastNode: two registries sharing a lock
// directory stand for two cluster nodes binding in one workspace. The
// first to leave keeps the placeholders (the other still binds over
// them), whatever it made itself; the last removes them all; a node
// entering while another is clearing the directory waits for it.
func TestSharedPlaceholdersGoWithTheLastNode(t *testing.T) {
	ws, locks := t.TempDir(), t.TempDir()
	d, _ := Open(ws, Options{Homes: []string{}})
	defer d.Close()
	a, b := NewRegistry(), NewRegistry()
	const linger = 50 * time.Millisecond
	a.Share(locks, linger)
	b.Share(locks, linger)
	use := func(r *Registry, run, name string, isDir bool) {
		t.Helper()
		f, ph, rel, err := r.AcquireFor(run, d.File, name, isDir)
		if err != nil || !ph {
			t.Fatalf("%s %s: %v %v", run, name, ph, err)
		}
		f.Close()
		rel()
	}
	present := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(ws, n)); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	gone := func(what string, names ...string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(present(names...)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still there: %v", what, present(names...))
			}
		}
	}
	ino := func(name string) uint64 {
		var st unix.Stat_t
		unix.Lstat(filepath.Join(ws, name), &st)
		return st.Ino
	}
	use(a, "a1", ".envrc", false)
	use(a, "a1", ".vscode", true)
	use(b, "b1", ".envrc", false) // adopted: the same placeholder
	use(b, "b1", ".idea", true)
	a.EndRun("a1")
	time.Sleep(4 * linger)
	if got := present(".envrc", ".vscode", ".idea"); len(got) != 3 {
		t.Fatalf("the first node to leave removed placeholders the other binds over: left %v", got)
	}
	// Used again within the linger: the same placeholders, nothing made again.
	before := ino(".idea")
	b.EndRun("b1")
	use(b, "b2", ".idea", true)
	b.EndRun("b2")
	if got := present(".envrc", ".vscode", ".idea"); len(got) != 3 || ino(".idea") != before {
		t.Fatalf("within the linger: %v (inode %d, was %d)", got, ino(".idea"), before)
	}
	// The last node idle for the linger removes them all — .vscode too,
	// which only a made.
	gone("after every node left", ".envrc", ".vscode", ".idea")
	// A real file of a protected name is never removed.
	os.WriteFile(filepath.Join(ws, ".mcp.json"), []byte("{}"), 0o644)
	use(b, "b3", ".vscode", true)
	b.EndRun("b3")
	gone("after b3", ".vscode")
	time.Sleep(4 * linger)
	if got := present(".mcp.json"); len(got) != 1 {
		t.Fatal("a real .mcp.json was removed")
	}
	os.Remove(filepath.Join(ws, ".mcp.json"))
	// A node clearing the directory holds the lock exclusively: another
	// waits to enter until it is done (here: until the test lets go).
	ents, _ := os.ReadDir(locks)
	if len(ents) != 1 {
		t.Fatalf("lock files: %v", ents)
	}
	ex, err := os.OpenFile(filepath.Join(locks, ents[0].Name()), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(ex.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	entered := make(chan error, 1)
	go func() {
		f, _, rel, err := a.AcquireFor("a2", d.File, ".envrc", false)
		if err == nil {
			f.Close()
			rel()
		}
		entered <- err
	}()
	select {
	case err := <-entered:
		t.Fatalf("entered while another node cleared the directory: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	ex.Close()
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
	a.EndRun("a2")
	gone("after a2", ".envrc")
}

// TestPlaceholderFilesShareAnInode: the absent file names of a directory
// are hard links of one FIFO (one inode allocated, not one per name);
// directory names are directories of their own; every name goes with its
// last release. The link is made from the registry's own descriptor: a
// name replaced on the host meanwhile (here by a file with content) is
// never what a new placeholder links to, and a placeholder whose mode
// was changed is not copied.
func TestPlaceholderFilesShareAnInode(t *testing.T) {
	ws := t.TempDir()
	d, _ := Open(ws, Options{Homes: []string{}})
	defer d.Close()
	r := NewRegistry()
	files := []string{".envrc", ".mcp.json", ".bashrc", ".profile", ".zshrc"}
	var rels []func()
	acquire := func(n string) {
		t.Helper()
		f, ph, rel, err := r.Acquire(d.File, n, IsDirName(n))
		if err != nil || !ph {
			t.Fatalf("%s: %v %v", n, ph, err)
		}
		f.Close()
		rels = append(rels, rel)
	}
	for _, n := range append([]string{".git", ".vscode"}, files...) {
		acquire(n)
	}
	ino := func(n string) (uint64, uint64, os.FileMode) {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(ws, n), &st); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		fi, _ := os.Lstat(filepath.Join(ws, n))
		return st.Ino, uint64(st.Nlink), fi.Mode()
	}
	first, nlink, mode := ino(files[0])
	if nlink != uint64(len(files)) || mode&os.ModeNamedPipe == 0 || mode.Perm() != 0 {
		t.Errorf("%s: %d links, mode %v; want %d links of a mode-000 FIFO", files[0], nlink, mode, len(files))
	}
	for _, n := range files[1:] {
		if i, _, _ := ino(n); i != first {
			t.Errorf("%s is inode %d, not the shared %d", n, i, first)
		}
	}
	if g, _, _ := ino(".git"); g == first {
		t.Error(".git shares the FIFO's inode")
	}
	// Replaced on the host: the next placeholder is not a link of it.
	os.Remove(filepath.Join(ws, ".envrc"))
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("planted\n"), 0o644)
	acquire(".zshenv")
	if i, _, m := ino(".zshenv"); i != first || m&os.ModeNamedPipe == 0 {
		t.Errorf(".zshenv: inode %d mode %v, want the registry's FIFO %d", i, m, first)
	}
	// The shared inode's mode changed: the next one is a new FIFO.
	os.Chmod(filepath.Join(ws, ".mcp.json"), 0o644)
	acquire(".zlogin")
	if i, n, m := ino(".zlogin"); i == first || n != 1 || m&os.ModeNamedPipe == 0 || m.Perm() != 0 {
		t.Errorf(".zlogin: inode %d (%d links) mode %v, want a new mode-000 FIFO", i, n, m)
	}
	acquire(".zprofile")
	if i, _, _ := ino(".zprofile"); i != func() uint64 { i, _, _ := ino(".zlogin"); return i }() {
		t.Error(".zprofile does not link the new FIFO")
	}
	os.Remove(filepath.Join(ws, ".envrc")) // the host's own file
	for _, rel := range rels {
		rel()
	}
	ents, _ := os.ReadDir(ws)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	// The changed inode is no placeholder any more: its names stay, as
	// any placeholder someone changed does (TestPlaceholders).
	if want := []string{".bashrc", ".mcp.json", ".profile", ".zshenv", ".zshrc"}; !slices.Equal(left, want) {
		t.Errorf("after every release: %v, want %v", left, want)
	}
	// Every name of the held FIFO removed while the directory is still
	// held: the next one is made anew (nothing to link).
	r2 := NewRegistry()
	ws2 := t.TempDir()
	d2, _ := Open(ws2, Options{Homes: []string{}})
	defer d2.Close()
	fg, _, relg, _ := r2.Acquire(d2.File, ".git", true)
	fg.Close()
	fa, _, rela, _ := r2.Acquire(d2.File, ".envrc", false)
	fa.Close()
	rela()
	fb, ph, relb, err := r2.Acquire(d2.File, ".bashrc", false)
	if err != nil || !ph {
		t.Fatalf("after the linked inode's last name went: %v %v", ph, err)
	}
	fb.Close()
	if fi, err := os.Lstat(filepath.Join(ws2, ".bashrc")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf(".bashrc: %v %v", fi, err)
	}
	relb()
	relg()
	if ents, _ := os.ReadDir(ws2); len(ents) != 0 {
		t.Errorf("left: %v", ents)
	}
}

// TestTakeFoundIsTake: a snapshot taken from Protect's walk is the
// snapshot's own walk when no name is granted writable (a run's start
// walks once for both); a writable grant changes what the walk goes
// through, which is why the run walks twice then.
func TestTakeFoundIsTake(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"r/.git/hooks", "bare/objects", "bare/refs", "bare/hooks", ".vscode/sub/.git/hooks", "deep/a/b/.git"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	for _, f := range []string{"r/.git/HEAD", "bare/HEAD", ".vscode/sub/.git/HEAD", "deep/a/b/.git/HEAD"} {
		os.WriteFile(filepath.Join(ws, f), []byte("ref: refs/heads/main\n"), 0o644)
	}
	os.WriteFile(filepath.Join(ws, "r/.git/config"), []byte("[core]\n\tfsmonitor = /x.sh\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "r/.git/hooks/pre-commit"), []byte("x"), 0o755)
	os.WriteFile(filepath.Join(ws, "bare/config"), []byte("[core]\n\tbare = true\n"), 0o644)
	d, err := Open(ws, Options{Homes: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, grants := range []string{"", "creatable .git\ncreatable .envrc\n"} {
		g, err := ParseGrants([]byte(grants))
		if err != nil {
			t.Fatal(err)
		}
		want := Take(d.File, g, d.Hide)
		got := TakeFound(d.File, g, Walk(d.File, g, d.Hide))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("grants %q: from Protect's walk %v, the snapshot's own %v", grants, got.items, want.items)
		}
		if len(want.items) < 4 {
			t.Errorf("grants %q: the fixture's repositories were not found: %v", grants, want.items)
		}
	}
	g, _ := ParseGrants([]byte("writable .vscode\n"))
	if reflect.DeepEqual(TakeFound(d.File, g, Walk(d.File, g, d.Hide)), Take(d.File, g, d.Hide)) {
		t.Error("a writable grant's walk (into .vscode) found what the snapshot's finds: the fixture no longer shows why the run walks twice then")
	}
}
