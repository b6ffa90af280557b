package lineedit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/mattn/go-runewidth"
)

// ErrInterrupt is ReadLine's error for Ctrl+C.
var ErrInterrupt = errors.New("interrupted")

// Editor reads messages from a terminal in raw mode.
type Editor struct {
	in     io.Reader
	out    io.Writer
	prompt string
	width  int
	// Max is the most bytes a message may hold: typing stops there, and a
	// paste that would pass it is refused whole, with its size said.
	Max     int
	History *History

	pending []byte // read, not decoded yet
	buf     []rune
	pos     int
	// cursorRow is the row of the cursor, counted from the prompt's row,
	// after the last redraw: where the next redraw starts from.
	cursorRow int
	hist      int    // index into History while browsing; len = the new line
	draft     []rune // the new line while browsing the history
	prefill   []rune
}

// Prefill makes s the text the next ReadLine starts with (a message the
// caller could not send is given back, not lost).
func (e *Editor) Prefill(s string) { e.prefill = []rune(s) }

// New returns an editor reading keys from in and drawing on out (a
// terminal in raw mode: the editor writes "\r\n" itself). width is the
// terminal's columns.
func New(in io.Reader, out io.Writer, prompt string, width int) *Editor {
	if width <= 0 {
		width = 80
	}
	return &Editor{in: in, out: out, prompt: prompt, width: width, Max: 512 << 10}
}

// SetWidth changes the terminal's width for the next redraw.
func (e *Editor) SetWidth(w int) {
	if w > 0 {
		e.width = w
	}
}

// Bracketed paste: the terminal marks pasted text (ESC[200~ … ESC[201~),
// so a paste of many lines is one message, never one per line. The chat
// turns it on for its whole life: text pasted during a run reaches the
// editor marked too.
const (
	EnablePaste  = "\x1b[?2004h"
	DisablePaste = "\x1b[?2004l"
)

// collapseAt is the size from which the input is shown as a summary line
// rather than drawn whole (a 1 MB paste redrawn on every key).
const (
	collapseBytes = 2 << 10
	collapseLines = 24
)

// ReadLine reads one message: text up to Enter, with the newlines of
// pastes and of Alt+Enter / Ctrl+J kept. io.EOF at Ctrl+D on an empty
// message or end of input, ErrInterrupt at Ctrl+C.
func (e *Editor) ReadLine() (string, error) {
	e.buf, e.cursorRow, e.draft = append(e.buf[:0], e.prefill...), 0, nil
	e.pos, e.prefill = len(e.buf), nil
	if e.History != nil {
		e.hist = e.History.Len()
	}
	e.redraw()
	rbuf := make([]byte, 64<<10)
	for {
		for len(e.pending) > 0 {
			k, n := decode(e.pending)
			if n == 0 {
				break
			}
			e.pending = e.pending[n:]
			if k.kind == kindPasteStart {
				if err := e.readPaste(rbuf); err != nil {
					return "", err
				}
				continue
			}
			line, done, err := e.handle(k)
			if done || err != nil {
				e.pending = append([]byte(nil), e.pending...)
				return line, err
			}
		}
		if len(e.pending) == 1 && e.pending[0] == 0x1b {
			// A lone Escape at the end of what the terminal sent: the
			// Escape key, never the start of the next key's sequence.
			e.pending = e.pending[:0]
		}
		n, err := e.in.Read(rbuf)
		if n > 0 {
			e.pending = append(e.pending, rbuf[:n]...)
			continue
		}
		if err != nil {
			e.finish()
			return "", io.EOF
		}
	}
}

