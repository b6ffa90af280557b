package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestSecuritySeccomp: a tool inside a real run calls every syscall the
// filter refuses with arguments the kernel would reject otherwise: each
// gets EPERM (ENOSYS for clone3), while the controls reach the kernel
// (EBADF, ok). seccomp
func TestSecuritySeccomp(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("sc", map[string]string{"tools": "attack\n"})
	tr, _ := callTool(t, w, "sc", t.TempDir(), "attack", "syscalls")
	got := map[string]string{}
	for _, l := range strings.Split(tr.Content, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"ioctl_tiocsti": "EPERM", "ioctl_tiocsti_high": "EPERM", "ioctl_tioclinux": "EPERM",
		"ptrace": "EPERM", "process_vm_readv": "EPERM", "process_vm_writev": "EPERM", "pidfd_getfd": "EPERM",
		"io_uring_setup": "EPERM", "io_uring_enter": "EPERM", "io_uring_register": "EPERM",
		"unshare_newuser": "EPERM", "unshare_newns": "EPERM", "clone_newuser": "EPERM", "clone3": "ENOSYS",
		"mount": "EPERM", "umount2": "EPERM", "open_tree": "EPERM", "mount_setattr": "EPERM", "fsconfig": "EPERM",
		"setns": "EPERM", "keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM",
		"perf_event_open": "EPERM", "bpf": "EPERM", "userfaultfd": "EPERM", "personality_change": "EPERM",
		"control_ioctl_tcgets": "EBADF", "control_unshare_sysvsem": "ok", "control_personality_query": "ok",
		"control_fork": "ok",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %s", k, got[k], v)
		}
	}
	if t.Failed() {
		t.Logf("attack output:\n%s", tr.Content)
	}
}
