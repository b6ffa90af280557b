package ctxterm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frame types. A frame is [type byte][length uint32 big-endian][payload].
const (
	// FrameData carries terminal bytes: program output (server → client) or
	// keyboard input (client → server, attach only; dropped on a watch
	// connection).
	FrameData byte = 0x01
	// FrameResize carries cols then rows, each uint16 big-endian (4 bytes).
	// Client → server, honoured on attach connections only.
	FrameResize byte = 0x02
	// FrameExit carries the program's exit status as int32 big-endian
	// (128+N when killed by signal N). Server → client, the last frame.
	FrameExit byte = 0x03
	// FrameError carries a UTF-8 reason. Server → client, then the server
	// closes the connection.
	FrameError byte = 0x04
	// FrameReady carries a JSON [Ready] object. Server → client, the first
	// frame, sent once the connection is accepted.
	FrameReady byte = 0x05
)

const (
	// HeaderLen is the size of a frame header.
	HeaderLen = 5
	// MaxPayload is the largest payload either side may send; a larger
	// length is a protocol error and closes the connection.
	MaxPayload = 1 << 16
	// MaxHelloLen bounds the hello line, newline excluded.
	MaxHelloLen = 4096
	// ProtocolVersion is the version this package speaks.
	ProtocolVersion = 1
)

// ErrProtocol is wrapped by every malformed-input error: bad hello, oversized
// frame, unknown frame type, bad payload.
var ErrProtocol = errors.New("ctxterm protocol error")

// Mode is how a client joins the terminal.
type Mode string

const (
	// ModeWatch is read-only: the server never forwards its bytes to the PTY.
	ModeWatch Mode = "watch"
	// ModeAttach is read-write: input and resize reach the PTY.
	ModeAttach Mode = "attach"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { return m == ModeWatch || m == ModeAttach }

// Hello is the client's first message: one JSON object on one line.
type Hello struct {
	V    int  `json:"v,omitempty"` // protocol version; 0 or absent means 1
	Mode Mode `json:"mode"`
	Cols int  `json:"cols,omitempty"` // 0: leave the size alone
	Rows int  `json:"rows,omitempty"`
}

// Marshal renders h as its wire line, newline included.
func (h Hello) Marshal() []byte {
	b, _ := json.Marshal(h) // cannot fail: plain fields
	return append(b, '\n')
}

// ParseHello validates one hello line (without its newline).
func ParseHello(line []byte) (Hello, error) {
	var h Hello
	if len(line) > MaxHelloLen {
		return h, fmt.Errorf("hello: %d bytes, over %d: %w", len(line), MaxHelloLen, ErrProtocol)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&h); err != nil {
		return Hello{}, fmt.Errorf("hello: %v: %w", err, ErrProtocol)
	}
	if dec.More() {
		return Hello{}, fmt.Errorf("hello: trailing data: %w", ErrProtocol)
	}
	if h.V != 0 && h.V != ProtocolVersion {
		return Hello{}, fmt.Errorf("hello: version %d unsupported (want %d): %w", h.V, ProtocolVersion, ErrProtocol)
	}
	if !h.Mode.Valid() {
		return Hello{}, fmt.Errorf("hello: mode %q: want watch or attach: %w", h.Mode, ErrProtocol)
	}
	if h.Cols < 0 || h.Cols > 0xFFFF || h.Rows < 0 || h.Rows > 0xFFFF {
		return Hello{}, fmt.Errorf("hello: size %dx%d out of range: %w", h.Cols, h.Rows, ErrProtocol)
	}
	return h, nil
}

// Ready is the payload of the server's first frame.
type Ready struct {
	V    int  `json:"v"`
	Mode Mode `json:"mode"` // the mode the server granted
	PID  int  `json:"pid"`  // the program's pid
	Cols int  `json:"cols"` // the PTY's size when the client joined
	Rows int  `json:"rows"`
}

// Frame is one decoded frame. Payload is only valid until the next call to
// [Decoder.Next].
type Frame struct {
	Type    byte
	Payload []byte
}

// AppendFrame appends the encoding of one frame to dst.
func AppendFrame(dst []byte, typ byte, payload []byte) []byte {
	dst = append(dst, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(len(payload)))
	return append(dst, payload...)
}

// putHeader writes a frame header into h (len(h) >= HeaderLen).
func putHeader(h []byte, typ byte, n int) {
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:5], uint32(n))
}

// ResizePayload encodes a resize.
func ResizePayload(cols, rows uint16) []byte {
	var p [4]byte
	binary.BigEndian.PutUint16(p[0:2], cols)
	binary.BigEndian.PutUint16(p[2:4], rows)
	return p[:]
}

// ParseResize decodes a resize payload.
func ParseResize(p []byte) (cols, rows uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("resize: %d-byte payload, want 4: %w", len(p), ErrProtocol)
	}
	return binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4]), nil
}

// ExitPayload encodes an exit status.
func ExitPayload(status int) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(int32(status)))
	return p[:]
}

// ParseExit decodes an exit payload.
func ParseExit(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("exit: %d-byte payload, want 4: %w", len(p), ErrProtocol)
	}
	return int(int32(binary.BigEndian.Uint32(p))), nil
}

// knownType reports whether typ is a frame type of this protocol version.
func knownType(typ byte) bool { return typ >= FrameData && typ <= FrameReady }

// Decoder reads frames from a stream. It never allocates more than max bytes
// for a payload, whatever the header claims.
type Decoder struct {
	r   io.Reader
	max int
	hdr [HeaderLen]byte
	buf []byte
}

// NewDecoder returns a decoder that refuses payloads over max bytes
// (max <= 0 or over MaxPayload means MaxPayload).
func NewDecoder(r io.Reader, max int) *Decoder {
	if max <= 0 || max > MaxPayload {
		max = MaxPayload
	}
	return &Decoder{r: r, max: max}
}

// Next reads one frame. A clean end of stream between frames is io.EOF; a
// stream cut inside a frame is io.ErrUnexpectedEOF; an unknown type or an
// oversized length wraps ErrProtocol and leaves the stream unusable.
func (d *Decoder) Next() (Frame, error) {
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		return Frame{}, err
	}
	typ := d.hdr[0]
	n := binary.BigEndian.Uint32(d.hdr[1:])
	if !knownType(typ) {
		return Frame{}, fmt.Errorf("frame type 0x%02x unknown: %w", typ, ErrProtocol)
	}
	if n > uint32(d.max) {
		return Frame{}, fmt.Errorf("frame type 0x%02x: %d-byte payload over %d: %w", typ, n, d.max, ErrProtocol)
	}
	if cap(d.buf) < int(n) {
		d.buf = make([]byte, n, max(int(n), 4096))
	}
	p := d.buf[:n]
	if _, err := io.ReadFull(d.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return Frame{Type: typ, Payload: p}, nil
}

// validReason trims an error reason to something printable and bounded.
func validReason(s string) string {
	if len(s) > 1024 {
		s = s[:1024]
	}
	return string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
}
