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
// each protected mount below a writable directory must be read-only (a
// pin may be writable), show what was bound, sit in the directory the
// walk found it in, and cover the entry found there. bwrap
// mounts by destination path, so a directory moved on the host between
// the walk and the mount would leave the repository it holds writable
// under its new name. The view is final once the child has pivoted into
// it (bwrap makes every mount first, then pivots, then reads its block):
// its root is then neither the host's nor bwrap's staging directory (which
// holds newroot/). A child gone before that ran nothing and never will:
// bwrap failed, and says why on its stderr (bwrap.ErrNoView). spec: B1
func checkView(child int, anchors []bwrap.Anchor, timeout time.Duration) error {
	return checkViewOf(child, anchors, timeout, true)
}

// CheckView checks the view of a sandbox the daemon did not start itself
// — the terminal's, whose bwrap ctxterm runs and holds (ctxterm
// --view-hold) — once child, bwrap's first process, has made it, as
// checkView does. The caller releases the sandbox only when the view is
// the walk's, and ends it otherwise. spec: B1
func CheckView(child int, anchors []bwrap.Anchor, timeout time.Duration) error {
	return checkViewOf(child, anchors, timeout, false)
}

func checkViewOf(child int, anchors []bwrap.Anchor, timeout time.Duration, learn bool) error {
	var host unix.Stat_t
	if err := unix.Stat("/", &host); err != nil {
		return fmt.Errorf("view check: %w", err)
	}
	rootPath := "/proc/" + strconv.Itoa(child) + "/root"
	// The child pinned: a /proc that does not show it (hidepid, another
	// PID namespace's /proc) must not read as a child gone.
	pidfd, err := unix.PidfdOpen(child, 0)
	switch {
	case err == nil:
		defer unix.Close(pidfd)
	case errors.Is(err, unix.ESRCH):
		return bwrap.ErrNoView // bwrap's child is gone: nothing runs
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		pidfd = -1 // Linux before 5.3, or a seccomp profile that refuses it: /proc alone tells
	default:
		return fmt.Errorf("view check: pidfd_open %d: %w", child, err)
	}
	gone := func(err error) bool {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			return false
		}
		if pidfd < 0 {
			return true
		}
		// A process that is exiting has no root before its pidfd polls
		// readable (the kernel lets go of its filesystem context first):
		// wait for that a while. A child /proc does not show, alive, is
		// not gone.
		pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for end := time.Now().Add(time.Second); ; {
			n, perr := unix.Poll(pfd, 100)
			if perr == nil && n == 1 {
				return true
			}
			if perr != nil && perr != unix.EINTR || time.Now().After(end) {
				return false
			}
		}
	}
	t0 := time.Now()
	deadline := t0.Add(timeout)
	// bwrap takes several milliseconds to make a view (a mount costs it
	// ~0.2 ms): the first look comes after three quarters of the time the
	// last views took, then one every 50 µs, so the daemon does not wake
	// throughout bwrap's work. Waiting for the view costs a tool call in
	// a workspace with nested repositories ~0.5 ms (~2 %,
	// BenchmarkToolCallNestedRepos); polling the child's mountinfo
	// instead (POLLPRI at each of its ~80 mounts) cost more on two cores.
	var slept time.Duration
	if learn {
		slept = time.Duration(viewTime.Load()) * 3 / 4
	}
	if slept > 0 {
		slept = min(slept, maxFirstLook)
		nanosleep(slept)
	}
	var root int
	for looks := 1; ; looks++ {
		fd, err := unix.Open(rootPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if gone(err) {
				return bwrap.ErrNoView // bwrap's child is gone: nothing runs
			}
			return fmt.Errorf("view check: the sandbox's view cannot be seen: %w", err)
		}
		var st, staged unix.Stat_t
		if unix.Fstat(fd, &st) == nil && (st.Dev != host.Dev || st.Ino != host.Ino) &&
			unix.Fstatat(fd, "newroot", &staged, unix.AT_SYMLINK_NOFOLLOW) == unix.ENOENT {
			root = fd
			// A moving average of the time views take, to sleep on next
			// time; a view already made at the first look may have been
			// made much sooner: the estimate halves.
			took := int64(time.Since(t0))
			if old := viewTime.Load(); old > 0 {
				took = (7*old + took) / 8
				if looks == 1 && slept > 0 {
					took = old / 2
				}
			}
			if learn {
				viewTime.Store(min(took, int64(maxFirstLook)))
			}
			break
		}
		unix.Close(fd)
		if time.Now().After(deadline) {
			return errors.New("view check: the sandbox did not make its view in " + timeout.String())
		}
		if time.Since(t0) < slept+maxFirstLook {
			nanosleep(50 * time.Microsecond)
		} else {
			nanosleep(time.Millisecond) // a slow start (a loaded machine) is looked at less often
		}
	}
	rf := os.NewFile(uintptr(root), rootPath)
	defer rf.Close()
	// One look at each directory: the anchors grouped by it.
	byDir := map[string][]bwrap.Anchor{}
	var dirs []string
	for _, a := range anchors {
		d := path.Dir(a.Dst)
		if byDir[d] == nil {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], a)
	}
	for _, d := range dirs {
		if err := checkDir(rf, d, byDir[d]); err != nil {
			return err
		}
	}
	return nil
}

