package safefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenRegular: a regular file is read (bounded); a symlink, a FIFO and
// a directory are refused without blocking; an absent file is ErrNotExist.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("0123456789"), 0o644)
	os.Symlink(filepath.Join(dir, "f"), filepath.Join(dir, "link"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRegular(filepath.Join(dir, "f"), 4); err != nil || string(b) != "0123" {
		t.Fatalf("read: %q %v", b, err)
	}
	for name, want := range map[string]error{"link": syscall.ELOOP, "fifo": ErrNotRegular, ".": ErrNotRegular, "absent": fs.ErrNotExist} {
		if _, err := ReadRegular(filepath.Join(dir, name), 4); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}
