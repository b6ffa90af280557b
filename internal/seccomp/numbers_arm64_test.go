package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNumbersMatchTheKernelTable: the hand-kept aarch64 table agrees with
// x/sys/unix (generated from the kernel headers).
func TestNumbersMatchTheKernelTable(t *testing.T) {
	checkNumbers(t, AArch64, map[string]uint32{
		"ioctl": unix.SYS_IOCTL, "clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3, "unshare": unix.SYS_UNSHARE,
		"personality": unix.SYS_PERSONALITY, "ptrace": unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV, "pidfd_getfd": unix.SYS_PIDFD_GETFD, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR,
		"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV, "io_uring_setup": unix.SYS_IO_URING_SETUP,
		"io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER,
		"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
		"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
		"move_mount": unix.SYS_MOVE_MOUNT, "open_tree": unix.SYS_OPEN_TREE, "mount_setattr": unix.SYS_MOUNT_SETATTR,
		"setns": unix.SYS_SETNS, "keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
		"perf_event_open": unix.SYS_PERF_EVENT_OPEN, "bpf": unix.SYS_BPF, "userfaultfd": unix.SYS_USERFAULTFD,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "init_module": unix.SYS_INIT_MODULE,
		"finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
	})
}
