package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// Network attacks (docs/walls.md "The network"): a `net` sandbox tries to
// reach the host's own services. Each prints what it got back; the tests
// check the host's servers too.
func init() {
	// net-dial HOST:PORT…: connect directly and send an HTTP request.
	register("net-dial", func(args []string) int {
		for _, a := range args {
			say("dial_"+a, exchange(func() (net.Conn, error) { return net.DialTimeout("tcp", a, 3*time.Second) },
				"GET / HTTP/1.0\r\nHost: "+a+"\r\n\r\n"))
		}
		return 0
	})
	// net-abstract NAME…: connect to the abstract unix socket @NAME.
	register("net-abstract", func(args []string) int {
		for _, a := range args {
			say("abstract_"+a, exchange(func() (net.Conn, error) { return net.DialTimeout("unix", "@"+a, 3*time.Second) }, "hello\n"))
		}
		return 0
	})
	// net-proxy HOST:PORT…: through the proxy of the environment, CONNECT
	// (then an HTTP request in the tunnel) and a plain absolute-URI GET.
	register("net-proxy", func(args []string) int {
		p := os.Getenv("HTTP_PROXY")
		say("proxy", p)
		host := strings.TrimPrefix(strings.TrimSuffix(p, "/"), "http://")
		if host == "" {
			return 0
		}
		for _, a := range args {
			say("connect_"+a, exchange(func() (net.Conn, error) { return net.DialTimeout("tcp", host, 3*time.Second) },
				"CONNECT "+a+" HTTP/1.1\r\nHost: "+a+"\r\n\r\nGET / HTTP/1.0\r\nHost: "+a+"\r\n\r\n"))
			say("get_"+a, exchange(func() (net.Conn, error) { return net.DialTimeout("tcp", host, 3*time.Second) },
				"GET http://"+a+"/ HTTP/1.1\r\nHost: "+a+"\r\nConnection: close\r\n\r\n"))
		}
		return 0
	})
}

// exchange connects, writes req, and returns everything read back (on
// one line) or the error.
func exchange(dial func() (net.Conn, error), req string) string {
	c, err := dial()
	if err != nil {
		return "refused: " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "write: " + err.Error()
	}
	var b strings.Builder
	r := bufio.NewReader(io.LimitReader(c, 4096))
	for {
		l, err := r.ReadString('\n')
		b.WriteString(strings.TrimRight(l, "\r\n") + "|")
		if err != nil {
			break
		}
	}
	return fmt.Sprintf("connected: %s", b.String())
}
