package ipc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/unixsock"
)

// ErrSocketInUse means another live process serves the socket path.
var ErrSocketInUse = unixsock.ErrInUse

// Listen binds a unix socket at path with mode 0600 in a 0700 directory.
// A stale socket file (nobody answers) is removed; a live one is refused.
// See unixsock.Listen.
func Listen(path string) (*net.UnixListener, error) { return unixsock.Listen(path) }

// PeerCred returns the kernel's credentials of the process at the other end.
func PeerCred(c *net.UnixConn) (*unix.Ucred, error) { return unixsock.PeerCred(c) }

// ErrUnavailable means no daemon or socket answered.
var ErrUnavailable = errors.New("socket unavailable")

// Dial connects to the first of paths that answers.
func Dial(ctx context.Context, paths ...string) (*net.UnixConn, error) {
	var last error
	for _, p := range paths {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", p)
		if err == nil {
			return c.(*net.UnixConn), nil
		}
		last = err
	}
	return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// LineReader reads bounded JSONL lines.
type LineReader struct {
	r   *bufio.Reader
	max int
	cut bool // the last line ended at EOF, not at a newline
}

// Cut reports whether the line Next returned last ended at EOF without its
// newline: a writer that was cut off (a dropped connection) rather than a
// line written whole.
func (lr *LineReader) Cut() bool { return lr.cut }

// NewLineReader wraps r; lines are at most MaxLine bytes (requests).
func NewLineReader(r io.Reader) *LineReader { return NewLineReaderSize(r, MaxLine) }

// NewLineReaderSize wraps r; lines are at most max bytes (MaxFrameLine for
// the frames a client reads from the daemon).
func NewLineReaderSize(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line without its newline. A line over the bound
// returns ErrTooLarge (the rest of the stream is not resynchronised: the
// caller closes the connection, as interfaces.md pins). A final line without
// newline at EOF is returned; then io.EOF.
func (lr *LineReader) Next() ([]byte, error) {
	lr.cut = false
	var line []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		// The newline is not part of the line: without one (EOF or a full
		// buffer) max+1 bytes are already too many.
		if n := len(line) + len(chunk); n > lr.max+1 || n == lr.max+1 && err != nil {
			return nil, fmt.Errorf("line exceeds %d bytes: %w", lr.max, ErrTooLarge)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			lr.cut = true
			return line, nil
		default:
			return nil, err
		}
	}
}
