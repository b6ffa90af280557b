package prompt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
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

// osFS reads the host filesystem. Below any of roots (the workspace, the
// agent home, CTX_HOME — directories the sandbox can write into) a
// nofollow open and a readDir refuse a symlink in every path component, not
// only the last: the host resolves a planted link, the sandbox never does,
// so `.agents -> /home/me/private` would otherwise pull host files into the
// prompt. Each component is opened with openat(O_NOFOLLOW) from the one
// before, so a link swapped in mid-walk is refused too.
type osFS struct{ roots []string }

func (o osFS) open(path string, nofollow bool) (io.ReadCloser, error) {
	var f *os.File
	if root, rel, ok := o.beneath(path); nofollow && ok {
		var err error
		if f, err = openBeneath(root, rel, false); err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	} else {
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
		f = os.NewFile(uintptr(fd), path)
	}
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

func (o osFS) readDir(path string) ([]fs.DirEntry, error) {
	root, rel, ok := o.beneath(path)
	if !ok {
		return os.ReadDir(path)
	}
	f, err := openBeneath(root, rel, true)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, err
}

func (osFS) lstat(path string) (fs.FileInfo, error) { return os.Lstat(path) }

// beneath finds the longest root holding path and the path relative to it.
func (o osFS) beneath(path string) (root, rel string, ok bool) {
	path = filepath.Clean(path)
	for _, r := range o.roots {
		if r == "" {
			continue
		}
		r = filepath.Clean(r)
		if within(path, r) && len(r) > len(root) {
			root, ok = r, true
		}
	}
	if !ok {
		return "", "", false
	}
	rel, err := filepath.Rel(root, path)
	return root, rel, err == nil
}

// openBeneath opens root/rel refusing a symlink in any component of rel.
// root itself is chosen by the host and opened normally.
func openBeneath(root, rel string, dir bool) (*os.File, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if rel == "." {
		parts = nil
	}
	for i, c := range parts {
		if c == "" || c == "." || c == ".." {
			unix.Close(fd)
			return nil, errNotRegular
		}
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
		if i < len(parts)-1 || dir {
			flags |= unix.O_DIRECTORY
		}
		next, err := unix.Openat(fd, c, flags, 0)
		unix.Close(fd)
		if err != nil {
			// A symlink component fails with ELOOP (or ENOTDIR where a
			// directory is required): refused either way, never followed.
			if errors.Is(err, unix.ELOOP) {
				return nil, errSymlink
			}
			return nil, err
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

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
