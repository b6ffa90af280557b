package egress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/netpolicy"
)

// roleEnv makes the test binary play an unprivileged daemon that
// attaches a held sandbox (nestedRole) instead of running tests.
const roleEnv = "CTX_EGRESS_TEST_ROLE"

// nsGetParent is NS_GET_PARENT (linux/nsfs.h, _IO(0xb7, 0x2)).
const nsGetParent = 0xb702

// TestAttachUnprivilegedNestedUserns: an unprivileged daemon attaches a
// net sandbox whose child has already moved into bwrap's nested user
// namespace (the one made after mounting devpts, before the block pipe),
// which has no capability over the network namespace made with the
// clone. The helper must join the network namespace's owner, not the
// child's user namespace: joining the latter failed with EPERM whenever
// the child got there first. spec: V3
func TestAttachUnprivilegedNestedUserns(t *testing.T) {
	for _, p := range []string{"bwrap", "setpriv", Nsenter} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v", p, err)
			}
			t.Skipf("%s: %v", p, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy an ordinary user may run: the go test binary sits in a
	// private temporary directory.
	dir, err := os.MkdirTemp("", "ctx-egress-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe := filepath.Join(dir, "egress.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if os.Getuid() == 0 {
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe)
	} else {
		cmd = exec.Command(exe)
	}
	cmd.Env = append(os.Environ(), roleEnv+"=nested")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the unprivileged daemon's attach: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("not nested")) {
		t.Skip("this bwrap keeps its child in the user namespace that owns its network")
	}
	if !bytes.Contains(out, []byte("attached in the sandbox's netns")) {
		t.Fatalf("no attach reported:\n%s", out)
	}
}

// nestedRole holds an unprivileged bwrap sandbox with its own network,
// waits until its child sits in a nested user namespace, and attaches
// it; it reports on stdout and exits non-zero on any failure.
func nestedRole() int {
	fail := func(format string, a ...any) int {
		fmt.Printf("FAIL "+format+"\n", a...)
		return 1
	}
	if os.Getuid() == 0 {
		return fail("the role must run unprivileged")
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fail("%v", err)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	c := exec.Command(bwrap, "--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--info-fd", "3", "--block-fd", "4", "--", "/bin/true")
	c.ExtraFiles = []*os.File{infoW, blockR}
	c.Stderr = os.Stdout
	if err := c.Start(); err != nil {
		return fail("bwrap: %v", err)
	}
	infoW.Close()
	blockR.Close()
	defer func() { blockW.Close(); c.Wait() }()
	var info struct {
		Child int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err != nil || info.Child <= 0 {
		return fail("info-fd: %v %+v", err, info)
	}
	go io.Copy(io.Discard, infoR)
	own, err := nsIno("/proc/self/ns/user")
	if err != nil {
		return fail("%v", err)
	}
	// Wait for the nested user namespace: the child's user namespace
	// whose parent is not the daemon's.
	deadline := time.Now().Add(10 * time.Second)
	for {
		nested, err := isNested("/proc/"+strconv.Itoa(info.Child)+"/ns/user", own)
		if err != nil {
			return fail("%v", err)
		}
		if nested {
			break
		}
		if time.Now().After(deadline) {
			// A bwrap that never nests (no devpts to mount as root
			// first) cannot show the trap this test is about.
			fmt.Println("not nested")
			return 0
		}
		time.Sleep(time.Millisecond)
	}
	// Any port: the listeners are made in the sandbox's own network.
	pol := netpolicy.Policy{Local: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8080")}}
	px, err := Attach(info.Child, mustExe(), pol, nil)
	if err != nil {
		return fail("attach: %v", err)
	}
	defer px.Close()
	fmt.Println("attached in the sandbox's netns")
	return 0
}

func nsIno(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}

// isNested reports whether the user namespace at path has a parent
// other than the one whose inode is own.
func isNested(path string, own uint64) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	pfd, err := unix.IoctlRetInt(int(f.Fd()), nsGetParent)
	if err != nil {
		return false, fmt.Errorf("NS_GET_PARENT %s: %w", path, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return false, err
	}
	return st.Ino != own, nil
}

func mustExe() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}
