package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree builds: d/, d/f, d/sub/, d/link -> sub, d/flink -> f, d/out -> /etc.
func tree(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	d, _ = filepath.EvalSymlinks(d)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o600))
	must(os.Mkdir(filepath.Join(d, "sub"), 0o700))
	must(os.WriteFile(filepath.Join(d, "sub", "g"), []byte("y"), 0o600))
	must(os.Symlink("sub", filepath.Join(d, "link")))
	must(os.Symlink("f", filepath.Join(d, "flink")))
	must(os.Symlink("/etc", filepath.Join(d, "out")))
	return d
}

// both runs f with openat2 and with the per-component fallback.
func both(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("fallback", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
}

// Bind sources opened safely — no symlink anywhere in the path.
func TestOpen(t *testing.T) {
	both(t, func(t *testing.T) {
		d := tree(t)
		cases := []struct {
			path  string
			flags int
			want  error // nil: opens
		}{
			{d, unix.O_PATH | unix.O_DIRECTORY, nil},
			{d + "/f", unix.O_PATH, nil},
			{d + "/f", unix.O_RDONLY, nil},
			{d + "/sub/g", unix.O_PATH, nil},
			{d + "//sub/./g", unix.O_PATH, nil},
			{"/", unix.O_PATH | unix.O_DIRECTORY, nil},
			{d + "/link", unix.O_PATH | unix.O_DIRECTORY, ErrSymlink},
			{d + "/link", unix.O_PATH, ErrSymlink},
			{d + "/link/g", unix.O_PATH, ErrSymlink},
			{d + "/flink", unix.O_PATH, ErrSymlink},
			{d + "/flink", unix.O_RDONLY, ErrSymlink},
			{d + "/out", unix.O_PATH | unix.O_DIRECTORY, ErrSymlink},
			{d + "/out/passwd", unix.O_PATH, ErrSymlink},
			{d + "/sub/../f", unix.O_PATH, ErrBadPath},
			{"relative/x", unix.O_PATH, ErrBadPath},
			{"", unix.O_PATH, ErrBadPath},
			{d + "/missing", unix.O_PATH, os.ErrNotExist},
			{d + "/f/x", unix.O_PATH, unix.ENOTDIR},
		}
		for _, c := range cases {
			f, err := Open(c.path, c.flags)
			if c.want == nil {
				if err != nil {
					t.Errorf("Open(%q): %v", c.path, err)
					continue
				}
				f.Close()
				continue
			}
			if err == nil {
				f.Close()
				t.Errorf("Open(%q) opened, want %v", c.path, c.want)
			} else if !errors.Is(err, c.want) {
				t.Errorf("Open(%q): %v, want %v", c.path, err, c.want)
			}
		}
	})
}

func TestOpenBeneath(t *testing.T) {
	both(t, func(t *testing.T) {
		d := tree(t)
		root, err := Open(d, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		cases := []struct {
			rel  string
			want error
		}{
			{"", nil}, {".", nil}, {"f", nil}, {"sub/g", nil},
			{"link", ErrSymlink}, {"link/g", ErrSymlink}, {"out/passwd", ErrSymlink},
			{"../x", ErrBadPath}, {"sub/../../x", ErrBadPath}, {"/etc/passwd", ErrBadPath},
			{"nope", os.ErrNotExist},
		}
		for _, c := range cases {
			f, err := OpenBeneath(root, c.rel, unix.O_PATH)
			if c.want == nil {
				if err != nil {
					t.Errorf("OpenBeneath(%q): %v", c.rel, err)
				} else {
					f.Close()
				}
				continue
			}
			if err == nil {
				f.Close()
				t.Errorf("OpenBeneath(%q) opened, want %v", c.rel, c.want)
			} else if !errors.Is(err, c.want) {
				t.Errorf("OpenBeneath(%q): %v, want %v", c.rel, err, c.want)
			}
		}
	})
}

// Identity: what was opened is compared by (device, inode), through
// symlinked names too; Within climbs ".." only.
func TestWithinAndRealPath(t *testing.T) {
	d := tree(t)
	sub, err := Open(d+"/sub", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	top, _ := Open(d, unix.O_PATH|unix.O_DIRECTORY)
	defer top.Close()
	topID, _ := ID(top)
	subID, _ := ID(sub)
	if linkID, err := StatID(d + "/link"); err != nil || linkID != subID {
		t.Errorf("StatID through a symlink: %v %v, want %v", linkID, err, subID)
	}
	for _, c := range []struct {
		dir  *os.File
		anc  Identity
		want bool
	}{
		{sub, topID, true}, {sub, subID, true}, {top, subID, false}, {top, topID, true},
	} {
		if got, err := Within(c.dir, c.anc); err != nil || got != c.want {
			t.Errorf("Within(%s, %v) = %v %v, want %v", c.dir.Name(), c.anc, got, err, c.want)
		}
	}
	if got, err := WithinPath(sub, d+"/link"); err != nil || !got {
		t.Errorf("WithinPath(sub, link to sub) = %v %v", got, err)
	}
	if got, err := WithinPath(sub, d+"/missing"); err != nil || got {
		t.Errorf("WithinPath(missing) = %v %v", got, err)
	}
	if p, err := RealPath(sub); err != nil || p != d+"/sub" {
		t.Errorf("RealPath = %q %v", p, err)
	}
}

func TestComponents(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // joined by |, or "ERR"
	}{
		{"/a/b", "a|b"}, {"a//b/./c/", "a|b|c"}, {".", ""}, {"/", ""},
		{"..", "ERR"}, {"a/../b", "ERR"}, {"", "ERR"}, {"a\x00b", "ERR"}, {"...", "..."},
	} {
		got, err := Components(c.in)
		s := strings.Join(got, "|")
		if err != nil {
			s = "ERR"
		}
		if s != c.want {
			t.Errorf("Components(%q) = %q, want %q", c.in, s, c.want)
		}
	}
}

func FuzzComponents(f *testing.F) {
	for _, s := range []string{"/a/b", "a//b/./c/", "..", "a/../b", "", "a\x00b", "...", "/./"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := Components(s)
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") {
				t.Fatalf("Components(%q) yielded %q", s, n)
			}
		}
		if j := filepath.Join(append([]string{"/r"}, names...)...); j != "/r" && !strings.HasPrefix(j, "/r/") {
			t.Fatalf("Components(%q) escapes: %q", s, j)
		}
	})
}

