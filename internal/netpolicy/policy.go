// Package netpolicy is the one rule for which addresses the daemon
// connects to on behalf of a sandbox (`net`, `net local HOST:PORT` in
// .d/mount), and the environment that points a sandbox at its proxy. It
// is light (no net/http): the client links it through bwrap. The proxy
// itself is internal/egress.
package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Policy is what one sandbox may reach, from its .d/mount.
type Policy struct {
	// Public is the `net` line: public addresses on any port.
	Public bool
	// Local are the `net local HOST:PORT` lines: exactly these
	// addresses, which are refused otherwise (loopback, private, …).
	Local []netip.AddrPort
}

// Enabled reports whether the sandbox gets the proxy at all.
func (p Policy) Enabled() bool { return p.Public || len(p.Local) > 0 }

// Granted reports whether a `net local` line names exactly ap.
func (p Policy) Granted(ap netip.AddrPort) bool {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for _, g := range p.Local {
		if g == ap {
			return true
		}
	}
	return false
}

// ErrRefused is wrapped by every refusal of a destination.
var ErrRefused = errors.New("egress refused")

// Refusal says why a destination was refused and what would grant it.
type Refusal struct {
	Target string // HOST:PORT as asked
	Addr   netip.AddrPort
	Kind   string // "loopback", "private", … ("" for a public address)
}

func (r *Refusal) Error() string {
	if r.Kind == "" {
		return fmt.Sprintf("%s: the agent's .d/mount does not grant net (add a line `net` to reach public addresses)", r.Target)
	}
	what := r.Target
	if r.Addr.String() != r.Target {
		what += " (" + r.Addr.String() + ")"
	}
	if _, err := ParseLocal(r.Addr.String()); err != nil {
		return fmt.Sprintf("%s is a %s address: never reached from a sandbox", what, r.Kind)
	}
	return fmt.Sprintf("%s is a %s address, refused unless the agent's .d/mount grants it: add a line `net local %s`", what, r.Kind, r.Addr)
}

func (r *Refusal) Is(target error) bool { return target == ErrRefused }

// special are the ranges a sandbox never reaches without a `net local`
// grant naming the exact address: this host, its networks, and what is
// not a unicast internet address. spec: V3 — the agent's view decides
// what the daemon connects to, never the host's own reach.
var special = []struct {
	p    netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "private (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Kind classifies a: "" for a public unicast address, else what it is.
// IPv4 inside IPv6 (mapped, NAT64, 6to4, Teredo) is judged by the IPv4
// address it carries, so no spelling reaches a private address.
func Kind(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(a), netip.MustParsePrefix("64:ff9b:1::/48").Contains(a):
			if k := Kind(netip.AddrFrom4([4]byte(b[12:16]))); k != "" {
				return k + " (NAT64)"
			}
		case netip.MustParsePrefix("2002::/16").Contains(a):
			if k := Kind(netip.AddrFrom4([4]byte(b[2:6]))); k != "" {
				return k + " (6to4)"
			}
		case netip.MustParsePrefix("2001::/32").Contains(a):
			return "Teredo" // carries an IPv4 address obfuscated: never public to us
		}
	}
	for _, s := range special {
		if s.p.Contains(a) {
			return s.kind
		}
	}
	return ""
}

// hostAddrs lists this host's own addresses; tests replace it.
var hostAddrs = func() []netip.Addr {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// Check decides whether the daemon may connect to ap for a sandbox with
// policy p; target is what the sandbox asked for (for the message).
// A special address (or one of this host's own) needs a grant naming it
// exactly; any other needs `net`.
func (p Policy) Check(target string, ap netip.AddrPort) error {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if p.Granted(ap) {
		return nil
	}
	kind := Kind(ap.Addr())
	if kind == "" {
		for _, h := range hostAddrs() {
			if h == ap.Addr() {
				kind = "this host's own"
				break
			}
		}
	}
	if kind == "" && p.Public {
		return nil
	}
	return &Refusal{Target: target, Addr: ap, Kind: kind}
}

// ParseLocal parses the HOST:PORT of a `net local` line: an IP address
// (IPv6 in brackets) and a port 1…65535. Names are not taken: what a
// name resolves to can change after the grant was read.
func ParseLocal(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: want HOST:PORT (IPv6 as [ADDR]:PORT)", s)
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("%q: HOST must be an IP address such as 127.0.0.1 (names are not granted)", s)
	}
	if a.Is4In6() || (a.Is6() && strings.Contains(host, ".")) {
		return netip.AddrPort{}, fmt.Errorf("%q: write an IPv4 address as a.b.c.d", s)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != port {
		return netip.AddrPort{}, fmt.Errorf("%q: PORT must be 1…65535", s)
	}
	if a.IsUnspecified() || a.IsMulticast() {
		return netip.AddrPort{}, fmt.Errorf("%q: not an address one connects to", s)
	}
	return netip.AddrPortFrom(a, uint16(n)), nil
}

// ProxyPort is the port of the proxy on the sandbox's own 127.0.0.1: 3128
// unless a loopback grant takes it. It is known before the sandbox
// exists, so its environment can name it.
func (p Policy) ProxyPort() uint16 {
	port := uint16(3128)
	for {
		taken := false
		for _, g := range p.Local {
			if g.Port() == port && g.Addr().Is4() && g.Addr().IsLoopback() {
				taken = true
			}
		}
		if !taken {
			return port
		}
		port++
	}
}

// EnvLocal is the environment variable naming the `net local` grants for
// the programs inside (fetch reads it to say what to add, and to reach a
// granted loopback address directly); it grants nothing by itself.
const EnvLocal = "CTX_NET_LOCAL"

// NoProxy is the sandbox's NO_PROXY: its own loopback. Loopback inside
// the sandbox is its own network namespace — servers an agent runs there
// (OpenCode's ACP mode talks to its own HTTP server on 127.0.0.1) and the
// listeners of `net local` loopback grants — while the proxy can only
// reach the host's loopback, a different place: a client that sent
// 127.0.0.1 to the proxy never reached the server beside it.
const NoProxy = "localhost,127.0.0.1,::1"

// Env is what a `net` sandbox's programs get: the proxy for HTTP and
// HTTPS (curl, pip, npm, git over https, Go and Node with
// NODE_USE_ENV_PROXY), NO_PROXY = the sandbox's own loopback, and the
// grants.
func (p Policy) Env() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(int(p.ProxyPort()))
	local := make([]string, len(p.Local))
	for i, g := range p.Local {
		local[i] = g.String()
	}
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": NoProxy, "no_proxy": NoProxy, "NODE_USE_ENV_PROXY": "1",
		EnvLocal: strings.Join(local, " "),
	}
}

// Listens are the loopback addresses the sandbox's netns listens on:
// the proxy first, then each loopback grant.
func (p Policy) Listens() []netip.AddrPort {
	out := []netip.AddrPort{netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), p.ProxyPort())}
	for _, g := range p.Local {
		if g.Addr().IsLoopback() {
			out = append(out, g)
		}
	}
	return out
}
