package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/launchroot"
	"golang.org/x/sys/unix"
)

// A viewGate holds the terminal's shell after bwrap made its view and
// before bwrap runs it, until the daemon has checked that view (a
// directory holding a nested repository moved on the host while bwrap
// bound it would leave the repository's hooks writable) and writes one
// byte to the view FIFO. spec: B1
//
// bwrap's --block-fd goes on at EOF as on a byte, so its block is latched
// (launchroot.Latch): only the gate's byte releases it. The held process
// is the init of its own PID namespace (--as-pid-1), which ignores every
// signal but SIGKILL, and arms --die-with-parent only once released: when
// the outer bwrap dies first (a hang-up, a ^C typed into the terminal
// meanwhile) it would live on, blocked, reparented away. So ctxterm is a
// child subreaper (from the gate's making on; it stays one, as nothing but
// its sandbox runs below it) — the held process comes back to it —
// and a hold that ends without a release (the FIFO's EOF, a timeout,
// ctxterm told to stop, bwrap gone) SIGKILLs everything below ctxterm.
type viewGate struct {
	fifo     int      // the view FIFO, open for reading
	path     string   // for messages
	w        *os.File // the block pipe's write end
	blockEnd *os.File // the latched read end, bwrap's --block-fd
	log      *slog.Logger

	mu       sync.Mutex
	bwrap    int // bwrap's pidfd (-1: none), set by start
	pgid     int // bwrap's pid: its process group, which the held process is in
	released bool
	refused  bool
	started  bool          // the FIFO wait runs (and closes the FIFO)
	done     chan struct{} // closed when the FIFO wait ended
	wake     [2]int        // a pipe: written when the hold ended otherwise, to end the wait
}

// newViewGate opens the view FIFO (ours, no symlink) and the block pipe,
// and makes ctxterm a child subreaper.
func newViewGate(path string, log *slog.Logger) (*viewGate, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("child subreaper: %w", err)
	}
	fd, err := openFIFO(path)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("block pipe: %w", err)
	}
	lr, err := launchroot.Latch(r)
	r.Close()
	if err != nil {
		unix.Close(fd)
		w.Close()
		return nil, err
	}
	g := &viewGate{fifo: fd, path: path, w: w, blockEnd: lr, log: log, bwrap: -1, done: make(chan struct{})}
	if err := unix.Pipe2(g.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		w.Close()
		lr.Close()
		return nil, fmt.Errorf("wake pipe: %w", err)
	}
	return g, nil
}

// argv adds --block-fd to bwrap's argv (argv[0] is bwrap), its descriptor
// the next of files (handed to bwrap as 3, 4, …). bwrap keeps the last
// --block-fd it is given: an argv that has one already is refused.
func (g *viewGate) argv(argv []string, files []*os.File) ([]string, []*os.File, error) {
	if len(argv) == 0 {
		return nil, files, errors.New("no bwrap to hold")
	}
	opts := argv
	if i := slices.Index(argv, "--"); i >= 0 {
		opts = argv[:i] // what follows is the program's
	}
	if slices.Contains(opts, "--block-fd") {
		return nil, files, errors.New("bwrap's argv has a --block-fd of its own")
	}
	n := 3 + len(files)
	out := append([]string{argv[0], "--block-fd", strconv.Itoa(n)}, argv[1:]...)
	files = append(files, g.blockEnd)
	g.blockEnd = nil // closed with the other extra files once bwrap has it
	return out, files, nil
}

// start waits, in the background, for the FIFO's byte and then releases
// bwrap (pid, ctxterm's child, not yet reaped: nothing reaps before
// Serve). An EOF, an error or no byte within timeout refuses instead.
func (g *viewGate) start(pid int, timeout time.Duration) {
	if g == nil {
		return
	}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		g.bwrap = fd
	}
	g.pgid = pid
	g.started = true
	go func() {
		defer close(g.done)
		err := g.waitByte(timeout)
		unix.Close(g.fifo) // this goroutine's alone once started
		unix.Close(g.wake[0])
		g.mu.Lock()
		defer g.mu.Unlock()
		switch {
		case g.refused:
			return // ended meanwhile
		case err != nil:
			g.refuseLocked(err)
		case !g.bwrapAlive():
			g.refuseLocked(errors.New("bwrap ended before its release"))
		default:
			if _, err := g.w.Write([]byte{'\n'}); err != nil {
				g.refuseLocked(fmt.Errorf("release the sandbox: %w", err))
				return
			}
			g.released = true
		}
	}()
}

