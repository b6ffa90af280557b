package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/launchroot"
	"golang.org/x/sys/unix"
)

// A viewGate holds the terminal's shell after bwrap made its view and
// before bwrap runs it, until the daemon has checked that view (a
// directory holding a nested repository moved on the host while bwrap
// bound it would leave the repository's hooks writable) and writes one
// byte to the view FIFO. bwrap's --block-fd goes on at EOF as on a byte,
// so its block is latched (launchroot.Latch): a ctxterm that dies while
// holding leaves the shell unstarted (bwrap dies with ctxterm, and its
// child with bwrap). spec: B1
type viewGate struct {
	fifo     int      // the view FIFO, open for reading
	path     string   // for messages
	w        *os.File // the block pipe's write end
	blockEnd *os.File // the latched read end, bwrap's --block-fd
}

// newViewGate opens the view FIFO (ours, no symlink) and the block pipe.
func newViewGate(path string) (*viewGate, error) {
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
	return &viewGate{fifo: fd, path: path, w: w, blockEnd: lr}, nil
}

// argv adds --block-fd to bwrap's argv (argv[0] is bwrap), its descriptor
// the next of files (handed to bwrap as 3, 4, …).
func (g *viewGate) argv(argv []string, files []*os.File) ([]string, []*os.File, error) {
	if len(argv) == 0 {
		return nil, files, fmt.Errorf("no bwrap to hold")
	}
	n := 3 + len(files)
	out := append([]string{argv[0], "--block-fd", strconv.Itoa(n)}, argv[1:]...)
	files = append(files, g.blockEnd)
	g.blockEnd = nil // closed with the other extra files once bwrap has it
	return out, files, nil
}

// wait releases bwrap (pid) once the view FIFO gives a byte, in the
// background; on an EOF, an error or a timeout it kills bwrap's tree
// instead and the returned flag reads true once that was decided. A nil
// gate releases nothing and never refuses.
func (g *viewGate) wait(pid int, timeout time.Duration, log *slog.Logger) *atomic.Bool {
	refused := new(atomic.Bool)
	if g == nil {
		return refused
	}
	// Pinned before Serve reaps anything: a kill must never reach a pid
	// reused after bwrap was reaped (a hang-up may end it meanwhile).
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		pidfd = -1
	}
	kill := func() {
		if pidfd >= 0 {
			pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			if n, _ := unix.Poll(pfd, 0); n > 0 {
				return // bwrap has exited: nothing of it runs
			}
		}
		killtree.Kill(pid)
	}
	go func() {
		defer g.close()
		if pidfd >= 0 {
			defer unix.Close(pidfd)
		}
		if err := waitOne(g.fifo, timeout, "view hold "+g.path); err != nil {
			refused.Store(true)
			log.Error("view not released: the sandbox is ended unstarted", "err", err)
			kill()
			return
		}
		if _, err := g.w.Write([]byte{'\n'}); err != nil {
			refused.Store(true)
			log.Error("release the sandbox", "err", err)
			kill()
		}
	}()
	return refused
}

// close lets go of what the gate holds (a nil gate has nothing).
func (g *viewGate) close() {
	if g == nil {
		return
	}
	unix.Close(g.fifo)
	g.w.Close()
	if g.blockEnd != nil {
		g.blockEnd.Close()
	}
}
