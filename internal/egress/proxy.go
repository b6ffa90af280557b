// Package egress is the network a `net` sandbox gets: its own network
// namespace (only its own lo), and the daemon connecting out on its
// behalf, after internal/netpolicy's checks, through an HTTP proxy and
// `net local` forwarders whose listening sockets live inside that
// namespace (README "The network"; docs/walls.md "The network").
package egress

import (
	"github.com/cortexfs/ctx/internal/netpolicy"

	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resolver looks names up for the proxy (net.DefaultResolver; tests
// inject their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects out on the host's network (a net.Dialer; tests inject
// their own).
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Proxy connects out for one sandbox: it is handed listeners that live in
// the sandbox's network namespace and serves them until Close.
type Proxy struct {
	Policy   netpolicy.Policy
	Resolver Resolver
	Dialer   Dialer
	Log      *slog.Logger

	mu     sync.Mutex
	closed bool
	lns    []net.Listener
	conns  map[net.Conn]struct{}
	active int // accepted connections being served
	wg     sync.WaitGroup
}

const (
	// dialTimeout bounds one outbound connect (and a name lookup).
	dialTimeout = 15 * time.Second
	// maxConns bounds the connections one sandbox has served at once: each
	// holds descriptors and goroutines of the daemon, which a sandbox must
	// not exhaust. Past it a new connection is closed at once.
	maxConns = 256
	// maxHeader bounds a proxy request's line and headers.
	maxHeader = 64 << 10
)

func (p *Proxy) log() *slog.Logger {
	if p.Log == nil {
		return slog.Default()
	}
	return p.Log
}

func (p *Proxy) resolver() Resolver {
	if p.Resolver == nil {
		return net.DefaultResolver
	}
	return p.Resolver
}

func (p *Proxy) dialer() Dialer {
	if p.Dialer == nil {
		return &net.Dialer{Timeout: dialTimeout}
	}
	return p.Dialer
}

// track registers c (a listener or connection) so Close ends it; false
// when the proxy is already closed (c is then closed).
func (p *Proxy) track(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	switch v := c.(type) {
	case net.Listener:
		p.lns = append(p.lns, v)
	case net.Conn:
		if p.conns == nil {
			p.conns = map[net.Conn]struct{}{}
		}
		p.conns[v] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// Close stops every listener and connection of the sandbox and waits for
// their goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for _, l := range p.lns {
		_ = l.Close()
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// ServeProxy accepts on ln (the proxy's listener) until Close.
func (p *Proxy) ServeProxy(ln net.Listener) { p.serve(ln, p.handleProxy) }

// ServeForward accepts on ln (a loopback `net local` grant's listener in
// the sandbox) and forwards each connection to exactly to, on the host.
func (p *Proxy) ServeForward(ln net.Listener, to netip.AddrPort) {
	p.serve(ln, func(c net.Conn) {
		// spec: V3 — the listener exists only for a grant; checked again here
		// so the forwarder and the proxy follow one rule.
		out, err := p.connect(context.Background(), to.String(), []netip.AddrPort{to})
		if err != nil {
			p.log().Info("egress refused", "target", to.String(), "err", err)
			return
		}
		p.splice(c, out, nil)
	})
}

func (p *Proxy) serve(ln net.Listener, handle func(net.Conn)) {
	if !p.track(ln) {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			p.mu.Lock()
			full := p.active >= maxConns
			if !full {
				p.active++
			}
			p.mu.Unlock()
			if full {
				p.log().Warn("egress: too many connections from one sandbox; closing a new one", "max", maxConns)
				_ = c.Close()
				continue
			}
			if !p.track(c) {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer func() {
					p.mu.Lock()
					p.active--
					p.mu.Unlock()
				}()
				defer p.untrack(c)
				handle(c)
			}()
		}
	}()
}

// Resolve turns the host:port a sandbox asked for into the addresses the
// daemon may connect to; the error is a Refusal when every address is
// refused. Each address is checked, and only checked addresses are
// dialled, so a name cannot resolve again to something else.
func (p *Proxy) Resolve(ctx context.Context, target string) ([]netip.AddrPort, error) {
	host, portS, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("%q: want HOST:PORT: %w", target, err)
	}
	port, err := strconv.ParseUint(portS, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("%q: bad port", target)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, fmt.Errorf("%q: an address with a zone is not reached", target)
		}
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		if addrs, err = p.resolver().LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("%s: %w", host, err)
		}
	}
	var ok []netip.AddrPort
	var first error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if err := p.Policy.Check(target, ap); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		ok = append(ok, ap)
	}
	if len(ok) == 0 {
		if first == nil {
			first = fmt.Errorf("%s: no address", host)
		}
		return nil, first
	}
	return ok, nil
}

