package holdfifo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Release writes its one byte only to a FIFO someone reads: no reader and
// the process gone, or no reader in time, or something that is not a FIFO
// at the path, is an error and nothing is written. spec: U2 B1
func TestRelease(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "view.fifo")
	if err := Make(p); err != nil {
		t.Fatal(err)
	}
	if err := Make(p); err != nil { // a stale one is replaced
		t.Fatalf("again: %v", err)
	}
	if err := Release(p, func() bool { return false }, time.Second); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("no reader, process gone: %v", err)
	}
	if err := Release(p, func() bool { return true }, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no reader") {
		t.Errorf("no reader in time: %v", err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := Release(p, func() bool { return true }, time.Second); err != nil {
		t.Fatalf("with a reader: %v", err)
	}
	var b [2]byte
	if n, err := unix.Read(fd, b[:]); n != 1 || err != nil {
		t.Errorf("the reader got %d bytes (%v), want 1", n, err)
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Release(f, func() bool { return true }, time.Second); err == nil {
		t.Error("a regular file was released into")
	}
	if st, _ := os.Stat(f); st.Size() != 0 {
		t.Errorf("the regular file was written: %d bytes", st.Size())
	}
}
