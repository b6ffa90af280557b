package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is wrapped when a file that must be a regular file is a
// directory, FIFO, device or socket.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path for reading the way every file an agent could
// have planted is read (one copy of this block): its last
// component is never followed (a symlink fails with ELOOP), a FIFO never
// blocks the open (O_NONBLOCK), and anything but a regular file is refused
// with ErrNotRegular. Open errors keep their *fs.PathError, so
// errors.Is(err, fs.ErrNotExist) tells an absent file.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	return f, st, nil
}

// ReadRegular reads at most limit bytes of the regular file at path,
// opened as OpenRegular does.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, _, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
