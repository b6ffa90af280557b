package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestKind: every range a sandbox may not reach without a grant is
// classified, in every IPv6 spelling that carries an IPv4 address; public
// addresses are not. spec: V3 (README "The network")
func TestKind(t *testing.T) {
	special := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254",
		"127.0.0.1", "127.255.0.9", "169.254.169.254", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "192.0.0.8", "198.18.0.1", "224.0.0.1", "239.255.255.250", "240.0.0.1",
		"255.255.255.255", "::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1",
		"fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "ff02::1", "64:ff9b::a00:1",
		"64:ff9b::7f00:1", "2002:a00:1::1", "2002:7f00:1::", "2001::1", "2001:db8::1", "fec0::1",
	}
	for _, s := range special {
		if k := Kind(netip.MustParseAddr(s)); k == "" {
			t.Errorf("%s: classified public", s)
		}
	}
	public := []string{"1.1.1.1", "8.8.8.8", "93.184.215.14", "172.32.0.1", "172.15.255.255",
		"100.128.0.1", "192.169.0.1", "11.0.0.1", "2606:4700::1111", "2a00:1450::1", "64:ff9b::808:808", "2002:808:808::1"}
	for _, s := range public {
		if k := Kind(netip.MustParseAddr(s)); k != "" {
			t.Errorf("%s: classified %q", s, k)
		}
	}
}

// TestCheck: a special address needs a grant naming it exactly (address
// and port); a public one needs net; this host's own addresses count as
// special. spec: V3
func TestCheck(t *testing.T) {
	old := hostAddrs
	hostAddrs = func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("93.184.215.99")} }
	t.Cleanup(func() { hostAddrs = old })
	ap := netip.MustParseAddrPort
	pol := Policy{Public: true, Local: []netip.AddrPort{ap("127.0.0.1:11434"), ap("[fd00::5]:8080")}}
	cases := []struct {
		pol   Policy
		to    string
		ok    bool
		grant string
	}{
		{pol, "127.0.0.1:11434", true, ""},
		{pol, "[::ffff:127.0.0.1]:11434", true, ""},
		{pol, "127.0.0.1:11435", false, "`net local 127.0.0.1:11435`"},
		{pol, "127.0.0.2:11434", false, "`net local 127.0.0.2:11434`"},
		{pol, "[::1]:11434", false, "`net local [::1]:11434`"},
		{pol, "[fd00::5]:8080", true, ""},
		{pol, "10.0.0.1:80", false, "`net local 10.0.0.1:80`"},
		{pol, "169.254.169.254:80", false, "`net local 169.254.169.254:80`"},
		{pol, "1.1.1.1:443", true, ""},
		{pol, "93.184.215.99:443", false, "`net local 93.184.215.99:443`"},
		{Policy{Local: pol.Local}, "1.1.1.1:443", false, "add a line `net`"},
		{Policy{Local: pol.Local}, "127.0.0.1:11434", true, ""},
		{Policy{}, "127.0.0.1:11434", false, "`net local 127.0.0.1:11434`"},
	}
	for _, c := range cases {
		err := c.pol.Check(c.to, ap(c.to))
		if (err == nil) != c.ok {
			t.Errorf("%+v → %s: %v", c.pol, c.to, err)
			continue
		}
		if err != nil && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.grant)) {
			t.Errorf("%s: %v (want %s)", c.to, err, c.grant)
		}
	}
}

// TestParseLocal: only IP literals with a port; what it accepts prints
// back as the grant a refusal names.
func TestParseLocal(t *testing.T) {
	good := map[string]string{"127.0.0.1:11434": "127.0.0.1:11434", "[::1]:80": "[::1]:80", "10.0.0.5:65535": "10.0.0.5:65535", "[fd00::1]:1": "[fd00::1]:1"}
	for in, want := range good {
		ap, err := ParseLocal(in)
		if err != nil || ap.String() != want {
			t.Errorf("%s: %v %v", in, ap, err)
		}
	}
	for _, in := range []string{"localhost:80", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:080", "127.0.0.1:http",
		"[::ffff:127.0.0.1]:80", "[fe80::1%eth0]:80", "0.0.0.0:80", "224.0.0.1:80", "[::]:80", ":80", "127.0.0.1:-1", "1.2.3:80"} {
		if ap, err := ParseLocal(in); err == nil {
			t.Errorf("%s accepted as %v", in, ap)
		}
	}
}

// TestEnvAndListens: the proxy port is known before the sandbox exists,
// moves off a loopback grant's port, and the environment names it.
func TestEnvAndListens(t *testing.T) {
	p := Policy{Public: true, Local: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:3128"), netip.MustParseAddrPort("10.0.0.1:3129"), netip.MustParseAddrPort("[::1]:3129")}}
	if p.ProxyPort() != 3129 {
		t.Errorf("proxy port %d", p.ProxyPort())
	}
	e := p.Env()
	if e["HTTPS_PROXY"] != "http://127.0.0.1:3129" || e["http_proxy"] != e["HTTPS_PROXY"] || e["NO_PROXY"] != "localhost,127.0.0.1,::1" || e["no_proxy"] != e["NO_PROXY"] || e["NODE_USE_ENV_PROXY"] != "1" || e[EnvLocal] != "127.0.0.1:3128 10.0.0.1:3129 [::1]:3129" {
		t.Errorf("env %v", e)
	}
	got := []string{}
	for _, l := range p.Listens() {
		got = append(got, l.String())
	}
	if strings.Join(got, " ") != "127.0.0.1:3129 127.0.0.1:3128 [::1]:3129" {
		t.Errorf("listens %v", got)
	}
}

// FuzzParseLocal: never panics; an accepted grant round-trips.
func FuzzParseLocal(f *testing.F) {
	for _, s := range []string{"127.0.0.1:11434", "[::1]:80", "localhost:1", "[fe80::1%lo]:1", "1.2.3.4:99999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ap, err := ParseLocal(s)
		if err != nil {
			return
		}
		again, err := ParseLocal(ap.String())
		if err != nil || again != ap {
			t.Fatalf("%q → %v does not round-trip: %v", s, ap, err)
		}
	})
}
