package proc

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/safefs"
)

// checkView waits until the held sandbox whose first process is child has
// made its view, then checks the spec's anchors in it (bwrap.Anchor):
// each protected mount below a writable directory must be read-only, show
// what was bound, and sit in the directory the walk found it in. bwrap
// mounts by destination path, so a directory moved on the host between
// the walk and the mount would leave the repository it holds writable
// under its new name. The view is final once the child has pivoted into
// it (bwrap makes every mount first, then pivots, then reads its block):
// its root is then neither the host's nor bwrap's staging directory (which
// holds newroot/). A child gone before that ran nothing and never will:
// bwrap failed, and says why on its stderr. spec: B1
func checkView(child int, anchors []bwrap.Anchor, timeout time.Duration) error {
	var host unix.Stat_t
	if err := unix.Stat("/", &host); err != nil {
		return fmt.Errorf("view check: %w", err)
	}
	rootPath := "/proc/" + strconv.Itoa(child) + "/root"
	t0 := time.Now()
	deadline := t0.Add(timeout)
	// bwrap takes several milliseconds to make a view (a mount costs it
	// ~0.2 ms): the first look comes after three quarters of the time the
	// last views took, then one every 50 µs, so the daemon does not wake
	// throughout bwrap's work. Waiting for the view costs a tool call in
	// a workspace with nested repositories ~0.5 ms (~2 %,
	// BenchmarkToolCallNestedRepos); polling the child's mountinfo
	// instead (POLLPRI at each of its ~80 mounts) cost more on two cores.
	if d := time.Duration(viewTime.Load()) * 3 / 4; d > 0 {
		nanosleep(min(d, timeout))
	}
	var root int
	for {
		fd, err := unix.Open(rootPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
				return nil // bwrap's child is gone: nothing runs
			}
			return fmt.Errorf("view check: %w", err)
		}
		var st, staged unix.Stat_t
		if unix.Fstat(fd, &st) == nil && (st.Dev != host.Dev || st.Ino != host.Ino) &&
			unix.Fstatat(fd, "newroot", &staged, unix.AT_SYMLINK_NOFOLLOW) == unix.ENOENT {
			root = fd
			break
		}
		unix.Close(fd)
		if time.Now().After(deadline) {
			return errors.New("view check: the sandbox did not make its view in " + timeout.String())
		}
		nanosleep(50 * time.Microsecond)
	}
	// A moving average of the time views take, to sleep on next time.
	took := int64(time.Since(t0))
	if old := viewTime.Load(); old > 0 {
		took = (7*old + took) / 8
	}
	viewTime.Store(took)
	rf := os.NewFile(uintptr(root), rootPath)
	defer rf.Close()
	var dir *os.File
	dirName := ""
	defer func() {
		if dir != nil {
			dir.Close()
		}
	}()
	for _, a := range anchors {
		if d := path.Dir(a.Dst); d != dirName || dir == nil {
			if dir != nil {
				dir.Close()
				dir = nil
			}
			dirName = d
			f, err := safefs.OpenBeneath(rf, strings.TrimPrefix(d, "/"), unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				return fmt.Errorf("%s: %w (%v)", d, bwrap.ErrMoved, err)
			}
			dir = f
			if id, err := safefs.ID(dir); err != nil || bwrap.FileID(id) != a.Dir {
				return fmt.Errorf("%s is not the directory the walk found: %w", d, bwrap.ErrMoved)
			}
		}
		if err := checkAnchor(dir, a); err != nil {
			return err
		}
	}
	return nil
}

// viewTime is a moving average of how long views took to be made, from
// bwrap's child known to its view final (ns).
var viewTime atomic.Int64

// nanosleep sleeps d on the calling thread: the runtime's timers wake no
// sooner than a millisecond from an idle poller.
func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// checkAnchor checks one anchor in its directory, already checked.
func checkAnchor(dir *os.File, a bwrap.Anchor) error {
	fd, err := unix.Openat(int(dir.Fd()), path.Base(a.Dst), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w (%v)", a.Dst, bwrap.ErrMoved, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	var fs unix.Statfs_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("view check %s: %w", a.Dst, err)
	}
	if (bwrap.FileID{Dev: st.Dev, Ino: st.Ino}) != a.Mounted {
		return fmt.Errorf("%s is not what was bound there: %w", a.Dst, bwrap.ErrMoved)
	}
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("view check %s: %w", a.Dst, err)
	}
	if fs.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("%s is writable: %w", a.Dst, bwrap.ErrMoved)
	}
	return nil
}
