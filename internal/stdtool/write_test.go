package stdtool

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// spec: write creates or replaces a file with CONTENT exactly.
func TestWrite(t *testing.T) {
	ftDir(t)
	ftWrite(t, "old.txt", "old\n", 0o600)
	ftWrite(t, "crlf.txt", "a\r\nb\r\n", 0o644)
	if err := os.Mkdir("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		path     string
		content  string
		want     string
		code     int
		wantMode os.FileMode // 0: not checked
	}{
		{"new file, parents created", "sub/dir/new.txt", "one\ntwo\n", "wrote 2 lines (8 bytes) to sub/dir/new.txt (new file)\n", 0, 0o644},
		{"replace keeps the mode", "old.txt", "new\n", "wrote 1 line (4 bytes) to old.txt (replaced)\n", 0, 0o600},
		{"no final newline", "nofinal.txt", "a\nb", "wrote 2 lines (3 bytes) to nofinal.txt (new file)\n(CONTENT does not end with a newline, so neither does the file)\n", 0, 0},
		{"empty content", "empty.txt", "", "wrote 0 lines (0 bytes) to empty.txt (new file)\n", 0, 0},
		{"content starting with a dash", "list.md", "- one\n- two\n", "wrote 2 lines (12 bytes) to list.md (new file)\n", 0, 0},
		{"LF over CRLF is written as given", "crlf.txt", "x\ny\n", "wrote 2 lines (4 bytes) to crlf.txt (replaced)\n(the old file had CRLF line endings; CONTENT has LF ones and was written as given)\n", 0, 0},
		{"directory", "dir", "x", "dir is a directory; give the path of a file\n", 1, 0},
		{"directory with a slash", "dir/", "x", "dir/ is a directory; give the path of a file\n", 1, 0},
		{"parent is a file", "old.txt/x", "x", "cannot write old.txt/x: a part of the path is not a directory\n", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, code := ftRun(t, "write", tc.path, tc.content)
			if got != tc.want || code != tc.code {
				t.Fatalf("write %s = %d %q, want %d %q", tc.path, code, got, tc.code, tc.want)
			}
			if tc.code != 0 {
				return
			}
			if b := ftRead(t, tc.path); b != tc.content {
				t.Fatalf("file holds %q, want %q", b, tc.content)
			}
			if tc.wantMode != 0 {
				st, err := os.Stat(tc.path)
				if err != nil || st.Mode().Perm() != tc.wantMode {
					t.Fatalf("mode %v (%v), want %v", st.Mode(), err, tc.wantMode)
				}
			}
		})
	}
	if got := ftRead(t, "old.txt"); got != "new\n" {
		t.Fatalf("old.txt = %q", got)
	}
	ents, _ := os.ReadDir(".")
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}

// spec: write refuses a symlink that leaves the workspace and
// writes through one that stays inside it (the link stays a link).
func TestWriteSymlinks(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "target.txt")
	if err := os.WriteFile(target, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := ftDir(t)
	if err := os.Symlink(target, "out.txt"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, "outdir"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"out.txt", "outdir/new.txt"} {
		got, code := ftRun(t, "write", p, "pwned\n")
		if code != 1 || !strings.Contains(got, "outside the workspace "+dir) {
			t.Fatalf("write %s: %d %q", p, code, got)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "outside\n" {
		t.Fatalf("target changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("file created outside: %v", err)
	}

	ftWrite(t, "real.txt", "old\n", 0o644)
	if err := os.Symlink("real.txt", "in.txt"); err != nil {
		t.Fatal(err)
	}
	if got, code := ftRun(t, "write", "in.txt", "new\n"); code != 0 || got != "wrote 1 line (4 bytes) to in.txt (replaced)\n" {
		t.Fatalf("%d %q", code, got)
	}
	if st, err := os.Lstat("in.txt"); err != nil || st.Mode()&os.ModeSymlink == 0 || ftRead(t, "real.txt") != "new\n" {
		t.Fatalf("link %v %v, real.txt %q", st, err, ftRead(t, "real.txt"))
	}
}

// spec: a FIFO is refused (not replaced, not blocked on); a name
// that is not UTF-8 is written as given.
func TestWriteSpecialNames(t *testing.T) {
	ftDir(t)
	if err := syscall.Mkfifo("pipe", 0o644); err != nil {
		t.Fatal(err)
	}
	if got, code := ftRun(t, "write", "pipe", "x"); code != 1 || got != "pipe is not a regular file but a named pipe (FIFO); write replaces regular files only\n" {
		t.Fatalf("%d %q", code, got)
	}
	if st, err := os.Lstat("pipe"); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("pipe replaced: %v %v", st, err)
	}
	name := "caf\xe9.txt"
	if got, code := ftRun(t, "write", name, "x\n"); code != 0 || got != "wrote 1 line (2 bytes) to caf\uFFFD.txt (new file)\n" {
		t.Fatalf("%d %q", code, got)
	}
	if ftRead(t, name) != "x\n" {
		t.Fatal("content")
	}
}

// spec: a directory the tool may not write in gives a clear
// error. Root writes anyway (CI runs tests as root): skipped there.
func TestWriteUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a mode-555 directory")
	}
	ftDir(t)
	if err := os.Mkdir("ro", 0o555); err != nil {
		t.Fatal(err)
	}
	if got, code := ftRun(t, "write", "ro/x.txt", "x"); code != 1 || got != "cannot write ro/x.txt: permission denied\n" {
		t.Fatalf("%d %q", code, got)
	}
}