// DialContext connects to addr (HOST:PORT) for the daemon itself acting
// for an agent — an MCP server declared by URL — with the same one check as
// a sandbox's connection: the name is resolved once, each address judged by
// Policy, and only a judged address dialled. A name that resolves to the
// host's loopback or private networks is refused unless granted. spec: V3
func (p *Proxy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, fmt.Errorf("%s %s: only tcp is dialled", network, addr)
	}
	addrs, err := p.Resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	return p.connect(ctx, addr, addrs)
}

// connect dials the first of addrs that answers (each already checked).
func (p *Proxy) connect(ctx context.Context, target string, addrs []netip.AddrPort) (net.Conn, error) {
	var last error
	for _, ap := range addrs {
		// spec: V3 — the one check, right before the only dial.
		if err := p.Policy.Check(target, ap); err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := p.dialer().DialContext(dctx, "tcp", ap.String())
		cancel()
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%s: %w", target, last)
}

// handleProxy serves one client of the HTTP proxy: CONNECT host:port, or
// one plain request with an absolute http:// URI.
func (p *Proxy) handleProxy(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	lim := &headerLimit{r: c, n: maxHeader}
	br := bufio.NewReader(lim)
	req, err := http.ReadRequest(br)
	if err != nil {
		if lim.n <= 0 {
			reply(c, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request line and headers over %d bytes", maxHeader))
		}
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	lim.n = -1 // the body and the tunnel are not bounded
	ctx := context.Background()
	var target string
	if req.Method == http.MethodConnect {
		target = req.Host
	} else {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			reply(c, http.StatusBadRequest, "the proxy takes CONNECT HOST:PORT or an absolute http:// URI")
			return
		}
		target = req.URL.Host
		if req.URL.Port() == "" {
			target = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	addrs, err := p.Resolve(ctx, target)
	if err != nil {
		p.log().Info("egress refused", "target", target, "err", err)
		code := http.StatusBadGateway
		if errors.Is(err, netpolicy.ErrRefused) {
			code = http.StatusForbidden
		}
		reply(c, code, err.Error())
		return
	}
	out, err := p.connect(ctx, target, addrs)
	if err != nil {
		reply(c, http.StatusBadGateway, err.Error())
		return
	}
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			_ = out.Close()
			return
		}
		p.splice(c, out, br)
		return
	}
	// One request in origin form, then the response as it comes; the
	// connection closes after it (no keep-alive across targets).
	req.RequestURI = ""
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	if err := req.Write(out); err != nil {
		_ = out.Close()
		reply(c, http.StatusBadGateway, err.Error())
		return
	}
	p.splice(c, out, br)
}

// headerLimit reads at most n bytes while n >= 0 (EOF after), any number
// once n is -1.
type headerLimit struct {
	r io.Reader
	n int
}

func (l *headerLimit) Read(b []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(b)
	}
	if l.n == 0 {
		return 0, io.EOF
	}
	if len(b) > l.n {
		b = b[:l.n]
	}
	k, err := l.r.Read(b)
	l.n -= k
	return k, err
}

// splice copies both ways until either side ends; in holds bytes the
// client sent after its request line (read ahead), sent first.
func (p *Proxy) splice(c, out net.Conn, in *bufio.Reader) {
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	var src io.Reader = c
	if in != nil {
		src = in
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(out, src)
		if tc, ok := out.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, out)
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// reply writes a short error response whose reason phrase carries msg, so
// a client that only shows the status (Go's CONNECT error) still tells why.
func reply(c net.Conn, code int, msg string) {
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	body := "ctx egress: " + msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s: ctx egress: %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), msg, len(body), body)
}
