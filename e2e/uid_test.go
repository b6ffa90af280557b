package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ensureUser creates (once) an ordinary user for uid tests; it skips when
// not root or when useradd is missing.
func ensureUser(t *testing.T, name string) (uid, gid int) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("uid tests need root to create a second user")
	}
	if _, err := user.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("useradd %s: %v %s", name, err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// errDial marks a failed dial in TestSocketPeerCredentials' ask.
var errDial = errors.New("dial")

// TestSocketPeerCredentials: a daemon run by an ordinary user serves that
// user only on its agent sockets — root included in the refusal — while its
// system socket also answers root. The check is SO_PEERCRED, made before
// the first byte is read (the socket files are opened up to prove it). spec: A4
func TestSocketPeerCredentials(t *testing.T) {
	uid, gid := ensureUser(t, "ctxe2e")
	w := newWorld(t)
	base := filepath.Dir(w.root)
	os.Chmod(binDir, 0o755)
	w.agent("own", nil)                 // created by root: hand the tree to the user
	work := filepath.Join(base, "work") // the user's HOME is base: a workspace there would be refused
	for _, p := range []string{base, w.root, work} {
		os.MkdirAll(p, 0o755)
	}
	if out, err := exec.Command("chown", "-R", strconv.Itoa(uid)+":"+strconv.Itoa(gid), base).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	os.Chmod(base, 0o755)
	w.ctxBin = "/usr/bin/setpriv"
	d := exec.Command("/usr/bin/setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups", "--", binDir+"/ctx", "daemon")
	d.Env = w.env()
	log := &syncBuffer{}
	d.Stdout, d.Stderr = log, log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	sock := filepath.Join(w.run, "agent", "own.sock")
	// "serving" is logged once the socket listens: the file alone exists
	// from bind on, and a dial before listen is refused by the kernel.
	waitFor(t, "the user's daemon", 10*time.Second, func() bool { return strings.Contains(log.String(), "msg=serving") })
	// Open the files up so only the peer-credential check can refuse.
	os.Chmod(w.run, 0o777)
	os.Chmod(filepath.Dir(sock), 0o777)
	os.Chmod(sock, 0o666)
	os.Chmod(w.run+"/system.sock", 0o666)

	ask := func(path string) (string, error) {
		c, err := net.Dial("unix", path)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errDial, err)
		}
		defer c.Close()
		c.Write([]byte(`{"op":"ping"}` + "\n"))
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		return bufio.NewReader(c).ReadString('\n')
	}
	// The refusal is a connection closed before any answer — not a dial
	// that failed, which would prove nothing.
	if line, err := ask(sock); err == nil {
		t.Errorf("root was served on the user's agent socket: %q", line)
	} else if errors.Is(err, errDial) {
		t.Fatalf("root could not reach the user's agent socket: %v\n%s", err, log.String())
	}
	if line, err := ask(w.run + "/system.sock"); err != nil || !strings.Contains(line, "pong") {
		t.Errorf("root refused on the system socket: %q %v", line, err)
	}
	// The owner is served.
	probe := exec.Command("/usr/bin/setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups", "--",
		binDir+"/ctx", "agent", "tsh", "own", "--json", "--", "bogus-subcommand")
	probe.Env = w.env()
	probe.Dir = work // owned by the user
	out, _ := probe.CombinedOutput()
	if !strings.Contains(string(out), `"type":"start"`) {
		t.Errorf("the owner was not served: %s\n%s", out, log.String())
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "refused a connection"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the refusal in the log:\n%s", log.String())
		}
	}
	if !strings.Contains(log.String(), "uid=0") {
		t.Errorf("refusal not logged with the uid:\n%s", log.String())
	}
}
