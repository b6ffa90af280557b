package main

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// syscalls: call every syscall the seccomp filter refuses
// with arguments the kernel itself would reject differently (a bad fd, a
// bad pointer, an invalid command), so EPERM/ENOSYS (the filter) can be
// told from EBADF/EFAULT/EINVAL/ESRCH (the kernel). Controls that must
// still reach the kernel or succeed are reported the same way.
func init() {
	register("syscalls", func(args []string) int {
		const bad = 1 // a pointer no process maps
		neg := ^uintptr(0)
		calls := []struct {
			name string
			nr   uintptr
			a    [6]uintptr
		}{
			{"ioctl_tiocsti", unix.SYS_IOCTL, [6]uintptr{neg, 0x5412, bad}},
			{"ioctl_tiocsti_high", unix.SYS_IOCTL, [6]uintptr{neg, 0xdead00005412, bad}},
			{"ioctl_tioclinux", unix.SYS_IOCTL, [6]uintptr{neg, 0x541C, bad}},
			{"ptrace", unix.SYS_PTRACE, [6]uintptr{unix.PTRACE_ATTACH, 0x7ffffff0}},
			{"process_vm_readv", unix.SYS_PROCESS_VM_READV, [6]uintptr{0x7ffffff0, bad, 1, bad, 1}},
			{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, [6]uintptr{0x7ffffff0, bad, 1, bad, 1}},
			{"pidfd_getfd", unix.SYS_PIDFD_GETFD, [6]uintptr{neg, 0}},
			{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{1, bad}},
			{"io_uring_enter", unix.SYS_IO_URING_ENTER, [6]uintptr{neg}},
			{"io_uring_register", unix.SYS_IO_URING_REGISTER, [6]uintptr{neg}},
			{"unshare_newuser", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWUSER}},
			{"unshare_newns", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWNS}},
			{"clone_newuser", unix.SYS_CLONE, [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_VM, bad, bad, bad, bad}},
			{"clone3", unix.SYS_CLONE3, [6]uintptr{bad, 88}},
			{"mount", unix.SYS_MOUNT, [6]uintptr{bad, bad, bad}},
			{"umount2", unix.SYS_UMOUNT2, [6]uintptr{bad, 0xffffffff}},
			{"open_tree", unix.SYS_OPEN_TREE, [6]uintptr{neg, bad}},
			{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uintptr{neg, bad}},
			{"fsconfig", unix.SYS_FSCONFIG, [6]uintptr{neg, 0xffff}},
			{"setns", unix.SYS_SETNS, [6]uintptr{neg}},
			{"keyctl", unix.SYS_KEYCTL, [6]uintptr{0xffff}},
			{"add_key", unix.SYS_ADD_KEY, [6]uintptr{bad, bad}},
			{"request_key", unix.SYS_REQUEST_KEY, [6]uintptr{bad, bad}},
			{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{bad}},
			{"bpf", unix.SYS_BPF, [6]uintptr{0xffff, bad, 1}},
			{"userfaultfd", unix.SYS_USERFAULTFD, [6]uintptr{0xffffffff}},
			{"personality_change", unix.SYS_PERSONALITY, [6]uintptr{0x0040000}},
			// Controls: these must not be refused by the filter.
			{"control_ioctl_tcgets", unix.SYS_IOCTL, [6]uintptr{neg, unix.TCGETS, bad}},
			// CLONE_SYSVSEM: no namespace flag, and harmless to the Go runtime
			// (CLONE_FILES would give this thread a descriptor table without
			// the runtime's epoll descriptor).
			{"control_unshare_sysvsem", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_SYSVSEM}},
			{"control_personality_query", unix.SYS_PERSONALITY, [6]uintptr{0xffffffff}},
		}
		for _, c := range calls {
			_, _, e := syscall.RawSyscall6(c.nr, c.a[0], c.a[1], c.a[2], c.a[3], c.a[4], c.a[5])
			say(c.name, errnoName(e))
		}
		// Threads and processes still start (clone without namespace flags;
		// the runtime falls back from clone3 where it uses it).
		if err := exec.Command("/bin/true").Run(); err != nil {
			say("control_fork", err)
		} else {
			say("control_fork", "ok")
		}
		return 0
	})
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	for _, n := range []struct {
		e    syscall.Errno
		name string
	}{{unix.EPERM, "EPERM"}, {unix.ENOSYS, "ENOSYS"}, {unix.EBADF, "EBADF"}, {unix.EFAULT, "EFAULT"},
		{unix.EINVAL, "EINVAL"}, {unix.ESRCH, "ESRCH"}, {unix.ENOTTY, "ENOTTY"}, {unix.EOPNOTSUPP, "EOPNOTSUPP"},
		{unix.EACCES, "EACCES"}, {unix.E2BIG, "E2BIG"}, {unix.ENOENT, "ENOENT"}} {
		if errors.Is(e, n.e) {
			return n.name
		}
	}
	return e.Error()
}
