package safefs

import (
	"errors"
	"fmt"
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
// opened as OpenRegular does (ReadRegularAt: no *os.File, its size read
// once).
func ReadRegular(path string, limit int64) ([]byte, error) {
	return ReadRegularAt(unix.AT_FDCWD, path, path, limit)
}

// ReadRegularAt reads at most limit bytes of rel below the directory
// descriptor dirfd, opened as OpenRegular opens a path (the last
// component never followed, a FIFO never blocking, anything but a regular
// file refused with ErrNotRegular), without an *os.File: a caller reading
// many small files of one directory pays no path walk from / and no
// poller registration for each. Errors are *fs.PathError naming path.
func ReadRegularAt(dirfd int, rel, path string, limit int64) ([]byte, error) {
	fd, err := unix.Openat(dirfd, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	for err == unix.EINTR { // as os.OpenFile does (a FUSE or network filesystem, Go's own preemption signals)
		fd, err = unix.Openat(dirfd, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	var out []byte
	buf := make([]byte, min(limit, max(st.Size+1, 512)))
	for int64(len(out)) < limit {
		n, err := unix.Read(fd, buf[:min(int64(len(buf)), limit-int64(len(out)))])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	return out, nil
}
