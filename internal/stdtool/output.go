package stdtool

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Output is a tool's result: at most Budget bytes, cut at a line boundary,
// valid UTF-8, followed by a note saying what was cut and how to get the
// rest (Hint). Writes past the budget are counted, not kept; a tool doing a
// long walk checks Full to stop early.
type Output struct {
	w       io.Writer
	buf     bytes.Buffer
	cut     bool
	dropped int64 // bytes not kept
	lines   int64 // whole lines not kept
	// Hint is how to get what was cut ("read on with --offset 2001"); it
	// ends the cut note.
	Hint  string
	notes []string
}

// NewOutput writes to w on Flush.
func NewOutput(w io.Writer) *Output { return &Output{w: w} }

// Write keeps p while it fits in the budget; the rest is counted.
func (o *Output) Write(p []byte) (int, error) {
	n := len(p)
	if o.cut {
		o.dropped += int64(n)
		o.lines += int64(bytes.Count(p, []byte{'\n'}))
		return n, nil
	}
	room := Budget - o.buf.Len()
	if len(p) <= room {
		o.buf.Write(p)
		return n, nil
	}
	o.buf.Write(p[:room])
	o.cut = true
	o.dropped += int64(len(p) - room)
	o.lines += int64(bytes.Count(p[room:], []byte{'\n'}))
	// Cut at the last line boundary kept; one line longer than the whole
	// budget is cut on a rune boundary instead.
	b := o.buf.Bytes()
	k := bytes.LastIndexByte(b, '\n') + 1
	if k == 0 {
		k = len(b)
		j := k - 1
		for j > 0 && !utf8.RuneStart(b[j]) {
			j--
		}
		if j >= 0 && !utf8.FullRune(b[j:]) {
			k = j
		}
	}
	o.dropped += int64(len(b) - k)
	o.buf.Truncate(k)
	return n, nil
}

// WriteString is Write of s.
func (o *Output) WriteString(s string) (int, error) { return o.Write([]byte(s)) }

// Printf formats into the output.
func (o *Output) Printf(format string, args ...any) { fmt.Fprintf(o, format, args...) }

// Full reports whether the budget is spent: nothing more will be kept.
func (o *Output) Full() bool { return o.cut }

// Cut marks the output cut even though it fits (the tool stopped early on
// a cap of its own); set Hint to say how to get the rest.
func (o *Output) Cut() { o.cut = true }

// Note adds a line printed after the result and any cut note, outside the
// budget (keep notes short).
func (o *Output) Note(format string, args ...any) {
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
}

// Flush writes the kept bytes (invalid UTF-8 replaced), the cut note and
// the notes.
func (o *Output) Flush() error {
	var b strings.Builder
	b.WriteString(ValidUTF8(o.buf.String()))
	if o.cut {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[output cut")
		if o.dropped > 0 {
			fmt.Fprintf(&b, ": %d more bytes", o.dropped)
			if o.lines > 0 {
				fmt.Fprintf(&b, " (%d lines)", o.lines)
			}
			b.WriteString(" not shown")
		}
		if o.Hint != "" {
			b.WriteString("; " + o.Hint)
		}
		b.WriteString("]\n")
	}
	for _, n := range o.notes {
		b.WriteString(ValidUTF8(n))
		if !strings.HasSuffix(n, "\n") {
			b.WriteByte('\n')
		}
	}
	o.buf.Reset()
	o.notes = nil
	_, err := io.WriteString(o.w, b.String())
	return err
}

// ValidUTF8 replaces invalid UTF-8 with U+FFFD.
func ValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
