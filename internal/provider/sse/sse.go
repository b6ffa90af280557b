// Package sse reads a text/event-stream (the WHATWG "server-sent events"
// format) one event at a time, with a bound on the size of every event.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is returned when a line or an event's data exceeds the reader's limit.
var ErrTooLarge = errors.New("sse: event too large")

// DefaultMax bounds one event's data (and one line) when NewReader is given 0.
const DefaultMax = 4 << 20

// Event is one dispatched event.
type Event struct {
	Type string // the "event" field; empty means the default type "message"
	Data string // the "data" lines joined with "\n"
	ID   string // the last event ID seen so far
	// Error holds the "error" lines joined with "\n". The field is not part
	// of the standard, which ignores unknown fields; llama.cpp's server
	// reports a failure inside a stream with it ("error: {json}"), so the
	// reader keeps it instead of dropping the server's message.
	Error string
}

// Reader parses a stream as the WHATWG HTML standard ("Interpreting an event
// stream") prescribes: lines end in CRLF, LF or CR; a line starting with ':' is
// a comment; "field: value" loses one space after the colon; a blank line
// dispatches the event if any data was buffered; an event cut off by the end
// of the stream is discarded, never dispatched.
type Reader struct {
	br      *bufio.Reader
	max     int
	line    []byte
	data    []byte
	errData []byte
	typ     string
	id      string
	skipLF  bool // the previous line ended in CR: a following LF belongs to it
	started bool // the optional leading BOM has been handled
}

// NewReader reads events from r; max bounds a line and an event's data
// (DefaultMax when max <= 0).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMax
	}
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), max: max}
}

// Next returns the next event. At the end of the stream it returns io.EOF
// (any partial event is dropped); other read errors are returned as they are.
func (r *Reader) Next() (Event, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
		}
		if len(line) == 0 {
			if len(r.data) == 0 && len(r.errData) == 0 {
				r.typ = ""
				continue
			}
			ev := Event{Type: r.typ, ID: r.id}
			if len(r.data) > 0 {
				ev.Data = string(r.data[:len(r.data)-1])
			}
			if len(r.errData) > 0 {
				ev.Error = string(r.errData[:len(r.errData)-1])
			}
			r.data, r.errData, r.typ = r.data[:0], r.errData[:0], ""
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			r.typ = string(value)
		case "data":
			if len(r.data)+len(value)+1 > r.max {
				return Event{}, fmt.Errorf("%w: data over %d bytes", ErrTooLarge, r.max)
			}
			r.data = append(r.data, value...)
			r.data = append(r.data, '\n')
		case "error":
			if len(r.errData)+len(value)+1 > r.max {
				return Event{}, fmt.Errorf("%w: error over %d bytes", ErrTooLarge, r.max)
			}
			r.errData = append(r.errData, value...)
			r.errData = append(r.errData, '\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.id = string(value)
			}
		default: // "retry" and unknown fields are ignored
		}
	}
}

// readLine returns the next line without its terminator; the slice is valid
// until the next call. A line not terminated before EOF yields io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			return nil, err
		}
		if r.skipLF {
			r.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return r.line, nil
		case '\r':
			r.skipLF = true
			return r.line, nil
		}
		if len(r.line) >= r.max {
			return nil, fmt.Errorf("%w: line over %d bytes", ErrTooLarge, r.max)
		}
		r.line = append(r.line, b)
	}
}
