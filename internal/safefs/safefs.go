// Package safefs opens host paths without following symlinks — openat2
// RESOLVE_NO_SYMLINKS (and RESOLVE_BENEATH below a directory descriptor),
// or one O_NOFOLLOW component at a time where openat2 is missing — and
// compares what it opened by identity (device, inode), so that what the
// host checks is what it later hands to bwrap.
package safefs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrSymlink is wrapped when a component of the path is a symlink.
var ErrSymlink = errors.New("a symlink in the path (symlinks are never followed)")

// ErrBadPath is wrapped when a path cannot be opened safely as written:
// relative where it must be absolute, with "..", NUL or empty.
var ErrBadPath = errors.New("bad path")

// noOpenat2 is set once openat2 answered ENOSYS (or in tests of the
// fallback); then every path is walked one O_NOFOLLOW component at a time.
var noOpenat2 atomic.Bool

// Components splits a path into its names: empty names and "." are dropped;
// ".." and NUL are refused, so nothing built from the names can climb out
// of where it starts.
func Components(path string) ([]string, error) {
	if path == "" || strings.IndexByte(path, 0) >= 0 {
		return nil, fmt.Errorf("path %q: %w", path, ErrBadPath)
	}
	var out []string
	for _, c := range strings.Split(path, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("path %q: \"..\" is refused: %w", path, ErrBadPath)
		}
		out = append(out, c)
	}
	return out, nil
}

// Open opens the absolute path with no symlink in any of its components.
// flags are open(2) flags (typically unix.O_PATH, with unix.O_DIRECTORY for
// a directory); O_CLOEXEC and O_NOFOLLOW are always added.
func Open(path string, flags int) (*os.File, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path %q: not absolute: %w", path, ErrBadPath)
	}
	names, err := Components(path)
	if err != nil {
		return nil, err
	}
	return open(unix.AT_FDCWD, "/", names, flags, unix.RESOLVE_NO_SYMLINKS, path)
}

// OpenBeneath opens rel below dir with no symlink in any component and
// without leaving dir (RESOLVE_BENEATH; ".." is refused outright).
// rel "" or "." opens dir itself again.
func OpenBeneath(dir *os.File, rel string, flags int) (*os.File, error) {
	if strings.HasPrefix(rel, "/") {
		return nil, fmt.Errorf("path %q: not relative: %w", rel, ErrBadPath)
	}
	if rel == "" {
		rel = "."
	}
	names, err := Components(rel)
	if err != nil {
		return nil, err
	}
	return open(int(dir.Fd()), "", names, flags, unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_BENEATH, dir.Name()+"/"+rel)
}

func open(dirfd int, prefix string, names []string, flags int, resolve uint64, label string) (*os.File, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		p := prefix + strings.Join(names, "/")
		if p == "" {
			p = "."
		}
		for {
			fd, err := unix.Openat2(dirfd, p, &unix.OpenHow{Flags: uint64(flags), Resolve: resolve})
			if err == unix.EINTR || err == unix.EAGAIN {
				continue // EAGAIN: a concurrent rename raced the lookup; try again
			}
			if err == unix.ENOSYS {
				noOpenat2.Store(true)
				break
			}
			if err == unix.ELOOP {
				return nil, fmt.Errorf("%s: %w", label, ErrSymlink)
			}
			if err == unix.ENOTDIR {
				// O_DIRECTORY|O_NOFOLLOW on a final symlink says ENOTDIR.
				var st unix.Stat_t
				if unix.Fstatat(dirfd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return nil, fmt.Errorf("%s: %w", label, ErrSymlink)
				}
			}
			if err != nil {
				return nil, &os.PathError{Op: "openat2", Path: label, Err: err}
			}
			return checkedFile(fd, flags, label)
		}
	}
	return walk(dirfd, prefix, names, flags, label)
}

// walk is the fallback: one openat per component, each O_NOFOLLOW, the
// intermediate ones O_PATH|O_DIRECTORY.
func walk(dirfd int, prefix string, names []string, flags int, label string) (*os.File, error) {
	cur := -1
	var err error
	if prefix == "/" {
		cur, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		cur, err = unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: label, Err: err}
	}
	if len(names) == 0 {
		fd, err := unix.Openat(cur, ".", flags&^unix.O_NOFOLLOW, 0)
		unix.Close(cur)
		if err != nil {
			return nil, &os.PathError{Op: "openat", Path: label, Err: err}
		}
		return checkedFile(fd, flags, label)
	}
	for i, n := range names {
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(names)-1 {
			f = flags
		}
		next, err := unix.Openat(cur, n, f, 0)
		if err == unix.ENOTDIR || err == unix.ELOOP {
			var st unix.Stat_t
			if unix.Fstatat(cur, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				unix.Close(cur)
				return nil, fmt.Errorf("%s: %w", label, ErrSymlink)
			}
		}
		unix.Close(cur)
		if err != nil {
			return nil, &os.PathError{Op: "openat", Path: label, Err: err}
		}
		cur = next
	}
	return checkedFile(cur, flags, label)
}

