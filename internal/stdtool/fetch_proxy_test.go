package stdtool

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/egress"
	"github.com/cortexfs/ctx/internal/netpolicy"
)

// toServer answers every name with a public address and connects every
// dial to one local test server: the proxy's public path without traffic
// anywhere but loopback.
type toServer struct{ addr string }

func (s toServer) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}

func (s toServer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, s.addr)
}

// TestFetchUsesTheProxy: with net, fetch sends a named host through the
// proxy of its environment (which resolves it), and a name the proxy
// refuses comes back with the proxy's reason. spec: V3
func TestFetchUsesTheProxy(t *testing.T) {
	srv := fetchServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := toServer{addr: srv.Listener.Addr().String()}
	p := &egress.Proxy{Policy: netpolicy.Policy{Public: true}, Resolver: s, Dialer: s}
	p.ServeProxy(ln)
	defer p.Close()
	fetchEnv(t, "http://"+ln.Addr().String(), "")
	got, code := searchRun(t, "fetch", "http://docs.example/json")
	if code != 0 || !strings.Contains(got, "200 OK") {
		t.Errorf("through the proxy: exit %d: %q", code, got)
	}
	// The same proxy with a resolver giving a private address refuses.
	p2 := &egress.Proxy{Policy: netpolicy.Policy{Public: true}, Resolver: privateName{}, Dialer: s}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	p2.ServeProxy(ln2)
	defer p2.Close()
	fetchEnv(t, "http://"+ln2.Addr().String(), "")
	for _, u := range []string{"http://intranet.example/", "https://intranet.example/"} {
		got, code = searchRun(t, "fetch", u)
		if code != 1 || !strings.Contains(got, "`net local 10.0.0.7:") {
			t.Errorf("%s: exit %d: %q", u, code, got)
		}
	}
}

type privateName struct{}

func (privateName) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
}
