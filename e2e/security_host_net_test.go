package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/egress"
)

// hostServer is an HTTP server on the host's 127.0.0.1 that answers
// secret and counts the connections it accepted.
type hostServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newHostServer(t *testing.T, secret string) *hostServer {
	h := &hostServer{}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, secret)
	}))
	h.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			h.conns.Add(1)
		}
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

func (h *hostServer) addr() string { return h.Listener.Addr().String() }

// abstractServer listens on a host abstract unix socket and answers
// secret to whoever connects; it counts them.
func abstractServer(t *testing.T, secret string) (string, *atomic.Int64) {
	name := "ctx-e2e-net-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			fmt.Fprintln(c, secret)
			c.Close()
		}
	}()
	return name, n
}

// netWorld is a world with the standard toolset (fetch) and the attack
// tool, and an agent "n" whose .d/mount is mount.
func netWorld(t *testing.T, mount string) *world {
	w := newStdWorld(t)
	// Only loopback may ever receive a packet from these tests: the daemon's
	// proxy dials nothing else, so a broken check fails a test (502 naming
	// the switch instead of 403) without traffic to 10/8, 169.254/16 or a
	// public address.
	w.start(egress.EnvLoopbackOnly + "=1")
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("n", map[string]string{"tools": "attack\n", "policy": "allow tool *\n", "mount": mount})
	return w
}

// lineOf returns the value of KEY= in out.
func lineOf(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	return "<missing " + key + ">"
}

// TestSecurityHostNetIsNotTheHost: with `net`, a tool reaches neither a
// server on the host's 127.0.0.1 (directly, or through the proxy by
// address or by the name localhost), nor a host abstract unix socket;
// the proxy refuses private and link-local targets (literal addresses:
// refused before any connect, so no packet leaves) naming the `net local`
// line to add. The host servers see no connection. spec: V3
func TestSecurityHostNetIsNotTheHost(t *testing.T) {
	srv := newHostServer(t, "HOST-SECRET")
	abs, absConns := abstractServer(t, "ABSTRACT-SECRET")
	w := netWorld(t, "net\n")
	ws := t.TempDir()
	_, port, _ := net.SplitHostPort(srv.addr())

	tr, _ := callTool(t, w, "n", ws, "attack", "net-dial", srv.addr(), "[::1]:"+port)
	for _, a := range []string{srv.addr(), "[::1]:" + port} {
		if v := lineOf(tr.Content, "dial_"+a); !strings.HasPrefix(v, "refused") || strings.Contains(v, "HOST-SECRET") {
			t.Errorf("direct connect to the host's %s: %s", a, v)
		}
	}
	tr, _ = callTool(t, w, "n", ws, "attack", "net-abstract", abs)
	if v := lineOf(tr.Content, "abstract_"+abs); !strings.HasPrefix(v, "refused") || strings.Contains(v, "ABSTRACT-SECRET") {
		t.Errorf("host abstract socket: %s", v)
	}
	targets := map[string]string{
		srv.addr():                   "net local " + srv.addr(),
		"localhost:" + port:          "net local ", // whichever loopback address the name gave
		"10.1.2.3:80":                "net local 10.1.2.3:80",
		"169.254.169.254:80":         "net local 169.254.169.254:80",
		"[fd12::1]:443":              "net local [fd12::1]:443",
		"[::ffff:127.0.0.1]:" + port: "net local " + srv.addr(),
		"127.0.0.1:3128":             "net local 127.0.0.1:3128", // the proxy itself, asked to loop
		"0.0.0.0:" + port:            "",                         // never grantable: "never reached"
	}
	args := []string{"net-proxy"}
	for a := range targets {
		args = append(args, a)
	}
	tr, _ = callTool(t, w, "n", ws, "attack", args...)
	if p := lineOf(tr.Content, "proxy"); !strings.HasPrefix(p, "http://127.0.0.1:") {
		t.Fatalf("no proxy in a net sandbox's environment: %s", tr.Content)
	}
	for a, grant := range targets {
		for _, k := range []string{"connect_", "get_"} {
			v := lineOf(tr.Content, k+a)
			want := "`" + grant
			if grant == "" {
				want = "never reached from a sandbox"
			}
			if !strings.Contains(v, "403 Forbidden") || !strings.Contains(v, want) || strings.Contains(v, "HOST-SECRET") {
				t.Errorf("proxy %s%s: %s", k, a, v)
			}
		}
	}
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("the host server accepted %d connections from the sandbox", n)
	}
	if n := absConns.Load(); n != 0 {
		t.Errorf("the host abstract socket accepted %d connections from the sandbox", n)
	}
}