// readPaste collects the pasted bytes up to the end marker (scanning only
// what is new) and inserts them, or refuses the whole paste when the
// message would pass Max — reading on to the marker without keeping what
// is past the bound.
func (e *Editor) readPaste(rbuf []byte) error {
	var text []byte
	total := 0
	over := false
	scanFrom := 0
	for {
		if i := bytes.Index(e.pending[scanFrom:], []byte(pasteEnd)); i >= 0 {
			end := scanFrom + i
			total += end
			if !over {
				text = append(text, e.pending[:end]...)
			}
			e.pending = e.pending[end+len(pasteEnd):]
			break
		}
		// Keep the last bytes: the marker may be cut by the read.
		keep := len(e.pending) - (len(pasteEnd) - 1)
		if keep > 0 {
			total += keep
			if !over {
				text = append(text, e.pending[:keep]...)
			}
			e.pending = e.pending[keep:]
		}
		if !over && len(string(e.buf))+len(text) > e.Max {
			over, text = true, nil
		}
		scanFrom = 0
		n, err := e.in.Read(rbuf)
		if n > 0 {
			e.pending = append(e.pending, rbuf[:n]...)
			scanFrom = max(0, len(e.pending)-n-(len(pasteEnd)-1))
			continue
		}
		if err != nil {
			e.finish()
			return io.EOF
		}
	}
	if over || len(string(e.buf))+len(text) > e.Max {
		e.say(fmt.Sprintf("paste of %s refused: a message holds at most %s", size(total), size(e.Max)))
		return nil
	}
	e.insert(pasted(text))
	return nil
}

// pasted is the text of a paste as the message keeps it: CRLF and CR as
// LF, valid UTF-8, no control characters but tab and newline.
func pasted(b []byte) []rune {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.ToValidUTF8(s, "\uFFFD")
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			out = append(out, r)
		}
	}
	return out
}

// handle applies one key; done says the message is complete.
func (e *Editor) handle(k key) (string, bool, error) {
	switch k.kind {
	case kindRune:
		e.insert([]rune{k.r})
	case kindNewline:
		e.insert([]rune{'\n'})
	case kindEnter:
		line := string(e.buf)
		e.pos = len(e.buf)
		e.redraw()
		e.finish()
		if e.History != nil && strings.TrimSpace(line) != "" {
			e.History.Add(line)
		}
		return line, true, nil
	case kindInterrupt:
		e.finish()
		return "", true, ErrInterrupt
	case kindEOF:
		if len(e.buf) == 0 {
			e.finish()
			return "", true, io.EOF
		}
		e.delete(e.pos, e.pos+1)
	case kindBackspace:
		e.delete(e.pos-1, e.pos)
	case kindDelete:
		e.delete(e.pos, e.pos+1)
	case kindLeft:
		e.move(e.pos - 1)
	case kindRight:
		e.move(e.pos + 1)
	case kindHome:
		e.move(lineStart(e.buf, e.pos))
	case kindEnd:
		e.move(lineEnd(e.buf, e.pos))
	case kindWordLeft:
		e.move(wordLeft(e.buf, e.pos))
	case kindWordRight:
		e.move(wordRight(e.buf, e.pos))
	case kindKillLine:
		e.delete(0, len(e.buf))
	case kindKillEnd:
		e.delete(e.pos, lineEnd(e.buf, e.pos))
	case kindKillWord:
		e.delete(wordLeft(e.buf, e.pos), e.pos)
	case kindUp:
		e.browse(-1)
	case kindDown:
		e.browse(+1)
	case kindRedraw:
		e.cursorRow = 0
		io.WriteString(e.out, "\x1b[H\x1b[2J")
		e.redraw()
	}
	return "", false, nil
}

func (e *Editor) insert(rs []rune) {
	if len(string(e.buf))+len(string(rs)) > e.Max {
		e.say(fmt.Sprintf("a message holds at most %s", size(e.Max)))
		return
	}
	e.buf = append(e.buf[:e.pos], append(rs, e.buf[e.pos:]...)...)
	e.pos += len(rs)
	e.redraw()
}

func (e *Editor) delete(from, to int) {
	from, to = max(from, 0), min(to, len(e.buf))
	if from >= to {
		return
	}
	e.buf = append(e.buf[:from], e.buf[to:]...)
	e.pos = from
	e.redraw()
}

func (e *Editor) move(p int) {
	p = max(0, min(p, len(e.buf)))
	if p != e.pos {
		e.pos = p
		e.redraw()
	}
}

// browse moves through the history: up older, down newer, past the
// newest back to the message being written.
func (e *Editor) browse(d int) {
	if e.History == nil {
		return
	}
	n := e.History.Len()
	i := e.hist + d
	if i < 0 || i > n {
		return
	}
	if e.hist == n {
		e.draft = append([]rune(nil), e.buf...)
	}
	e.hist = i
	if i == n {
		e.buf = append(e.buf[:0], e.draft...)
	} else {
		e.buf = []rune(e.History.At(i))
	}
	e.pos = len(e.buf)
	e.redraw()
}

