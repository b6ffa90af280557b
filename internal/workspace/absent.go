package workspace

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// Absent sources are what a sandbox sees at an absent protected name
// instead of the host's placeholder (README "What the workspace may
// change"): an empty directory, an empty file, and for .mcp.json a file
// declaring no server, read-only, kept in the daemon's runtime directory
// and bound read-only over every placeholder. Below a directory name
// nothing exists (ENOENT) and nothing can be made (EROFS); a file name
// reads as empty (or, for .mcp.json, as JSON that declares nothing, so a
// reader that parses it does not fail) and cannot be written, replaced or
// removed (a mount point). A symlink pointing nowhere would read as ENOENT
// at a file name, but bwrap resolves every bind source with realpath (also
// for --bind-fd), so a dangling one cannot be bound.
//
// Their modes are the mark in-sandbox tools skip them by (sticky,
// read-only); their identities are how the host recognises them through a
// sandbox's root (IsAbsentSource: viewfs answers not-found).
const (
	AbsentDirMode  = 0o1555 // sticky, read-only: an empty directory
	AbsentFileMode = 0o1444 // sticky, read-only: a file
	absentDir      = "absent"
)

// absentJSON is the .mcp.json an absent one reads as.
const absentJSON = "{\"mcpServers\":{}}\n"

var absentIDs sync.Map // safefs.Identity → true: every source made or checked

// absentMu makes creating and checking a source one step: made in three
// (create, write, chmod), a source another run checks halfway is "not as
// made" (runs started together on a fresh node failed so). One daemon
// owns a runtime directory (its lock), so a process-wide lock suffices.
var absentMu sync.Mutex

// AbsentSource opens (O_PATH) the absent source for the protected name
// (its base name), creating it below runtime when missing. A source that
// is not exactly as made (someone wrote into it) is refused.
func AbsentSource(runtime, name string) (*os.File, string, error) {
	absentMu.Lock()
	defer absentMu.Unlock()
	dir := filepath.Join(runtime, absentDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	d, err := safefs.Open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	defer d.Close()
	isDir := IsDirName(name)
	src, mode, content := "file", uint32(AbsentFileMode), ""
	switch {
	case isDir:
		src, mode = "dir", AbsentDirMode
	case name == ".mcp.json":
		src, content = "mcp.json", absentJSON
	}
	if isDir {
		err = unix.Mkdirat(int(d.Fd()), src, 0o700)
	} else {
		var fd int
		fd, err = unix.Openat(int(d.Fd()), src, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			_, err = unix.Write(fd, []byte(content))
			unix.Close(fd)
		}
	}
	if err == nil {
		// The exact mode, past the umask.
		err = unix.Fchmodat(int(d.Fd()), src, mode, 0)
	} else if err == unix.EEXIST {
		err = nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	f, err := safefs.OpenBeneath(d, src, unix.O_PATH)
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
	// A directory's emptiness: no entry (its link count 2 says no
	// subdirectory, the listing no file); a file's: its exact content.
	ok := st.Mode == want
	if ok && isDir {
		ok = st.Nlink == 2 && emptyDir(f)
	} else if ok {
		ok = st.Size == int64(len(content)) && (content == "" || readsAs(f, content))
	}
	if !ok {
		f.Close()
		return nil, "", fmt.Errorf("absent source %s/%s is not as made (mode %o, size %d): remove it", dir, src, st.Mode, st.Size)
	}
	absentIDs.Store(safefs.Identity{Dev: st.Dev, Ino: st.Ino}, true)
	return f, filepath.Join(dir, src), nil
}

// readsAs says whether the file f (O_PATH) holds exactly content.
func readsAs(f *os.File, content string) bool {
	// An O_PATH descriptor is reopened for reading through /proc.
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	r := os.NewFile(uintptr(fd), "absent")
	defer r.Close()
	b := make([]byte, len(content)+1)
	n, _ := io.ReadFull(r, b)
	return string(b[:n]) == content
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