// TestAncestorsDeep: the climb by "../.." paths gives the identities an
// open-and-stat climb of every parent gives, also past the depth where its
// path is restarted from an anchor (climbRestart), and in order.
func TestAncestorsDeep(t *testing.T) {
	const depth = 1500 // "../" × 1500 passes climbRestart once, and PATH_MAX
	top, err := Open(t.TempDir(), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	cur, err := unix.Openat(int(top.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < depth; i++ {
		if err := unix.Mkdirat(cur, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(cur, "d", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(cur)
		if err != nil {
			t.Fatal(err)
		}
		cur = next
	}
	deep := os.NewFile(uintptr(cur), "deep")
	defer deep.Close()
	got, err := Ancestors(deep)
	if err != nil {
		t.Fatal(err)
	}
	// The reference: open "..", stat, close, up to "/".
	var want []Identity
	fd, _ := unix.Openat(cur, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		id := Identity{Dev: st.Dev, Ino: st.Ino}
		if len(want) > 0 && want[len(want)-1] == id {
			break
		}
		want = append(want, id)
		up, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = up
	}
	unix.Close(fd)
	if !slices.Equal(got, want) {
		t.Fatalf("Ancestors: %d identities, the reference climb %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	topID, _ := ID(top)
	if len(got) < depth+2 || got[depth] != topID {
		t.Errorf("the test's top is not %d levels up", depth)
	}
}

func firstDiff(a, b []Identity) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
