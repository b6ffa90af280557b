package safefs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// TestReadRegularAt: the same answers as ReadRegular, below a directory
// descriptor, for every kind of entry and limit; errors name the path given.
func TestReadRegularAt(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("0123456789"), 0o644)
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "g"), []byte("gg"), 0o644)
	os.Symlink(filepath.Join(dir, "f"), filepath.Join(dir, "link"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		rel   string
		limit int64
	}{{"f", 4}, {"f", 10}, {"f", 11}, {"f", 1000}, {"empty", 5}, {"sub/g", 5}, {"link", 4}, {"fifo", 4}, {".", 4}, {"sub", 4}, {"absent", 4}, {"sub/absent", 4}} {
		want, werr := readByFile(filepath.Join(dir, c.rel), c.limit)
		got, gerr := ReadRegularAt(int(d.Fd()), c.rel, "shown/"+c.rel, c.limit)
		if string(got) != string(want) || (werr == nil) != (gerr == nil) {
			t.Errorf("%s/%d: %q %v, by an *os.File %q %v", c.rel, c.limit, got, gerr, want, werr)
		}
		for _, e := range []error{syscall.ELOOP, ErrNotRegular, fs.ErrNotExist} {
			if errors.Is(werr, e) != errors.Is(gerr, e) {
				t.Errorf("%s: %v, by an *os.File %v", c.rel, gerr, werr)
			}
		}
		if gerr != nil && !strings.Contains(gerr.Error(), "shown/"+c.rel) {
			t.Errorf("%s: the error does not name the path: %v", c.rel, gerr)
		}
	}
}

// readByFile is the reference ReadRegularAt (and ReadRegular) answer
// to: the file opened as OpenRegular opens it, read through its *os.File.
func readByFile(path string, limit int64) ([]byte, error) {
	f, _, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
