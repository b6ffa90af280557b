package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/netpolicy"
)

func TestMain(m *testing.M) {
	// The test binary is also the daemon side of an attach (nestedRole)
	// and the helper nsenter starts (HelperArg).
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		os.Exit(Helper(os.Args[2:]))
	}
	if os.Getenv(roleEnv) == "nested" {
		os.Exit(nestedRole())
	}
	goleak.VerifyTestMain(m)
}

// fakeNet answers names from a table and records every dial; a dial is
// answered in memory by an HTTP server that echoes what it was asked.
type fakeNet struct {
	names map[string][]netip.Addr
	mu    sync.Mutex
	dials []string
}

func (f *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (f *fakeNet) DialContext(_ context.Context, _, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, addr)
	f.mu.Unlock()
	c, s := net.Pipe()
	go func() {
		defer s.Close()
		r := bufio.NewReader(s)
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		body := "REMOTE " + addr + " " + req.Method + " " + req.URL.String() + " host=" + req.Host
		fmt.Fprintf(s, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	}()
	return c, nil
}

func (f *fakeNet) dialed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dials...)
}

// startProxy serves a proxy with pol on a loopback listener of the test.
func startProxy(t *testing.T, pol netpolicy.Policy, f *fakeNet) (*Proxy, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Policy: pol, Resolver: f, Dialer: f}
	p.ServeProxy(ln)
	t.Cleanup(func() { p.Close() })
	return p, ln.Addr().String()
}

// ask sends raw to the proxy and returns all it answers.
func ask(t *testing.T, proxy, raw string) string {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) // a tunnel left open fails, not hangs
	io.WriteString(c, raw)
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestProxyPublicPath: with net, CONNECT and a plain absolute-URI GET
// reach a public address; the proxy resolved the name itself and dialled
// the address it checked. spec: V3 (README "The network")
func TestProxyPublicPath(t *testing.T) {
	f := &fakeNet{names: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("93.184.215.14")}}}
	_, proxy := startProxy(t, netpolicy.Policy{Public: true}, f)
	got := ask(t, proxy, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nGET /in-tunnel HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200 Connection established\r\n\r\n") || !strings.Contains(got, "REMOTE 93.184.215.14:443 GET /in-tunnel") {
		t.Errorf("CONNECT: %q", got)
	}
	got = ask(t, proxy, "GET http://example.com/page?q=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: x\r\n\r\n")
	if !strings.Contains(got, "200 OK") || !strings.Contains(got, "REMOTE 93.184.215.14:80 GET /page?q=1 host=example.com") {
		t.Errorf("GET: %q", got)
	}
	if d := f.dialed(); len(d) != 2 || d[0] != "93.184.215.14:443" || d[1] != "93.184.215.14:80" {
		t.Errorf("dials %v", d)
	}
}

