package stdtool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// patch wraps operations in the Begin and End markers.
func patch(ops ...string) string {
	return "*** Begin Patch\n" + strings.Join(ops, "\n") + "\n*** End Patch\n"
}

// snapshot is every file under the cwd: bytes, mode and mtime.
func snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(".", func(p string, st os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = fmt.Sprintf("%q %v %d", b, st.Mode(), st.ModTime().UnixNano())
		} else {
			out[p] = st.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for p, b := range before {
		if a, ok := after[p]; !ok {
			diffs = append(diffs, "gone: "+p)
		} else if a != b {
			diffs = append(diffs, fmt.Sprintf("changed: %s: %s -> %s", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "new: "+p)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("the workspace changed:\n%s", strings.Join(diffs, "\n"))
	}
}

// ftOld writes a file with an mtime in the past, so a rewrite shows.
func ftOld(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	ftWrite(t, name, content, mode)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(name, old, old); err != nil {
		t.Fatal(err)
	}
}

// spec: apply_patch adds, updates, moves and deletes, keeping
// each file's line endings, mode and missing final newline.
func TestApplyPatch(t *testing.T) {
	ftDir(t)
	ftWrite(t, "app.py", "def greet():\n    print(\"Hi\")\n", 0o755)
	ftWrite(t, "win.txt", "one\r\ntwo\r\nthree\r\n", 0o600)
	ftWrite(t, "nofinal.txt", "a\nb", 0o644)
	ftWrite(t, "gone.txt", "bye\n", 0o644)
	ftWrite(t, "img.bin", "\x89PNG\x00\x00", 0o644)
	p := patch(
		"*** Add File: docs/hello.txt",
		"+Hello",
		"+world",
		"*** Update File: app.py",
		"*** Move to: src/main.py",
		"@@ def greet():",
		"-    print(\"Hi\")",
		"+    print(\"Hello, world!\")",
		"*** Update File: win.txt",
		"@@",
		" one",
		"-two",
		"+TWO",
		"+2.5",
		"*** Update File: ./nofinal.txt",
		"@@",
		"-b",
		"+B",
		"*** Update File: nofinal.txt",
		"@@",
		" B",
		"+C",
		"*** End of File",
		"*** Delete File: gone.txt",
		"*** Delete File: img.bin",
	)
	got, code := ftRun(t, "apply_patch", p)
	want := "Success. Updated the following files:\nA docs/hello.txt (+2)\nR app.py -> src/main.py (+1 -1)\nM win.txt (+2 -1)\nM ./nofinal.txt (+1 -1)\nM ./nofinal.txt (+1 -0)\nD gone.txt\nD img.bin\n"
	if got != want || code != 0 {
		t.Fatalf("%d\n%s\nwant\n%s", code, got, want)
	}
	for name, want := range map[string]string{
		"docs/hello.txt": "Hello\nworld\n",
		"src/main.py":    "def greet():\n    print(\"Hello, world!\")\n",
		"win.txt":        "one\r\nTWO\r\n2.5\r\nthree\r\n",
		"nofinal.txt":    "a\nB\nC",
	} {
		if got := ftRead(t, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for name, mode := range map[string]os.FileMode{"src/main.py": 0o755, "win.txt": 0o600, "docs/hello.txt": 0o644} {
		if st, err := os.Stat(name); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", name, st.Mode(), err, mode)
		}
	}
	for _, name := range []string{"app.py", "gone.txt", "img.bin"} {
		if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", name, err)
		}
	}
	// no temp file is left anywhere
	for p := range snapshot(t) {
		if strings.Contains(p, ".patch-") {
			t.Errorf("temp file left: %s", p)
		}
	}
}

// spec: a patch that does not apply leaves EVERY file it names
// untouched (bytes, mode, mtime), also those whose hunks would have
// applied, and creates nothing.
func TestApplyPatchAllOrNothing(t *testing.T) {
	base := []string{
		"*** Add File: newdir/new.txt",
		"+new",
		"*** Update File: a.txt",
		"@@",
		"-a1",
		"+A1",
		"*** Update File: b.txt",
		"*** Move to: moved/b.txt",
		"@@",
		"-b1",
		"+B1",
		"*** Delete File: c.txt",
	}
	tests := []struct {
		name  string
		extra []string // the operation that fails, after the good ones
		want  string
	}{
		{"context not found", []string{"*** Update File: d.txt", "@@", " d1", "-nope", "+x"},
			"Update File d.txt (patch line 14): chunk 1 (patch line 15): could not find its context and removed lines:\n  d1\n  nope\nThe first 1 of these lines match at line 1, but line 2 of the file is \"d2\" where the chunk has \"nope\".\nNo file was changed.\n"},
		{"file to update missing", []string{"*** Update File: missing.txt", "@@", "-x"},
			"Update File missing.txt (patch line 14): the file does not exist; create it with '*** Add File: missing.txt'\nNo file was changed.\n"},
		{"file to delete missing", []string{"*** Delete File: missing.txt"},
			"Delete File missing.txt (patch line 14): the file does not exist\nNo file was changed.\n"},
		{"file to add exists", []string{"*** Add File: d.txt", "+x"},
			"Add File d.txt (patch line 14): the file already exists; change it with '*** Update File: d.txt', or delete it first\nNo file was changed.\n"},
		{"move onto an existing file", []string{"*** Update File: d.txt", "*** Move to: a.txt", "@@", "-d1", "+x"},
			"Update File d.txt (patch line 14): cannot move it to a.txt: that file already exists\nNo file was changed.\n"},
		{"a directory to update", []string{"*** Update File: sub", "@@", "-x"},
			"Update File sub (patch line 14): sub is a directory; use ls to list it\nNo file was changed.\n"},
		{"a binary file to update", []string{"*** Update File: bin.dat", "@@", "-x"},
			"Update File bin.dat (patch line 14): it is a binary file; apply_patch changes text files only\nNo file was changed.\n"},
		{"invalid patch", []string{"*** Update File: d.txt", "garbage"},
			"invalid patch: patch line 15: unexpected line \"garbage\": every line of a chunk starts with ' ' (context), '-' (removed) or '+' (added)\nNo file was changed.\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ftDir(t)
			ftOld(t, "a.txt", "a1\na2\n", 0o644)
			ftOld(t, "b.txt", "b1\n", 0o600)
			ftOld(t, "c.txt", "c1\n", 0o644)
			ftOld(t, "d.txt", "d1\nd2\n", 0o644)
			ftOld(t, "bin.dat", "\x00\x01x\n", 0o644)
			if err := os.Mkdir("sub", 0o755); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t)
			got, code := ftRun(t, "apply_patch", patch(append(base, tc.extra...)...))
			if got != tc.want || code != 1 {
				t.Fatalf("%d\n%s\nwant\n%s", code, got, tc.want)
			}
			sameSnapshot(t, before, snapshot(t))
		})
	}
}

// spec: when a rename fails half-way, the files already changed
// get their old bytes back, new files and directories go away, and no temp
// file is left.
func TestApplyPatchRestoresOnCommitFailure(t *testing.T) {
	ftDir(t)
	ftOld(t, "a.txt", "a1\n", 0o640)
	ftOld(t, "b.txt", "b1\n", 0o644)
	ftOld(t, "c.txt", "c1\n", 0o644)
	before := snapshot(t)
	renames := 0
	commitRename = func(from, to string) error {
		renames++
		if renames == 3 {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: errors.New("injected failure")}
		}
		return os.Rename(from, to)
	}
	t.Cleanup(func() { commitRename = os.Rename })
	got, code := ftRun(t, "apply_patch", patch(
		"*** Update File: a.txt", "@@", "-a1", "+A1",
		"*** Delete File: c.txt",
		"*** Add File: new/dir/n.txt", "+n",
		"*** Update File: b.txt", "@@", "-b1", "+B1",
	))
	want := "cannot write b.txt: injected failure. The files already changed were restored: no file was changed.\n"
	if got != want || code != 1 {
		t.Fatalf("%d %q, want %q", code, got, want)
	}
	after := snapshot(t)
	// restored files hold their old bytes and mode (their mtime is new)
	for _, name := range []string{"a.txt", "c.txt"} {
		b, a := before[name], after[name]
		if a == "" || strings.SplitN(a, " ", 3)[0] != strings.SplitN(b, " ", 3)[0] || strings.Fields(a)[1] != strings.Fields(b)[1] {
			t.Errorf("%s: %s, was %s", name, a, b)
		}
		delete(before, name)
		delete(after, name)
	}
	sameSnapshot(t, before, after)
}

