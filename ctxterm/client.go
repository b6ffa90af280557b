package ctxterm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Client-side error classes.
var (
	// ErrUnavailable: nothing answers on the socket (missing, refused, not a
	// socket). The CLI maps it to exit 3 (runtime.md T4).
	ErrUnavailable = errors.New("terminal socket unavailable")
	// ErrDetached: the user pressed the detach key.
	ErrDetached = errors.New("detached")
	// ErrConnLost: the connection ended without an exit frame.
	ErrConnLost = errors.New("terminal connection lost")
)

// ServerError is a reason the server sent in an error frame before closing.
type ServerError struct{ Reason string }

func (e *ServerError) Error() string { return "ctxterm server: " + e.Reason }

const dialTimeout = 5 * time.Second

// Conn is a client connection to a terminal server. Reads (Next,
// CopyOutput) belong to one goroutine; Write and Resize may be called from
// another.
type Conn struct {
	c     *net.UnixConn
	dec   *Decoder
	ready Ready
	wmu   sync.Mutex
	wbuf  []byte
}

// Dial joins the terminal at path in mode, leaving its size alone.
func Dial(path string, mode Mode) (*Conn, error) {
	return DialHello(path, Hello{Mode: mode})
}

// DialHello joins the terminal with an explicit hello (mode and, for attach,
// the size to apply). It returns once the server accepted the connection: an
// error wrapping ErrUnavailable if nothing answers, a *ServerError if the
// server refused.
func DialHello(path string, h Hello) (*Conn, error) {
	nc, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("ctxterm: dial %s: %w: %w", path, ErrUnavailable, err)
	}
	uc := nc.(*net.UnixConn)
	c := &Conn{c: uc, dec: NewDecoder(bufio.NewReaderSize(uc, 128<<10), MaxPayload)}
	_ = uc.SetDeadline(time.Now().Add(dialTimeout))
	_, werr := uc.Write(h.Marshal())
	// Even if the write failed (a refusing server may close before reading
	// the hello), its error frame may be waiting: read it first.
	f, err := c.dec.Next()
	if err != nil {
		uc.Close()
		if werr != nil {
			err = werr
		}
		return nil, fmt.Errorf("ctxterm: join %s: %w: %w", path, ErrUnavailable, err)
	}
	switch f.Type {
	case FrameReady:
		if err := json.Unmarshal(f.Payload, &c.ready); err != nil {
			uc.Close()
			return nil, fmt.Errorf("ctxterm: ready frame: %v: %w", err, ErrProtocol)
		}
	case FrameError:
		uc.Close()
		return nil, fmt.Errorf("ctxterm: join %s: %w", path, &ServerError{Reason: string(f.Payload)})
	default:
		uc.Close()
		return nil, fmt.Errorf("ctxterm: join %s: first frame 0x%02x: %w", path, f.Type, ErrProtocol)
	}
	_ = uc.SetDeadline(time.Time{})
	return c, nil
}

// Ready is what the server said when it accepted the connection.
func (c *Conn) Ready() Ready { return c.ready }

// Write sends p as input (data frames of at most MaxPayload bytes). On a
// watch connection the server discards it.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = c.wbuf[:0]
	for rest := p; len(rest) > 0; {
		n := min(len(rest), MaxPayload)
		c.wbuf = AppendFrame(c.wbuf, FrameData, rest[:n])
		rest = rest[n:]
	}
	if _, err := c.c.Write(c.wbuf); err != nil {
		return 0, fmt.Errorf("ctxterm: send input: %w", err)
	}
	return len(p), nil
}

// WriteFrame sends one raw frame (tests and tools; Write and Resize are
// the usual way).
func (c *Conn) WriteFrame(typ byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.c.Write(AppendFrame(nil, typ, payload)); err != nil {
		return fmt.Errorf("ctxterm: send frame: %w", err)
	}
	return nil
}

// Resize asks the server to resize the PTY (honoured for attach only).
func (c *Conn) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 0xFFFF || rows > 0xFFFF {
		return fmt.Errorf("ctxterm: resize %dx%d: out of range", cols, rows)
	}
	return c.WriteFrame(FrameResize, ResizePayload(uint16(cols), uint16(rows)))
}

// Next reads the next frame; its payload is valid until the next call.
func (c *Conn) Next() (Frame, error) { return c.dec.Next() }

// CopyOutput copies the terminal's output to w until the program exits and
// returns its status. An error frame yields a *ServerError; a connection
// that ends without an exit frame yields ErrConnLost.
func (c *Conn) CopyOutput(w io.Writer) (int, error) {
	for {
		f, err := c.dec.Next()
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				return -1, fmt.Errorf("ctxterm: output: %w", err)
			}
			return -1, fmt.Errorf("ctxterm: output: %w: %w", ErrConnLost, err)
		}
		switch f.Type {
		case FrameData:
			if _, err := w.Write(f.Payload); err != nil {
				return -1, fmt.Errorf("ctxterm: write output: %w", err)
			}
		case FrameExit:
			return ParseExit(f.Payload)
		case FrameError:
			return -1, fmt.Errorf("ctxterm: output: %w", &ServerError{Reason: string(f.Payload)})
		default:
			return -1, fmt.Errorf("ctxterm: output: unexpected frame 0x%02x: %w", f.Type, ErrProtocol)
		}
	}
}

// Close closes the connection (the server records a detach).
func (c *Conn) Close() error { return c.c.Close() }

// SetDeadline sets the read and write deadline of the connection.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }
