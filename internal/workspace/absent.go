package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// Absent sources are what a sandbox sees at an absent protected name
// instead of the host's placeholder (README "What the workspace may
// change"): one empty directory and one empty file, read-only, kept in the
// daemon's runtime directory and bound read-only over every placeholder.
// Below a directory name nothing exists (ENOENT) and nothing can be made
// (EROFS); a file name reads as an empty file that cannot be written,
// replaced or removed (a mount point). A symlink pointing nowhere would
// read as ENOENT at a file name too, but bwrap resolves every bind source
// with realpath (also for --bind-fd), so a dangling one cannot be bound.
//
// Their modes are the mark in-sandbox tools skip them by (AbsentMode);
// their identities are how the host recognises them through a sandbox's
// root (IsAbsentSource: viewfs answers not-found).
const (
	AbsentDirMode  = 0o1555 // sticky, read-only: an empty directory
	AbsentFileMode = 0o1444 // sticky, read-only: an empty file
	absentDir      = "absent"
)

var absentIDs sync.Map // safefs.Identity → true: every source made or checked

// AbsentSource opens (O_PATH) the absent source for a directory name
// (isDir) or a file name, creating it below runtime when missing. A
// source that is not exactly as made (someone wrote into it) is refused.
func AbsentSource(runtime string, isDir bool) (*os.File, string, error) {
	dir := filepath.Join(runtime, absentDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	d, err := safefs.Open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	defer d.Close()
	name, mode := "file", uint32(AbsentFileMode)
	if isDir {
		name, mode = "dir", AbsentDirMode
	}
	if isDir {
		err = unix.Mkdirat(int(d.Fd()), name, 0o700)
	} else {
		var fd int
		fd, err = unix.Openat(int(d.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
		}
	}
	if err == nil {
		// The exact mode, past the umask.
		err = unix.Fchmodat(int(d.Fd()), name, mode, 0)
	} else if err == unix.EEXIST {
		err = nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	f, err := safefs.OpenBeneath(d, name, unix.O_PATH)
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	want := uint32(unix.S_IFREG) | mode
	if isDir {
		want = unix.S_IFDIR | mode
	}
	// A directory's emptiness: its link count (2: ".", its entry) — a
	// subdirectory adds one; a file below it is caught by the size.
	if st.Mode != want || (!isDir && st.Size != 0) || (isDir && (st.Nlink != 2 || !emptyDir(f))) {
		f.Close()
		return nil, "", fmt.Errorf("absent source %s/%s is not as made (mode %o, size %d): remove it", dir, name, st.Mode, st.Size)
	}
	absentIDs.Store(safefs.Identity{Dev: st.Dev, Ino: st.Ino}, true)
	return f, filepath.Join(dir, name), nil
}

// emptyDir says whether the directory f (O_PATH) has no entries.
func emptyDir(f *os.File) bool {
	fd, err := unix.Openat(int(f.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	d := os.NewFile(uintptr(fd), "absent")
	defer d.Close()
	names, _ := d.Readdirnames(1)
	return len(names) == 0
}

// IsAbsentSource says whether dev/ino is an absent source this process
// bound: seen through a sandbox, the name it is bound at is absent.
func IsAbsentSource(dev, ino uint64) bool {
	_, ok := absentIDs.Load(safefs.Identity{Dev: dev, Ino: ino})
	return ok
}
