package proc

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/netpolicy"
)

// TestStartConnectsNetSandbox: a sandbox with Egress is held until its
// listeners exist in its own network namespace, with or without Place:
// its first instruction reaches a granted host port through them, and the
// host's other ports are not there. The listeners end with Wait.
// spec: V3 (README "The network")
func TestStartConnectsNetSandbox(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	if os.Getuid() != 0 {
		t.Skip("an unprivileged start needs ctxd's netns helper (e2e TestSecurityHostNetUnprivileged)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "HOST-SERVER")
			c.Close()
		}
	}()
	other, _ := net.Listen("tcp", "127.0.0.1:0")
	defer other.Close()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	op := netip.MustParseAddrPort(other.Addr().String())
	script := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3; exec 4<>/dev/tcp/127.0.0.1/%d && echo OTHER-REACHED", ap.Port(), op.Port())
	for _, place := range []bool{false, true} {
		o := Options{Bwrap: bwrap.DefaultPath, Spec: bwrap.Spec{System: true, Egress: &netpolicy.Policy{Local: []netip.AddrPort{ap}},
			Argv: []string{"/bin/bash", "-c", script}}}
		if place {
			o.Place = func(int) error { return nil }
		}
		p, err := Start(o)
		if err != nil {
			t.Fatal(err)
		}
		stop := time.AfterFunc(10*time.Second, p.Kill) // a start left unconnected fails, not hangs
		out, _ := io.ReadAll(p.Stdout)
		p.Wait()
		stop.Stop()
		if !strings.Contains(string(out), "HOST-SERVER") || strings.Contains(string(out), "OTHER-REACHED") {
			t.Errorf("place %v: %q %s", place, out, p.Stderr())
		}
		if p.egress == nil {
			t.Fatal("no proxy")
		}
	}
}