// checkedFile refuses an O_PATH descriptor of a symlink (O_PATH|O_NOFOLLOW
// opens the link itself) and wraps fd.
func checkedFile(fd, flags int, label string) (*os.File, error) {
	if flags&unix.O_PATH != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "fstat", Path: label, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: %w", label, ErrSymlink)
		}
	}
	return os.NewFile(uintptr(fd), label), nil
}

// Identity names a file by device and inode.
type Identity struct{ Dev, Ino uint64 }

// ID is f's identity.
func ID(f *os.File) (Identity, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return Identity{}, fmt.Errorf("fstat %s: %w", f.Name(), err)
	}
	return Identity{Dev: st.Dev, Ino: st.Ino}, nil
}

// StatID is the identity of what path names, following symlinks (for the
// runtime's own roots, which may be reached through a symlink).
func StatID(path string) (Identity, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Identity{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return Identity{Dev: st.Dev, Ino: st.Ino}, nil
}

// RealPath is where the kernel says f is (/proc/self/fd), refused when
// the file was deleted.
func RealPath(f *os.File) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", fmt.Errorf("real path of %s: %w", f.Name(), err)
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return "", fmt.Errorf("real path of %s: %q is not a live path", f.Name(), p)
	}
	return p, nil
}

// Dup is a descriptor of f's file of its own, close-on-exec (a registry
// or a sandbox keeps it past the caller's Close).
func Dup(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// maxDepth bounds the walk up a directory tree.
const maxDepth = 4096

// Within reports whether the directory dir lies at or below the directory
// with identity anc, by climbing ".." from dir (no names, no symlinks).
func Within(dir *os.File, anc Identity) (bool, error) {
	chain, err := Ancestors(dir)
	if err != nil {
		return false, err
	}
	return slices.Contains(chain, anc), nil
}

// Ancestors is the identity of the directory dir and of each directory
// above it up to "/", climbing ".." (no names, no symlinks): one climb
// answers every Within question about dir. Each level is one fstatat of
// "..", "../..", … from dir — the kernel resolves each ".." as an openat
// of ".." would, crossing mounts the same way — instead of an open, a
// stat and a close of every parent. The path is restarted from an opened
// anchor before it nears PATH_MAX.
func Ancestors(dir *os.File) ([]Identity, error) {
	anchor := int(dir.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(anchor, &st); err != nil {
		return nil, fmt.Errorf("within %s: %w", dir.Name(), err)
	}
	chain := []Identity{{Dev: st.Dev, Ino: st.Ino}}
	own := -1 // an anchor opened here, closed at the end
	defer func() {
		if own >= 0 {
			unix.Close(own)
		}
	}()
	up := make([]byte, 0, 64)
	for i := 0; i < maxDepth; i++ {
		if len(up)+3 > climbRestart {
			fd, err := unix.Openat(anchor, string(up), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, fmt.Errorf("within %s: %w", dir.Name(), err)
			}
			if own >= 0 {
				unix.Close(own)
			}
			anchor, own, up = fd, fd, up[:0]
		}
		if len(up) > 0 {
			up = append(up, '/')
		}
		up = append(up, '.', '.')
		if err := unix.Fstatat(anchor, string(up), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, fmt.Errorf("within %s: %w", dir.Name(), err)
		}
		id := Identity{Dev: st.Dev, Ino: st.Ino}
		if id == chain[len(chain)-1] {
			return chain, nil // "/" is its own parent
		}
		chain = append(chain, id)
	}
	return nil, fmt.Errorf("within %s: deeper than %d levels", dir.Name(), maxDepth)
}

// climbRestart: the longest "../.." path Ancestors resolves from one
// anchor, well inside PATH_MAX (4096).
const climbRestart = 3000

// WithinPath is Within for an ancestor named by path (followed: the
// runtime's roots may be reached through a symlink). A missing ancestor
// contains nothing.
func WithinPath(dir *os.File, anc string) (bool, error) {
	id, err := StatID(anc)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return Within(dir, id)
}

// ReadDirents reads all entries of the directory fd with getdents64
// into buf (reused by the caller across directories) and calls fn with
// each one's name (valid only during the call) and dirent type (DT_*,
// DT_UNKNOWN where the filesystem does not say), "." and ".." left out,
// in directory order. It stops at fn's first error and returns it.
func ReadDirents(fd int, buf []byte, fn func(name []byte, typ byte) error) error {
	return ReadDirentsIno(fd, buf, func(name []byte, _ uint64, typ byte) error { return fn(name, typ) })
}

// ReadDirentsIno is ReadDirents with each entry's inode number as its
// directory holds it: for a name a mount covers, the covered file's, not
// the mount's (what stat shows).
func ReadDirentsIno(fd int, buf []byte, fn func(name []byte, ino uint64, typ byte) error) error {
	for {
		k, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("getdents64", err)
		}
		if k <= 0 {
			return nil
		}
		for off := 0; off < k; {
			// struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > k {
				return errors.New("getdents64: malformed entry")
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if err := fn(name, binary.NativeEndian.Uint64(buf[off-reclen:]), typ); err != nil {
				return err
			}
		}
	}
}

// DirentType is the dirent type (DT_*) of a stat mode.
func DirentType(mode uint32) byte {
	switch mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return unix.DT_BLK
	case unix.S_IFCHR:
		return unix.DT_CHR
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	}
	return unix.DT_UNKNOWN
}
