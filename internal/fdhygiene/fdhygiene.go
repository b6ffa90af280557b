// Package fdhygiene closes the descriptors a long-lived process inherited
// without asking for them, so that none of them reaches what it starts.
//
// A process started by a shell or by a client that auto-starts it inherits
// every descriptor its parent did not mark close-on-exec: a user's terminal,
// a mode-600 file opened for writing, a pipe. Go's os/exec passes only
// stdin, stdout, stderr and ExtraFiles to a child, but it does not close
// descriptors the process itself inherited without FD_CLOEXEC: those reach
// every child, sandboxes included.
//
// Every descriptor the Go runtime and the standard library open is
// close-on-exec, and every descriptor inherited across execve is not (a
// close-on-exec one would have been closed by it), so at the start of main
// "not close-on-exec" means exactly "inherited".
package fdhygiene

import (
	"fmt"
	"os"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// Inherited lists the descriptors ≥ 3 that are not close-on-exec, in order.
func Inherited() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("fdhygiene: %w", err)
	}
	var out []int
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // gone (the directory's own descriptor) or ours
		}
		out = append(out, fd)
	}
	sort.Ints(out)
	return out, nil
}

// CloseInherited closes every inherited descriptor (see Inherited) for
// which keep is false, and returns those it closed. Call it first thing in
// main, before anything could open a descriptor without close-on-exec.
func CloseInherited(keep func(fd int) bool) ([]int, error) {
	fds, err := Inherited()
	if err != nil {
		return nil, err
	}
	var closed []int
	for _, fd := range fds {
		if keep != nil && keep(fd) {
			continue
		}
		if err := unix.Close(fd); err != nil {
			return closed, fmt.Errorf("fdhygiene: close %d: %w", fd, err)
		}
		closed = append(closed, fd)
	}
	return closed, nil
}

// ListenFDs reports the systemd socket-activation range [3, 3+n) that was
// handed to this very process (LISTEN_PID equals our pid), or 0.
func ListenFDs() int {
	if os.Getenv("LISTEN_PID") != strconv.Itoa(os.Getpid()) {
		return 0
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// KeepListenFDs keeps the socket-activation descriptors of ListenFDs.
func KeepListenFDs() func(fd int) bool {
	n := ListenFDs()
	return func(fd int) bool { return fd >= 3 && fd < 3+n }
}