// waitByte waits for one byte on the FIFO, or until the hold ended
// otherwise (the wake pipe) or timeout.
func (g *viewGate) waitByte(timeout time.Duration) error {
	what := "view hold " + g.path
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s: %w", what, errHoldTimeout)
		}
		fds := []unix.PollFd{{Fd: int32(g.fifo), Events: unix.POLLIN}, {Fd: int32(g.wake[0]), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, int(min(left, time.Second).Milliseconds())+1)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case fds[1].Revents != 0:
			return fmt.Errorf("%s: ended", what)
		case fds[0].Revents != 0:
			return readOne(g.fifo, what) // a byte, or the writer gone (EOF)
		}
	}
}

// bwrapAlive: bwrap's pidfd does not poll readable (it has not exited).
// Without a pidfd it is taken as alive: the kill at the end (end) is
// the wall, this only spares a release that would be killed at once.
func (g *viewGate) bwrapAlive() bool {
	if g.bwrap < 0 {
		return true
	}
	pfd := []unix.PollFd{{Fd: int32(g.bwrap), Events: unix.POLLIN}}
	n, _ := unix.Poll(pfd, 0)
	return n == 0
}

// refuseLocked ends a hold that was not released: everything below
// ctxterm is killed (the held process included, wherever it was
// reparented: ctxterm is its subreaper).
func (g *viewGate) refuseLocked(why error) {
	if g.released || g.refused {
		return
	}
	g.refused = true
	g.log.Error("view not released: the sandbox is ended unstarted", "err", why)
	killBelow()
	// bwrap's group too (it leads one: ctxterm starts it in a session of
	// its own), the held process being in it — only while bwrap is known
	// not to have exited (its pidfd): until it is reaped its pid, and so
	// the group's id, is no one else's.
	if g.pgid > 0 && g.bwrap >= 0 && g.bwrapAlive() {
		_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	}
	unix.Write(g.wake[1], []byte{1}) // ends the FIFO wait
}

// abort refuses a hold not yet released (ctxterm told to stop).
func (g *viewGate) abort(why error) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuseLocked(why)
}

// end runs once bwrap was reaped: a hold never released is refused, and
// whatever is left below ctxterm (a held process whose bwrap died, a
// released one that lost its bwrap before it armed --die-with-parent) is
// killed — nothing of the sandbox outlives its bwrap. It reports whether
// the start was refused.
func (g *viewGate) end() (refused bool) {
	if g == nil {
		return false
	}
	g.mu.Lock()
	g.refuseLocked(errors.New("bwrap ended"))
	refused = g.refused
	g.mu.Unlock()
	killBelow()
	return refused
}

// killBelow SIGKILLs every process below ctxterm, children first. A
// variable: a test of the gate in the test binary's own process swaps it.
var killBelow = func() { killtree.Signal(os.Getpid(), syscall.SIGKILL) }

// wasReleased says whether the hold was released (a nil gate has none to
// release: true).
func (g *viewGate) wasReleased() bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.released
}

// close lets go of what the gate holds (a nil gate has nothing). The FIFO
// wait, if it runs, is not waited for: ctxterm exits next.
func (g *viewGate) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		unix.Close(g.fifo)
		unix.Close(g.wake[0])
	}
	if g.wake[1] >= 0 {
		unix.Write(g.wake[1], []byte{1})
		unix.Close(g.wake[1])
		g.wake[1] = -1
	}
	g.w.Close()
	if g.blockEnd != nil {
		g.blockEnd.Close()
	}
	if g.bwrap >= 0 {
		unix.Close(g.bwrap)
		g.bwrap = -1
	}
}
