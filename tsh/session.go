package tsh

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/toolpath"
)

// interactive says whether t declared "interactive": true in its tool.json.
// An unreadable tool.json is not a declaration: the tool is detached.
func interactive(t *toolpath.Tool) bool {
	m, err := t.Meta()
	return err == nil && m.Interactive
}

// detach takes the calling process (about to exec a tool that is not
// interactive) away from its controlling terminal: a new session, or —
// for a process group or session leader, which cannot start one —
// TIOCNOTTY. Without a controlling terminal TIOCSTI has nothing to inject
// into.
func detach() {
	if _, err := unix.Setsid(); err == nil {
		return
	}
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return // no controlling terminal
	}
	defer f.Close()
	if sid, _ := unix.Getsid(0); sid == os.Getpid() {
		// A session leader giving up its terminal hangs up its foreground
		// group, which is us: ignore that SIGHUP (not inherited: reset).
		signal.Ignore(syscall.SIGHUP)
		defer signal.Reset(syscall.SIGHUP)
	}
	_ = unix.IoctlSetInt(int(f.Fd()), unix.TIOCNOTTY, 0)
}

// children are the tools the prompt runs right now (pid → true); the
// orphan reaper of PID 1 leaves them to their exec.Cmd.
var children struct {
	mu   sync.Mutex
	pids map[int]bool
}

func trackChild(start func() (int, error)) error {
	children.mu.Lock()
	defer children.mu.Unlock()
	pid, err := start()
	if err == nil {
		if children.pids == nil {
			children.pids = map[int]bool{}
		}
		children.pids[pid] = true
	}
	return err
}

func untrackChild(pid int) {
	children.mu.Lock()
	delete(children.pids, pid)
	children.mu.Unlock()
}

// InitTerminal prepares tsh to be the terminal's shell when it runs as PID
// 1 of the sandbox (bwrap --as-pid-1): kill(-1) from a tool
// never reaches PID 1, and a signal from inside reaches it only through a
// handler, so every signal is caught here and dropped (the terminal ends
// when ctxterm hangs up the PTY or its sandbox is killed from outside).
// It takes the foreground of the terminal in a process group of its own
// (^C must not reach bwrap, which shares its session), and reaps orphans
// reparented to it. It does nothing when tsh is not PID 1.
func InitTerminal() {
	if os.Getpid() != 1 {
		return
	}
	takeForeground(0)
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs) // every signal: none ends PID 1
	go func() {
		for s := range sigs {
			if s == syscall.SIGCHLD {
				reapOrphans()
			}
		}
	}()
}

// takeForeground puts tsh in its own process group and makes it the
// foreground group of the terminal on fd (SIGTTOU ignored meanwhile, or
// the call from a background group would stop or loop).
func takeForeground(fd int) {
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return // not a terminal
	}
	if unix.Getpgrp() != os.Getpid() {
		_ = unix.Setpgid(0, 0)
	}
	signal.Ignore(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, os.Getpid())
	signal.Reset(syscall.SIGTTOU)
}

// reapOrphans waits for the exited children of PID 1 that no exec.Cmd
// waits for (orphans of tools, reparented to it).
func reapOrphans() {
	children.mu.Lock()
	defer children.mu.Unlock()
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || children.pids[pid] {
				continue
			}
			var ws unix.WaitStatus
			for {
				_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				if !errors.Is(err, unix.EINTR) {
					break
				}
			}
		}
	}
}