// TestProxyRefusesBeforeDialling: names and literals that give loopback,
// private, link-local or this host's addresses are answered 403 naming
// the `net local` line, and nothing is dialled; a name giving both a
// private and a public address is dialled at the public one only;
// without net a public address is refused too. spec: V3
func TestProxyRefusesBeforeDialling(t *testing.T) {
	f := &fakeNet{names: map[string][]netip.Addr{
		"intranet.example": {netip.MustParseAddr("10.0.0.7")},
		"rebind.example":   {netip.MustParseAddr("127.0.0.1")},
		"meta.example":     {netip.MustParseAddr("169.254.169.254")},
		"v6.example":       {netip.MustParseAddr("fd00::7")},
		"mixed.example":    {netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("93.184.215.14")},
	}}
	_, proxy := startProxy(t, netpolicy.Policy{Public: true}, f)
	cases := map[string]string{
		"intranet.example:443":  "`net local 10.0.0.7:443`",
		"rebind.example:8080":   "`net local 127.0.0.1:8080`",
		"meta.example:80":       "`net local 169.254.169.254:80`",
		"v6.example:443":        "`net local [fd00::7]:443`",
		"10.1.2.3:22":           "`net local 10.1.2.3:22`",
		"[::ffff:10.0.0.1]:443": "`net local 10.0.0.1:443`",
		"[fe80::1]:80":          "`net local [fe80::1]:80`",
		"0.0.0.0:80":            "never reached",
		"[ff02::1]:80":          "never reached",
	}
	for target, grant := range cases {
		for _, raw := range []string{
			"CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n",
			"GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n\r\n",
		} {
			got := ask(t, proxy, raw)
			if !strings.HasPrefix(got, "HTTP/1.1 403 Forbidden: ctx egress: ") || !strings.Contains(got, grant) {
				t.Errorf("%s: %q", strings.Fields(raw)[0]+" "+target, got)
			}
		}
	}
	if d := f.dialed(); len(d) != 0 {
		t.Errorf("refused targets were dialled: %v", d)
	}
	if got := ask(t, proxy, "CONNECT mixed.example:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(got, "REMOTE 93.184.215.14:443") {
		t.Errorf("mixed: %q", got)
	}
	if d := f.dialed(); len(d) != 1 || d[0] != "93.184.215.14:443" {
		t.Errorf("mixed dialled %v", d)
	}

	f2 := &fakeNet{names: f.names}
	_, local := startProxy(t, netpolicy.Policy{Local: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.7:443")}}, f2)
	if got := ask(t, local, "CONNECT 93.184.215.14:443 HTTP/1.1\r\n\r\n"); !strings.Contains(got, "403") || !strings.Contains(got, "add a line `net`") {
		t.Errorf("public without net: %q", got)
	}
	if got := ask(t, local, "CONNECT intranet.example:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.Contains(got, "REMOTE 10.0.0.7:443") {
		t.Errorf("granted private address: %q", got)
	}
	if got := ask(t, local, "CONNECT intranet.example:444 HTTP/1.1\r\n\r\n"); !strings.Contains(got, "`net local 10.0.0.7:444`") {
		t.Errorf("another port of a granted address: %q", got)
	}
	if d := f2.dialed(); len(d) != 1 {
		t.Errorf("dials %v", d)
	}
}

// TestProxyCloseEndsConnections: Close ends listeners and open tunnels,
// and returns only when their goroutines did (goleak checks the rest).
func TestProxyCloseEndsConnections(t *testing.T) {
	f := &fakeNet{names: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("93.184.215.14")}}}
	p, proxy := startProxy(t, netpolicy.Policy{Public: true}, f)
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "200") {
		t.Fatalf("%q", line)
	}
	p.Close()
	if _, err := net.Dial("tcp", proxy); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}

// TestProxyBounds: a sandbox cannot grow the daemon without bound: the
// request line and headers are bounded (431), and past maxConns
// connections at once a new one is closed. spec: X12 (every process is
// bounded; the daemon's work for a sandbox too)
func TestProxyBounds(t *testing.T) {
	f := &fakeNet{names: map[string][]netip.Addr{}}
	p, proxy := startProxy(t, netpolicy.Policy{Public: true}, f)
	got := ask(t, proxy, "CONNECT example.com:443 HTTP/1.1\r\nX-Big: "+strings.Repeat("a", maxHeader)+"\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 431 ") {
		t.Errorf("huge header: %.100q", got)
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := 0; i < maxConns; i++ {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	// wait until all are being served
	for i := 0; i < 500; i++ {
		p.mu.Lock()
		n := p.active
		p.mu.Unlock()
		if n == maxConns {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection %d was served: %v", maxConns+1, err)
	}
}

// TestLoopbackOnlyResolver: under CTX_EGRESS_LOOPBACK_ONLY a name other
// than localhost is refused without a DNS query (the refusal says why);
// localhost is answered with the loopback addresses.
func TestLoopbackOnlyResolver(t *testing.T) {
	var r Resolver = loopbackOnly{}
	for _, h := range []string{"api.anthropic.com", "registry.npmjs.org", "localhost.example"} {
		if a, err := r.LookupNetIP(context.Background(), "ip", h); err == nil || !strings.Contains(err.Error(), EnvLoopbackOnly) {
			t.Errorf("%s: %v %v", h, a, err)
		}
	}
	for _, h := range []string{"localhost", "LOCALHOST."} {
		a, err := r.LookupNetIP(context.Background(), "ip", h)
		if err != nil || len(a) != 2 || !a[0].IsLoopback() || !a[1].IsLoopback() {
			t.Errorf("%s: %v %v", h, a, err)
		}
	}
}
