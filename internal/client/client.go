// Package client is the CLI's side of the sockets: find (or start) the
// daemon, connect to an agent socket, send requests and read frames.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// ErrNoDaemon means no daemon answered and none could be started.
var ErrNoDaemon = errors.New("no daemon")

// Ping asks the system socket for a pong.
func Ping(ctx context.Context, l layout.Layout) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := ipc.Dial(ctx, l.SystemSocket())
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(`{"op":"ping"}` + "\n")); err != nil {
		return err
	}
	line, err := ipc.NewLineReader(c).Next()
	if err != nil {
		return err
	}
	var f ipc.Frame
	if json.Unmarshal(line, &f) != nil || f.Type != ipc.TypePong {
		return fmt.Errorf("unexpected answer to ping: %.200s", line)
	}
	return nil
}

// EnsureDaemon pings the daemon and, unless CTX_NO_AUTOSTART=1, starts
// `ctx daemon` in the background (own session, log in daemon.log) and waits
// for its ping.
func EnsureDaemon(ctx context.Context, l layout.Layout) error {
	if Ping(ctx, l) == nil {
		return nil
	}
	if os.Getenv("CTX_NO_AUTOSTART") == "1" {
		return fmt.Errorf("%w: nothing answers on %s; start one with `ctx daemon` (or unset CTX_NO_AUTOSTART)", ErrNoDaemon, l.SystemSocket())
	}
	if err := l.EnsureRuntime(); err != nil {
		return fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	bin, err := DaemonBinary()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	logf, err := os.OpenFile(l.DaemonLog(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "daemon")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start daemon: %v", ErrNoDaemon, err)
	}
	go cmd.Wait() // reap it if it dies early; it outlives us otherwise
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if Ping(ctx, l) == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%w: started `ctx daemon` but it did not answer; see %s", ErrNoDaemon, l.DaemonLog())
}

// DaemonBinary is ctxd beside this executable: `ctx daemon`, `ctx doctor`
// and auto-start exec it.
func DaemonBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(filepath.Dir(self), "ctxd")
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		return "", fmt.Errorf("the daemon binary ctxd is not beside %s (install ctxd with ctx: make install)", self)
	}
	return bin, nil
}

// Conn is a client connection to an agent socket.
type Conn struct {
	c   *net.UnixConn
	lr  *ipc.LineReader
	wmu sync.Mutex // a follower's reattach and its caller's cancel may write at once
	w   *bufio.Writer
}

// DialAgent connects to an agent's socket: the runtime path, then the
// agent/<name>.sock alias.
func DialAgent(ctx context.Context, l layout.Layout, name string) (*Conn, error) {
	var c *net.UnixConn
	var err error
	deadline := time.Now().Add(3 * time.Second)
	for {
		// A definition created a moment ago is served within a second.
		c, err = ipc.Dial(ctx, l.RuntimeAgentSocket(name), l.AgentSocket(name))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	return &Conn{c: c, lr: ipc.NewLineReaderSize(c, ipc.MaxFrameLine), w: bufio.NewWriter(c)}, nil
}

// DialAgentOnce tries the agent socket once, without waiting.
func DialAgentOnce(ctx context.Context, l layout.Layout, name string) (*Conn, error) {
	c, err := ipc.Dial(ctx, l.RuntimeAgentSocket(name), l.AgentSocket(name))
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, lr: ipc.NewLineReaderSize(c, ipc.MaxFrameLine), w: bufio.NewWriter(c)}, nil
}

// Encode is r's request line without its newline: JSON without HTML
// escaping (a '<' stays one byte, so a message's size is what it looks).
func Encode(r any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Send writes one request line.
func (c *Conn) Send(r any) error {
	b, err := Encode(r)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return c.w.Flush()
}

// Next reads one frame; raw is its exact line.
func (c *Conn) Next() (*ipc.Frame, []byte, error) {
	line, err := c.lr.Next()
	if err != nil {
		return nil, nil, err
	}
	if c.lr.Cut() {
		// The daemon writes whole lines; one without its newline is a
		// connection cut mid-frame (a drop), not a bad frame.
		return nil, nil, fmt.Errorf("connection closed in the middle of a frame: %w", io.ErrUnexpectedEOF)
	}
	var f ipc.Frame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, line, fmt.Errorf("bad frame from daemon: %w", err)
	}
	return &f, line, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// NewID makes a fresh request id.
func NewID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// AgentExists reports whether the definition's object exists.
func AgentExists(l layout.Layout, name string) bool {
	st, err := os.Lstat(filepath.Join(l.AgentDir(), name))
	return err == nil && st.Mode().IsRegular()
}