// say prints a note under the input and draws the input again below it.
func (e *Editor) say(msg string) {
	e.pos = len(e.buf)
	e.redraw()
	io.WriteString(e.out, "\r\n"+msg+"\r\n")
	e.cursorRow = 0
	e.redraw()
}

// finish leaves the cursor on a new line below the input.
func (e *Editor) finish() {
	e.pos = len(e.buf)
	e.redraw()
	io.WriteString(e.out, "\r\n")
	e.cursorRow = 0
}

// redraw writes the prompt and the input from the prompt's first row
// down, clearing what was below, and puts the cursor at pos.
func (e *Editor) redraw() {
	var b strings.Builder
	if e.cursorRow > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", e.cursorRow)
	}
	b.WriteString("\r\x1b[J")
	lines, curLine, curCol := e.layout()
	row, curRow, curX, endX := 0, 0, 0, 0
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
			row++
		}
		start := row
		b.WriteString(l.text)
		if l.cells > 0 {
			row += (l.cells - 1) / e.width
		}
		if i == curLine {
			curRow, curX = start+curCol/e.width, curCol%e.width
		}
		endX = l.cells % e.width
		if i == len(lines)-1 && l.cells > 0 && endX == 0 {
			// Exactly full: the terminal holds the cursor on the last
			// column until the next character; move it to the next row.
			b.WriteString("\r\n")
			row++
		}
	}
	e.cursorRow = curRow
	if curRow == row && curX == endX {
		io.WriteString(e.out, b.String()) // the cursor is at the end already
		return
	}
	if up := row - curRow; up > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", up)
	}
	b.WriteString("\r")
	if curX > 0 {
		fmt.Fprintf(&b, "\x1b[%dC", curX)
	}
	e.cursorRow = curRow
	io.WriteString(e.out, b.String())
}

type drawn struct {
	text  string
	cells int
}

// layout is the input as drawn lines (the prompt before the first, an
// indent before the others, or one summary line for a large input) and
// the cursor's line and column in cells.
func (e *Editor) layout() (lines []drawn, curLine, curCol int) {
	pw := runewidth.StringWidth(e.prompt)
	text := string(e.buf)
	if n := strings.Count(text, "\n"); len(text) > collapseBytes || n >= collapseLines {
		s := fmt.Sprintf("[%s, %d lines — Enter sends it, Ctrl+U clears it]", size(len(text)), n+1)
		return []drawn{{e.prompt + s, pw + runewidth.StringWidth(s)}}, 0, pw + runewidth.StringWidth(s)
	}
	indent := strings.Repeat(" ", pw)
	line, col := 0, pw
	start := 0
	for i := 0; i <= len(e.buf); i++ {
		if i == e.pos {
			curLine, curCol = line, col
		}
		if i == len(e.buf) || e.buf[i] == '\n' {
			prefix, w := e.prompt, pw
			if line > 0 {
				prefix, w = indent, pw
			}
			seg := strings.ReplaceAll(string(e.buf[start:i]), "\t", " ")
			lines = append(lines, drawn{prefix + seg, w + runewidth.StringWidth(seg)})
			line++
			col = pw
			start = i + 1
			continue
		}
		col += max(runewidth.RuneWidth(e.buf[i]), 1)
	}
	return lines, curLine, curCol
}

func lineStart(b []rune, p int) int {
	for p > 0 && b[p-1] != '\n' {
		p--
	}
	return p
}

func lineEnd(b []rune, p int) int {
	for p < len(b) && b[p] != '\n' {
		p++
	}
	return p
}

func wordLeft(b []rune, p int) int {
	for p > 0 && unicode.IsSpace(b[p-1]) {
		p--
	}
	for p > 0 && !unicode.IsSpace(b[p-1]) {
		p--
	}
	return p
}

func wordRight(b []rune, p int) int {
	for p < len(b) && unicode.IsSpace(b[p]) {
		p++
	}
	for p < len(b) && !unicode.IsSpace(b[p]) {
		p++
	}
	return p
}

// size says a byte count for people: "1,048,576 bytes".
func size(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String() + " bytes"
}
