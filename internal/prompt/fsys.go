package prompt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"unicode/utf8"
)

// fileSystem is the little the renderer reads through, so tests can count
// opens and bytes (R2: full SKILL.md bodies are never read).
type fileSystem interface {
	// open opens a regular file for reading. With nofollow a symlink as the
	// last path component is refused, so a workspace cannot point AGENTS.md
	// or SKILL.md at a private file and have it sent to a provider.
	open(path string, nofollow bool) (io.ReadCloser, error)
	readDir(path string) ([]fs.DirEntry, error)
	lstat(path string) (fs.FileInfo, error)
}

type osFS struct{}

func (osFS) open(path string, nofollow bool) (io.ReadCloser, error) {
	flags := syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NONBLOCK // NONBLOCK: a FIFO never hangs a build
	if nofollow {
		flags |= syscall.O_NOFOLLOW
	}
	fd, err := syscall.Open(path, flags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = errSymlink
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	return f, nil
}

func (osFS) readDir(path string) ([]fs.DirEntry, error) { return os.ReadDir(path) }
func (osFS) lstat(path string) (fs.FileInfo, error)     { return os.Lstat(path) }

var (
	errSymlink    = errors.New("is a symlink (not followed)")
	errNotRegular = errors.New("not a regular file")
)

// readBounded reads at most limit bytes of path; truncated reports that the
// file holds more. A missing file is (nil, false, err) with fs.ErrNotExist.
func readBounded(fsys fileSystem, path string, limit int, nofollow bool) (b []byte, truncated bool, err error) {
	f, err := fsys.open(path, nofollow)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > limit {
		return b[:limit], true, nil
	}
	return b, false, nil
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutText shortens s to at most max bytes, ending with a visible marker that
// says what was cut. Below the marker's own size nothing is kept.
func cutText(s string, max int, what string) string {
	if len(s) <= max {
		return s
	}
	marker := func(kept int) string {
		return fmt.Sprintf("\n[… %s cut by ctx: %d of %d bytes shown]", what, kept, len(s))
	}
	room := max - len(marker(len(s))) // widest marker
	if room <= 0 {
		return ""
	}
	kept := cutUTF8(s, room)
	return kept + marker(len(kept))
}
