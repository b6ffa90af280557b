// Package viewfs opens files on a sandboxed agent's behalf through the
// agent's own view: relative to the root directory of a process inside the
// run's sandbox, so the view's read-only binds, the tmpfs over hidden trees
// and its placeholders apply by construction. There is no second list of
// what is protected: what the view refuses (EROFS, ENOENT under a tmpfs) is
// refused here, for root too (mount flags bind root; mode bits do not).
package viewfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/workspace"
)

// Errors a caller maps to wire codes.
var (
	// ErrGone: the sandbox is not (or no longer) there to resolve in.
	ErrGone = errors.New("the agent's sandbox is not running")
	// ErrNotRegular: the target is a FIFO, device, socket or directory.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is over the read bound.
	ErrTooLarge = errors.New("file too large")
	// ErrSymlink: a path component is a symlink or magic link.
	ErrSymlink = errors.New("path goes through a symlink")
)

// resolve: the path is taken relative to the sandbox's root ("/" and ".."
// never leave it), and no symlink or magic link (/proc/<pid>/root, cwd) is
// followed in any component.
const resolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Root is the root directory of one run's sandbox, pinned for the run.
// It is found lazily (the sandbox has finished its mounts by the time the
// agent it runs can make a request) and kept until Close.
type Root struct {
	bwrap int // bwrap's pid outside the sandbox (our child)

	mu     sync.RWMutex
	fd     int // -1: not opened yet
	closed bool
}

// New returns the view root of the sandbox bwrap (pid, a child of this
// process) runs. Nothing is opened until the first use.
func New(bwrapPid int) *Root { return &Root{bwrap: bwrapPid, fd: -1} }

// Close releases the root (at the run's end); later opens fail with ErrGone.
func (r *Root) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd >= 0 {
		unix.Close(r.fd)
	}
	r.fd, r.closed = -1, true
}

// use runs f with the pinned root fd, opening it on first use. The fd
// stays valid while f runs: Close waits for f (a closed fd number reused
// by another open would otherwise resolve the path somewhere else).
func (r *Root) use(f func(root int) error) error {
	for {
		r.mu.RLock()
		if r.closed {
			r.mu.RUnlock()
			return ErrGone
		}
		if r.fd >= 0 {
			defer r.mu.RUnlock()
			return f(r.fd)
		}
		r.mu.RUnlock()
		r.mu.Lock()
		if !r.closed && r.fd < 0 {
			fd, err := openRoot(r.bwrap)
			if err != nil {
				r.mu.Unlock()
				return err
			}
			r.fd = fd
		}
		r.mu.Unlock()
	}
}

// openRoot opens /proc/N/root of bwrap's child N (with --unshare-pid, the
// sandbox's init, which has pivoted into the view and is not the agent's
// to replace). The pid is pinned by a pidfd; after the root is opened the
// pidfd must still be alive and N still bwrap's child, so a pid reused in
// between cannot substitute another process's root.
func openRoot(bwrap int) (int, error) {
	kids := children(bwrap)
	if len(kids) != 1 {
		return -1, fmt.Errorf("bwrap %d has %d children: %w", bwrap, len(kids), ErrGone)
	}
	pid := kids[0]
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %v: %w", pid, err, ErrGone)
	}
	defer unix.Close(pidfd)
	if parent(pid) != bwrap {
		return -1, fmt.Errorf("pid %d is no longer bwrap's child: %w", pid, ErrGone)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the sandbox root of %d: %w", pid, err)
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox process %d: %v: %w", pid, err, ErrGone)
	}
	return fd, nil
}

// children lists pid's direct children.
func children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// parent reads pid's parent from /proc/pid/stat (-1 when unknown).
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces and parens
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	p, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return p
}

// openat2 opens p inside the view, retrying on EINTR/EAGAIN.
func openat2(dirfd int, p string, flags uint64) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, p, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolve})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err == unix.ELOOP || err == unix.EXDEV {
			// ELOOP: a symlink; EXDEV: a magic link under RESOLVE_NO_MAGICLINKS.
			return -1, fmt.Errorf("%s: %w", p, ErrSymlink)
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: p, Err: err}
		}
		return fd, nil
	}
}

// clean makes p an absolute, lexically clean path of the view.
func clean(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", &os.PathError{Op: "open", Path: p, Err: unix.EINVAL}
	}
	return path.Clean(p), nil
}

// ReadFile reads the regular file at p (a path in the view), at most limit
// bytes (more: ErrTooLarge). A FIFO or device is refused at once: it is
// opened O_NONBLOCK and checked with fstat before any read.
func (r *Root) ReadFile(p string, limit int64) (b []byte, err error) {
	err = r.use(func(root int) error {
		b, err = readFile(root, p, limit)
		return err
	})
	return b, err
}

func readFile(root int, p string, limit int64) ([]byte, error) {
	p, err := clean(p)
	if err != nil {
		return nil, err
	}
	fd, err := openat2(root, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if err := regular(fd, p); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes: %w", p, limit, ErrTooLarge)
	}
	return b, nil
}

// WriteFile writes content to p (a path in the view): the parent directory
// is opened in the view, then the last component O_NOFOLLOW|O_NONBLOCK
// (created 0644 when missing), truncated only once fstat says it is a
// regular file. A read-only bind or hidden tree refuses it as the agent
// would be refused (EROFS, ENOENT).
func (r *Root) WriteFile(p string, content []byte) error {
	return r.use(func(root int) error { return writeFile(root, p, content) })
}

func writeFile(root int, p string, content []byte) error {
	p, err := clean(p)
	if err != nil {
		return err
	}
	dir, base := path.Split(p)
	if base == "" || base == "." || base == ".." {
		return &os.PathError{Op: "write", Path: p, Err: unix.EISDIR}
	}
	dfd, err := openat2(root, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o644)
	if err == unix.ELOOP {
		return fmt.Errorf("%s: %w", p, ErrSymlink)
	}
	if err == unix.ENXIO {
		return fmt.Errorf("%s: %w", p, ErrNotRegular) // a FIFO with no reader
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if err := regular(fd, p); err != nil {
		return err
	}
	if err := unix.Ftruncate(fd, 0); err != nil {
		return &os.PathError{Op: "truncate", Path: p, Err: err}
	}
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func regular(fd int, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if workspace.IsAbsentSource(uint64(st.Dev), st.Ino) {
		// An absent protected name: the view binds an absent source over
		// the host's placeholder, so the agent is answered as for a name
		// that does not exist (README "What the workspace may change").
		return &os.PathError{Op: "open", Path: p, Err: unix.ENOENT}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		// Also EISDIR: an ACP agent is told so in the words it knows.
		return fmt.Errorf("%s: %w (%w)", p, ErrNotRegular, unix.EISDIR)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s: %w", p, ErrNotRegular)
	}
	return nil
}

// At returns a Root over the directory dir (its own root, no sandbox):
// for tests, and for callers that already hold a view's tree.
func At(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Root{bwrap: -1, fd: fd}, nil
}
