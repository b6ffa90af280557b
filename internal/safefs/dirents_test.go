package safefs

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadDirents: every entry once, with its type, "." and ".." left
// out, across many getdents calls of a small buffer; fn's error stops it.
func TestReadDirents(t *testing.T) {
	dir := t.TempDir()
	want := map[string]byte{}
	for i := range 50 {
		n := "file-with-a-longish-name-" + strconv.Itoa(i)
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
		want[n] = unix.DT_REG
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	want["d"] = unix.DT_DIR
	os.Symlink("d", filepath.Join(dir, "l"))
	want["l"] = unix.DT_LNK
	syscall.Mkfifo(filepath.Join(dir, "f"), 0o600)
	want["f"] = unix.DT_FIFO
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	got := map[string]byte{}
	if err := ReadDirents(fd, make([]byte, 512), func(name []byte, typ byte) error {
		if _, dup := got[string(name)]; dup {
			t.Errorf("%q twice", name)
		}
		got[string(name)] = typ
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for n, typ := range want {
		if g, ok := got[n]; !ok || (g != typ && g != unix.DT_UNKNOWN) {
			t.Errorf("%s: type %d, want %d (present %v)", n, g, typ, ok)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d: %v", len(got), len(want), slices.Collect(func(yield func(string) bool) {
			for n := range got {
				if !yield(n) {
					return
				}
			}
		}))
	}
	fd2, _ := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	defer unix.Close(fd2)
	calls, stop := 0, os.ErrClosed
	if err := ReadDirents(fd2, make([]byte, 4096), func([]byte, byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("fn's error: %v after %d calls", err, calls)
	}
	if DirentType(unix.S_IFDIR|0o755) != unix.DT_DIR || DirentType(unix.S_IFLNK) != unix.DT_LNK || DirentType(0) != unix.DT_UNKNOWN {
		t.Error("DirentType")
	}
}

// TestReadDirentsIno: the inode number each entry is listed with is the
// one stat gives it (a mount would change what stat gives, not that).
func TestReadDirentsIno(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		os.Mkdir(filepath.Join(dir, n), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	seen := 0
	if err := ReadDirentsIno(fd, make([]byte, 64), func(name []byte, ino uint64, _ byte) error {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, string(name)), &st); err != nil || st.Ino != ino {
			t.Errorf("%s listed as inode %d, stat %d (%v)", name, ino, st.Ino, err)
		}
		seen++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != 4 {
		t.Errorf("%d entries listed, want 4", seen)
	}
}
