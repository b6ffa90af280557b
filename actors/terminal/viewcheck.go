package terminal

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/proc"
	"golang.org/x/sys/unix"
)

// checkView checks a started terminal's view against the walk that made
// its spec (bwrap.Anchor): ctxterm (pid) runs bwrap, whose first process
// becomes the shell. The terminal's bwrap is ctxterm's to start (under
// systemd too, where nothing of the daemon's reaches it), so ctxterm holds
// that process on bwrap's block descriptor once the view is made
// (--view-hold) and the daemon checks it there: a view whose protection
// is not where the walk found it (a directory holding a nested repository
// moved on the host while the terminal started) is ended before anything
// ran in it, and only a view that passed is released. spec: B1
//
// It returns the held process (the shell-to-be) pinned once found —
// whether or not there are anchors to check, and on an error too (a pin
// reaches only that process, alive or not).
func checkView(pid int, anchors []bwrap.Anchor, timeout time.Duration) (*shellPin, error) {
	deadline := time.Now().Add(timeout)
	for {
		child, err := grandchild(pid)
		var pin *shellPin
		if err == nil {
			pin, err = pinChecked(pid, child)
		}
		if err == nil {
			if len(anchors) == 0 {
				return pin, nil
			}
			return pin, proc.CheckView(child, anchors, time.Until(deadline))
		}
		if _, serr := os.Stat("/proc/" + strconv.Itoa(pid)); serr != nil {
			return nil, fmt.Errorf("the terminal ended as it started: %w", serr)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("view check: %w", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A shellPin holds a pidfd of a terminal's sandboxed process (the init of
// its PID namespace: bwrap's child). ctxterm ends it as it ends itself,
// but a ctxterm killed outright (SIGKILL, the OOM killer) ends only bwrap:
// the process then lives on unsupervised — held for ever, or released
// just before and not yet dying with bwrap — with the view's placeholders
// still its walls. The daemon kills it through the pin, and waits for
// its namespace to be gone, before those placeholders go. spec: B1
type shellPin struct{ fd int }

// pinShell pins pid; nil where pidfds are missing (Linux < 5.3): the
// daemon then relies on ctxterm and the unit's cgroup alone.
func pinShell(pid int) *shellPin {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	return &shellPin{fd: fd}
}

// pinChecked pins child, then looks it up again below pid: the pin is of
// bwrap's child as found, not of a process that took its pid since.
func pinChecked(pid, child int) (*shellPin, error) {
	pin := pinShell(child)
	if again, err := grandchild(pid); err != nil || again != child {
		pin.release()
		return nil, fmt.Errorf("the terminal's sandbox changed as it started (%d, then %d: %v)", child, again, err)
	}
	return pin, nil
}

// pinGrandchild pins the sandboxed process of a running terminal
// (ctxterm pid): nil when there is not exactly one where it should be.
func pinGrandchild(pid int) *shellPin {
	child, err := grandchild(pid)
	if err != nil {
		return nil
	}
	pin, _ := pinChecked(pid, child)
	return pin
}

// pinGone bounds the wait for a killed sandbox to be gone.
const pinGone = 5 * time.Second

// kill SIGKILLs the pinned process (nothing if it is gone), waits until
// it is — a PID namespace's init polls readable only once the kernel has
// killed every process of its namespace — and lets go of the pin. A nil
// pin does nothing.
func (p *shellPin) kill() {
	if p == nil || p.fd < 0 {
		return
	}
	_ = unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0)
	pfd := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	for end := time.Now().Add(pinGone); time.Now().Before(end); {
		n, err := unix.Poll(pfd, int(pinGone.Milliseconds()))
		if n > 0 || (err != nil && err != unix.EINTR) {
			break
		}
	}
	p.release()
}

// grandchild is the one child of pid's one child: bwrap's first process
// below ctxterm. Anything else (none yet, or more than one) is an error.
func grandchild(pid int) (int, error) {
	c, err := onlyChild(pid)
	if err != nil {
		return 0, err
	}
	return onlyChild(c)
}

// onlyChild is pid's one child.
func onlyChild(pid int) (int, error) {
	kids := killtree.Children(pid)
	switch len(kids) {
	case 1:
		return kids[0], nil
	case 0:
		return 0, errors.New("its sandbox has not started yet")
	}
	return 0, fmt.Errorf("process %d has %d children, not one sandbox", pid, len(kids))
}

// release lets go of the pin, the process running on (the daemon stops,
// the terminal outlives it). A nil pin does nothing.
func (p *shellPin) release() {
	if p != nil && p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}