// spec: symlinks: updating through one that leaves the
// workspace is refused (nothing changes); one inside it is followed;
// deleting or moving a symlink is refused.
func TestApplyPatchSymlinks(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "t.txt")
	if err := os.WriteFile(target, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := ftDir(t)
	ftOld(t, "a.txt", "a\n", 0o644)
	ftOld(t, "real.txt", "r\n", 0o644)
	for _, l := range [][2]string{{target, "out.txt"}, {outside, "outdir"}, {"real.txt", "in.txt"}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t)
	for _, tc := range []struct{ ops, want string }{
		{"*** Update File: a.txt\n@@\n-a\n+A\n*** Update File: out.txt\n@@\n-x\n+y",
			fmt.Sprintf("Update File out.txt (patch line 6): %s/out.txt resolves to %s, outside the workspace %s (a symlink); write that path directly if you mean it\nNo file was changed.\n", dir, target, dir)},
		{"*** Add File: outdir/new.txt\n+x",
			fmt.Sprintf("Add File outdir/new.txt (patch line 2): %s/outdir/new.txt resolves to %s/new.txt, outside the workspace %s (a symlink); write that path directly if you mean it\nNo file was changed.\n", dir, outside, dir)},
		{"*** Delete File: in.txt",
			"Delete File in.txt (patch line 2): it is a symlink; apply_patch does not delete or move symlinks (change the file it points to, or use bash)\nNo file was changed.\n"},
	} {
		if got, code := ftRun(t, "apply_patch", patch(tc.ops)); got != tc.want || code != 1 {
			t.Errorf("%d\n%s\nwant\n%s", code, got, tc.want)
		}
	}
	sameSnapshot(t, before, snapshot(t))
	if b, _ := os.ReadFile(target); string(b) != "x\n" {
		t.Fatalf("outside file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("outside file created: %v", err)
	}
	got, code := ftRun(t, "apply_patch", patch("*** Update File: in.txt\n@@\n-r\n+R"))
	if code != 0 || got != "Success. Updated the following files:\nM in.txt (+1 -1)\n" || ftRead(t, "real.txt") != "R\n" {
		t.Fatalf("%d %q, real.txt %q", code, got, ftRead(t, "real.txt"))
	}
	if st, err := os.Lstat("in.txt"); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("in.txt is no longer a link: %v %v", st, err)
	}
}