// checkDir checks the anchors in one directory d of the view: it must be
// the directory they were found in, and each must be there as it was
// bound (checkAnchor), and each name must cover what was found there
// (Anchor.Under).
func checkDir(root *os.File, d string, anchors []bwrap.Anchor) error {
	dir, err := safefs.OpenBeneath(root, strings.TrimPrefix(d, "/"), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("%s: %w (%v)", d, bwrap.ErrMoved, err)
	}
	defer dir.Close()
	id, err := safefs.ID(dir)
	if err != nil || id != anchors[0].Dir {
		return fmt.Errorf("%s is not the directory the walk found: %w", d, bwrap.ErrMoved)
	}
	for _, a := range anchors {
		if a.Dir != anchors[0].Dir {
			return fmt.Errorf("%s: anchors disagree on its directory: %w", d, bwrap.ErrMoved)
		}
		if err := checkAnchor(dir, a); err != nil {
			return err
		}
	}
	under, err := listedInodes(dir, anchors)
	if err != nil {
		return fmt.Errorf("view check %s: %w", d, err)
	}
	for _, a := range anchors {
		if a.Under == (safefs.Identity{}) {
			continue
		}
		if ino, ok := under[path.Base(a.Dst)]; !ok || ino != a.Under.Ino {
			return fmt.Errorf("%s covers another entry than the one found there: %w", a.Dst, bwrap.ErrMoved)
		}
	}
	return nil
}

// listedInodes are the inode numbers dir's listing gives the anchors'
// names: what a mount there covers. Anchor.Under came from a listing of
// the same directory on the host, so the two compare on any filesystem
// (stat would show the mount, and an overlayfs may list other numbers
// than it stats).
func listedInodes(dir *os.File, anchors []bwrap.Anchor) (map[string]uint64, error) {
	want := map[string]bool{}
	for _, a := range anchors {
		if a.Under != (safefs.Identity{}) {
			want[path.Base(a.Dst)] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	got := map[string]uint64{}
	err = safefs.ReadDirentsIno(fd, make([]byte, 8<<10), func(name []byte, ino uint64, _ byte) error {
		if want[string(name)] {
			got[string(name)] = ino
		}
		return nil
	})
	return got, err
}

// maxFirstLook bounds the sleep before the first look at a view (and
// the estimate it comes from): a few slow starts must not make the next
// ones wait long after their views are made.
const maxFirstLook = 20 * time.Millisecond

// viewTime is a moving average of how long views took to be made, from
// bwrap's child known to its view final (ns). One for all views: a light
// one after heavy ones looks first too late by at most maxFirstLook.
var viewTime atomic.Int64

// nanosleep sleeps d on the calling thread: the runtime's timers wake no
// sooner than a millisecond from an idle poller.
func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// checkAnchor checks one anchor in its directory, already checked (its
// identity is a.Dir).
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
	if a.Tmpfs {
		if err := unix.Fstatfs(fd, &fs); err != nil {
			return fmt.Errorf("view check %s: %w", a.Dst, err)
		}
		if st.Dev == a.Dir.Dev || fs.Type != unix.TMPFS_MAGIC {
			return fmt.Errorf("%s is not the tmpfs that hides it: %w", a.Dst, bwrap.ErrMoved)
		}
		return nil
	}
	if (safefs.Identity{Dev: st.Dev, Ino: st.Ino}) != a.Mounted {
		return fmt.Errorf("%s is not what was bound there: %w", a.Dst, bwrap.ErrMoved)
	}
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("view check %s: %w", a.Dst, err)
	}
	if fs.Flags&unix.ST_RDONLY == 0 && !a.Pin {
		return fmt.Errorf("%s is writable: %w", a.Dst, bwrap.ErrMoved)
	}
	return nil
}