// TestSecurityHostNetLocalGrant: `net local 127.0.0.1:PORT` reaches that
// host server, directly on the sandbox's own 127.0.0.1:PORT and through
// the proxy, while another host port stays unreachable both ways.
// spec: V3
func TestSecurityHostNetLocalGrant(t *testing.T) {
	granted := newHostServer(t, "GRANTED-SERVER")
	other := newHostServer(t, "OTHER-SECRET")
	w := netWorld(t, "net local "+granted.addr()+"\n")
	ws := t.TempDir()
	tr, _ := callTool(t, w, "n", ws, "attack", "net-dial", granted.addr(), other.addr())
	if v := lineOf(tr.Content, "dial_"+granted.addr()); !strings.Contains(v, "GRANTED-SERVER") {
		t.Errorf("the granted server, directly: %s", v)
	}
	if v := lineOf(tr.Content, "dial_"+other.addr()); !strings.HasPrefix(v, "refused") {
		t.Errorf("another host port, directly: %s", v)
	}
	tr, _ = callTool(t, w, "n", ws, "attack", "net-proxy", granted.addr(), other.addr(), "93.184.215.14:80")
	for _, k := range []string{"connect_", "get_"} {
		if v := lineOf(tr.Content, k+granted.addr()); !strings.Contains(v, "GRANTED-SERVER") {
			t.Errorf("the granted server through the proxy (%s): %s", k, v)
		}
		if v := lineOf(tr.Content, k+other.addr()); !strings.Contains(v, "403") || !strings.Contains(v, "`net local "+other.addr()+"`") {
			t.Errorf("another host port through the proxy (%s): %s", k, v)
		}
		// net local alone is not net: a public address is refused, before
		// any connect.
		if v := lineOf(tr.Content, k+"93.184.215.14:80"); !strings.Contains(v, "403") || !strings.Contains(v, "`net`") {
			t.Errorf("a public address without net (%s): %s", k, v)
		}
	}
	if n := other.conns.Load(); n != 0 {
		t.Errorf("the other host server accepted %d connections", n)
	}
	if n := granted.conns.Load(); n == 0 {
		t.Errorf("the granted server saw no connection")
	}
}

// TestSecurityHostNetFetch: fetch (the standard tool, inside the sandbox)
// refuses a loopback URL itself, naming `net local HOST:PORT`; with that
// grant it gets the page and another loopback port is still refused;
// without net it says how to grant net. spec: V3, V1
func TestSecurityHostNetFetch(t *testing.T) {
	srv := newHostServer(t, "FETCHED-FROM-HOST")
	other := newHostServer(t, "OTHER-SECRET")
	w := netWorld(t, "")
	ws := w.workspace()
	r := w.tshCall(ws, "n", "fetch", srv.URL)
	if r.code == 0 || !strings.Contains(r.stdout, "no network in this sandbox") || !strings.Contains(r.stdout, "add a line `net`") {
		t.Errorf("fetch without net: %+v", r)
	}
	w.writeControl("n", "mount", "net\n")
	r = w.tshCall(ws, "n", "fetch", srv.URL)
	// fetch refuses it itself (the proxy would too, as "ctx egress"), before
	// any connection, naming the line to add.
	if r.code == 0 || strings.Contains(r.stdout, "FETCHED-FROM-HOST") || !strings.Contains(r.stdout, "refused: ") ||
		strings.Contains(r.stdout, "ctx egress") || !strings.Contains(r.stdout, "`net local "+srv.addr()+"`") {
		t.Errorf("fetch of the host's loopback with net: %+v", r)
	}
	w.writeControl("n", "mount", "net\nnet local "+srv.addr()+"\n")
	r = w.tshCall(ws, "n", "fetch", srv.URL)
	if r.code != 0 || !strings.Contains(r.stdout, "FETCHED-FROM-HOST") {
		t.Errorf("fetch of a granted loopback address: %+v", r)
	}
	r = w.tshCall(ws, "n", "fetch", other.URL)
	if r.code == 0 || strings.Contains(r.stdout, "OTHER-SECRET") || strings.Contains(r.stdout, "ctx egress") || !strings.Contains(r.stdout, "`net local "+other.addr()+"`") {
		t.Errorf("fetch of another loopback port: %+v", r)
	}
	if n := other.conns.Load(); n != 0 {
		t.Errorf("the other host server accepted %d connections", n)
	}
}

// TestSecurityHostNetUnprivileged: a daemon run by an ordinary user (its
// sandboxes in user namespaces of their own, which the netns helper joins
// first) gives a `net local` grant the same way, and still not the rest
// of the host's loopback. spec: V3
func TestSecurityHostNetUnprivileged(t *testing.T) {
	uid, gid := ensureUser(t, "ctxe2e")
	granted := newHostServer(t, "GRANTED-SERVER")
	other := newHostServer(t, "OTHER-SECRET")
	w := newWorld(t)
	base := filepath.Dir(w.root)
	os.Chmod(binDir, 0o755)
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("n", map[string]string{"tools": "attack\n", "policy": "allow tool *\n", "mount": "net local " + granted.addr() + "\n"})
	work := filepath.Join(base, "work")
	for _, p := range []string{base, w.root, work} {
		os.MkdirAll(p, 0o755)
	}
	if out, err := exec.Command("chown", "-R", strconv.Itoa(uid)+":"+strconv.Itoa(gid), base).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	os.Chmod(base, 0o755)
	asUser := func(args ...string) *exec.Cmd {
		c := exec.Command("/usr/bin/setpriv", append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--clear-groups", "--", binDir + "/ctx"}, args...)...)
		c.Env = w.env(egress.EnvLoopbackOnly + "=1")
		return c
	}
	d := asUser("daemon")
	log := &syncBuffer{}
	d.Stdout, d.Stderr = log, log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	sock := filepath.Join(w.run, "agent", "n.sock")
	waitFor(t, "the user's daemon", 10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
	call := asUser("agent", "tsh", "n", "--", "call", "attack", "net-dial", granted.addr(), other.addr())
	call.Dir = work
	out, _ := call.CombinedOutput()
	if v := lineOf(string(out), "dial_"+granted.addr()); !strings.Contains(v, "GRANTED-SERVER") {
		t.Errorf("the granted server, from a user's sandbox: %s\n%s\n%s", v, out, log.String())
	}
	if v := lineOf(string(out), "dial_"+other.addr()); !strings.HasPrefix(v, "refused") {
		t.Errorf("another host port, from a user's sandbox: %s", v)
	}
	if n := other.conns.Load(); n != 0 {
		t.Errorf("the other host server accepted %d connections", n)
	}
}