// spec: a 200k-line file is patched near its end; names that
// are not UTF-8 work and are shown with replacements; an absolute path works.
func TestApplyPatchHugeAndOddNames(t *testing.T) {
	dir := ftDir(t)
	content := numbered(200000, "\n")
	ftWrite(t, "big.txt", content, 0o644)
	name := "caf\xe9.txt"
	got, code := ftRun(t, "apply_patch", patch(
		"*** Update File: big.txt", "@@", " line 199999", "-line 200000", "+the end", "*** End of File",
		"*** Add File: "+name, "+x",
		"*** Add File: "+filepath.Join(dir, "abs.txt"), "+y",
	))
	want := "Success. Updated the following files:\nM big.txt (+1 -1)\nA caf\uFFFD.txt (+1)\nA " + dir + "/abs.txt (+1)\n"
	if got != want || code != 0 {
		t.Fatalf("%d\n%s\nwant\n%s", code, got, want)
	}
	if ftRead(t, "big.txt") != strings.TrimSuffix(content, "line 200000\n")+"the end\n" || ftRead(t, name) != "x\n" || ftRead(t, "abs.txt") != "y\n" {
		t.Fatal("contents wrong")
	}
}

// spec: a file that cannot be read stops the patch with a clear
// error. Root reads a mode-000 file anyway (CI runs tests as root):
// skipped there; the directory case above covers an unreadable path.
func TestApplyPatchUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can read a mode-000 file")
	}
	ftDir(t)
	ftWrite(t, "locked.txt", "a\n", 0o000)
	got, code := ftRun(t, "apply_patch", patch("*** Update File: locked.txt", "@@", "-a", "+b"))
	if want := "Update File locked.txt (patch line 2): cannot patch locked.txt: permission denied\nNo file was changed.\n"; got != want || code != 1 {
		t.Fatalf("%d %q, want %q", code, got, want)
	}
}

// spec: a temp file that cannot be written (a read-only
// directory) fails the patch before anything is renamed in: nothing
// changes and the directories made for new files go away. Root writes
// into a read-only directory anyway (CI runs tests as root): skipped there.
func TestApplyPatchPrepareFailure(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a mode-555 directory")
	}
	ftDir(t)
	ftOld(t, "a.txt", "a\n", 0o644)
	ftOld(t, "ro/x.txt", "x\n", 0o644)
	if err := os.Chmod("ro", 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod("ro", 0o755) })
	before := snapshot(t)
	got, code := ftRun(t, "apply_patch", patch(
		"*** Update File: a.txt", "@@", "-a", "+A",
		"*** Add File: made/n.txt", "+n",
		"*** Update File: ro/x.txt", "@@", "-x", "+X",
	))
	if want := "cannot write ro/x.txt: permission denied\nNo file was changed.\n"; got != want || code != 1 {
		t.Fatalf("%d %q, want %q", code, got, want)
	}
	sameSnapshot(t, before, snapshot(t))
}
