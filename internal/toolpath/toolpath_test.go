package toolpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func writeTool(t *testing.T, dir, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+name+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func self(t *testing.T) Identity {
	t.Helper()
	id, err := CurrentIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func wantLayer(t *testing.T, err error, layer string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want refusal by %s, got nil", layer)
	}
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("want *Refusal, got %T %v", err, err)
	}
	if r.Layer != layer {
		t.Fatalf("want layer %s, got %s (%v)", layer, r.Layer, err)
	}
	if !strings.Contains(err.Error(), layer) {
		t.Fatalf("error %q does not name layer %s", err, layer)
	}
}

func TestSplitPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"/a:/b", []string{"/a", "/b"}},
		{"/a::/b:", []string{"/a", "/b"}},   // empty entries never mean cwd
		{"rel:/a:./x:../y", []string{"/a"}}, // spec: D5 relative entries dropped
		{"/a/../b/", []string{"/b"}},
	} {
		got := SplitPath(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("SplitPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResolveFirstMatchWins(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTool(t, b, "x", 0o755)
	writeTool(t, a, "x", 0o755)
	tool, err := Resolve("x", []string{"/nonexistent", a, b}, self(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	if tool.Dir != a || tool.Path != filepath.Join(a, "x") || tool.Name != "x" {
		t.Fatalf("got %+v", tool)
	}
}

// A refused first match is reported, not skipped for a later directory.
func TestResolveRefusedMatchNotSkipped(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(a, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTool(t, b, "x", 0o755)
	_, err := Resolve("x", []string{a, b}, self(t))
	wantLayer(t, err, LayerRegular)
}

func TestResolveLayers(t *testing.T) {
	dir := t.TempDir()
	writeTool(t, dir, "ok", 0o755)
	target := writeTool(t, dir, "target", 0o755)
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTool(t, dir, "noexecbits", 0o644)
	other := Identity{UID: 54321, GID: 54321}

	for _, tc := range []struct {
		name, tool string
		id         Identity
		layer      string // "" = allowed
		exit       int
	}{
		{"allowed", "ok", self(t), "", 0},
		{"not on path", "missing", self(t), LayerPath, 127},  // spec: K3 exit 127
		{"bad name", "../ok", self(t), LayerName, 127},       // cannot escape a directory
		{"dot name", ".hidden", self(t), LayerName, 127},     // layout.CheckName
		{"symlink", "link", self(t), LayerNoFollow, 126},     // spec: V3 nofollow
		{"directory", "adir", self(t), LayerRegular, 126},    // spec: V3 regular file
		{"fifo", "fifo", self(t), LayerRegular, 126},         // spec: V3 regular file
		{"no x bits", "noexecbits", self(t), LayerMode, 126}, // spec: V3 mode bits
		{"other uid, no other-x", "noexecbits", other, LayerMode, 126},
		{"other uid, 0755", "ok", other, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := Resolve(tc.tool, []string{dir}, tc.id)
			if tc.layer == "" {
				if err != nil {
					t.Fatal(err)
				}
				tool.Close()
				return
			}
			wantLayer(t, err, tc.layer)
			if got := ExitCode(err); got != tc.exit {
				t.Fatalf("exit %d, want %d", got, tc.exit)
			}
			if LayerOf(err) != tc.layer {
				t.Fatalf("LayerOf = %q", LayerOf(err))
			}
		})
	}
}

// spec: V3 — mode bits that deny a given uid, in a real file.
func TestResolveModeDeniesUID(t *testing.T) {
	dir := t.TempDir()
	p := writeTool(t, dir, "owneronly", 0o700)
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	owner := Identity{UID: int(st.Uid), GID: int(st.Gid)}
	if owner.UID == 0 {
		owner.UID = 1 // root passes any x bit; test the owner class with a non-root owner id
		if err := os.Chown(p, 1, int(st.Gid)); err != nil {
			t.Skipf("cannot chown as root-owned test: %v", err)
		}
	}
	tool, err := Resolve("owneronly", []string{dir}, owner)
	if err != nil {
		t.Fatalf("owner refused: %v", err)
	}
	tool.Close()
	_, err = Resolve("owneronly", []string{dir}, Identity{UID: 4242, GID: 4242, Groups: []int{int(st.Gid)}})
	wantLayer(t, err, LayerMode)
}

func TestCanExec(t *testing.T) {
	st := func(mode uint32, uid, gid uint32) *unix.Stat_t {
		return &unix.Stat_t{Mode: unix.S_IFREG | mode, Uid: uid, Gid: gid}
	}
	for _, tc := range []struct {
		name string
		st   *unix.Stat_t
		id   Identity
		want bool
	}{
		{"root any x", st(0o001, 1, 1), Identity{UID: 0}, true},
		{"root no x", st(0o644, 0, 0), Identity{UID: 0}, false},
		{"owner x", st(0o700, 10, 10), Identity{UID: 10, GID: 99}, true},
		{"owner class wins over other", st(0o071, 10, 10), Identity{UID: 10, GID: 10}, false},
		{"group primary", st(0o010, 1, 20), Identity{UID: 10, GID: 20}, true},
		{"group supplementary", st(0o010, 1, 20), Identity{UID: 10, GID: 30, Groups: []int{5, 20}}, true},
		{"group class wins over other", st(0o701, 1, 20), Identity{UID: 10, GID: 20}, false},
		{"other", st(0o001, 1, 20), Identity{UID: 10, GID: 30}, true},
		{"nothing", st(0o770, 1, 20), Identity{UID: 10, GID: 30}, false},
	} {
		if got := CanExec(tc.st, tc.id); got != tc.want {
			t.Errorf("%s: CanExec = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// spec: V3 noexec placement — a tool on a noexec tmpfs is refused.
func TestResolveNoExecMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a noexec tmpfs needs root; run the tests as root to cover the noexec layer")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Skipf("cannot mount tmpfs here (%v); the noexec layer is covered only where mounting is allowed", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	writeTool(t, dir, "tool", 0o755)
	_, err := Resolve("tool", []string{dir}, self(t))
	wantLayer(t, err, LayerNoExec)
}

func TestOpenCheckedDescriptorIsTheFile(t *testing.T) {
	dir := t.TempDir()
	p := writeTool(t, dir, "x", 0o755)
	tool, err := OpenChecked(p, self(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	// Swap the path after the check: the descriptor still names the old inode.
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	writeTool(t, dir, "x", 0o755)
	var st unix.Stat_t
	if err := unix.Fstat(int(tool.File.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino != tool.Stat.Ino {
		t.Fatal("descriptor changed inode")
	}
	flags, err := unix.FcntlInt(tool.File.Fd(), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("checked descriptor must be close-on-exec")
	}
}

func TestMeta(t *testing.T) {
	dir := t.TempDir()
	writeTool(t, dir, "a", 0o755)
	if err := os.Mkdir(filepath.Join(dir, "a.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(MetaPath(dir, "a"), []byte(`{"description":"does a","extra":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMeta(dir, "a")
	if err != nil || m.Description != "does a" {
		t.Fatalf("ReadMeta = %+v, %v", m, err)
	}
	if m, err := ReadMeta(dir, "missing"); err != nil || m.Description != "" {
		t.Fatalf("missing meta = %+v, %v", m, err)
	}
	if err := os.WriteFile(MetaPath(dir, "a"), []byte(`{"description":"`+strings.Repeat("x", MaxMetaSize)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMeta(dir, "a"); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("oversized meta: %v", err)
	}
	if err := os.WriteFile(MetaPath(dir, "a"), []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMeta(dir, "a"); err == nil {
		t.Fatal("malformed meta accepted")
	}
}

func TestList(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTool(t, a, "x", 0o755)
	writeTool(t, b, "x", 0o755)
	writeTool(t, b, "y", 0o644)
	writeTool(t, b, ".hidden", 0o755)
	if err := os.Mkdir(filepath.Join(b, "y.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(MetaPath(b, "y"), []byte(`{"description":"why"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := List([]string{a, "relative", b}, Identity{UID: 777, GID: 777})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Name != "x" || es[0].Dir != a || es[0].Err != nil ||
		es[1].Name != "y" || LayerOf(es[1].Err) != LayerMode || es[1].Meta.Description != "why" {
		t.Fatalf("List = %+v", es)
	}
}
