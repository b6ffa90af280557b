package stdtool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"syscall"
	"unicode/utf8"
)

const (
	// readLimit is how many lines read shows by default.
	readLimit = 2000
	// maxLineRunes is where read (and edit's view) cuts a long line.
	maxLineRunes = 2000
	// countAhead bounds how far read reads on, past what it shows, to say
	// how many lines the file has.
	countAhead = 64 << 20
)

func init() {
	register(&Tool{
		Name:  "read",
		Usage: "read PATH [--offset N] [--limit N]",
		Min:   1, Max: 1,
		Flags: []Flag{{Name: "--offset", Value: true}, {Name: "--limit", Value: true}},
		Meta: Meta{Description: `Print a text file with line numbers, like cat -n: the number right-aligned, a tab, the line.
argv: read PATH [--offset N] [--limit N] — start at line N (1-based, default 1), show N lines (default 2000).
example: read src/main.go --offset 120 --limit 80
Lines over 2000 characters are cut and marked "… [line cut: N more bytes]". CRLF line endings are shown without the \r (a note says so; edit and apply_patch keep them). The result holds at most 15 KiB: when the file goes on, the last line says which lines were shown and the --offset to read on from. Directories (use ls), binary files and non-regular files (FIFOs, devices) are refused.`},
		Run: runRead,
	})
}

func runRead(ctx context.Context, a *Args, out *Output) error {
	shown := a.Pos[0]
	offset, err := a.Int("--offset", 1, 1, math.MaxInt32)
	if err != nil {
		return Failf("%v", err)
	}
	limit, err := a.Int("--limit", readLimit, 1, math.MaxInt32)
	if err != nil {
		return Failf("%v", err)
	}
	abs, err := Abs(shown)
	if err != nil {
		return err
	}
	f, st, err := openRegular(abs, shown, "read")
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(SniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("read %s: %w", shown, err)
	}
	if len(head) == 0 {
		out.Printf("%s is empty (0 bytes)\n", shown)
		return nil
	}
	if IsBinary(head) {
		return Failf("%s is a binary file (%d bytes); read shows text files only", shown, st.Size())
	}

	lr := lineReader{br: br}
	var (
		n, first, last int64 // lines read; the first and last shown
		written        int
		crlf           bool
		stopped        string // "limit", "budget" or "" at the end
	)
	for {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		l, err := lr.next()
		if err != nil {
			return fmt.Errorf("read %s: %w", shown, err)
		}
		if !l.ok {
			break
		}
		n++
		if n < int64(offset) {
			continue
		}
		s := numberedLine(n, l.text, l.more)
		if written+len(s) > Budget {
			stopped = "budget"
			break
		}
		out.WriteString(s)
		written += len(s)
		crlf = crlf || l.crlf
		if first == 0 {
			first = n
		}
		last = n
		if n-int64(offset)+1 == int64(limit) {
			stopped = "limit"
			break
		}
	}
	if first == 0 && stopped == "" {
		return Failf("%s has %d %s; --offset %d is past its end", shown, n, plural(n, "line"), offset)
	}
	if crlf {
		out.Note("[CRLF line endings (\\r\\n), shown without the \\r; edit and apply_patch keep them]")
	}
	if stopped == "" {
		return nil
	}
	rest, complete := countLines(br, countAhead)
	if stopped == "limit" && rest == 0 && complete {
		return nil // the limit ended at the file's last line
	}
	total := fmt.Sprintf("%d", n+rest)
	if !complete {
		total = "at least " + total
	}
	where := fmt.Sprintf("lines %d–%d of %s shown; read on with --offset %d", first, last, total, last+1)
	if stopped == "budget" {
		out.Cut()
		out.Hint = where
	} else {
		out.Note("[%s]", where)
	}
	return nil
}

// numberedLine is line n as read and edit show it: cat -n style, cut at
// maxLineRunes runes (more is what the caller already left out), invalid
// UTF-8 replaced (so the budget counts what is shown).
func numberedLine(n int64, text []byte, more int64) string {
	cut, runes := len(text), 0
	for i := 0; i < len(text); runes++ {
		if runes == maxLineRunes {
			cut = i
			break
		}
		_, size := utf8.DecodeRune(text[i:])
		i += size
	}
	more += int64(len(text) - cut)
	s := ValidUTF8(string(text[:cut]))
	if more > 0 {
		s += fmt.Sprintf(" … [line cut: %d more bytes]", more)
	}
	return fmt.Sprintf("%6d\t%s\n", n, s)
}

// lineReader reads lines of any length keeping at most keepBytes of each.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
}

// keepBytes holds maxLineRunes runes of any size.
const keepBytes = utf8.UTFMax * maxLineRunes

// line is one line as lineReader read it.
type line struct {
	text []byte // the line without its ending, at most keepBytes of it
	more int64  // the bytes of the line past text
	crlf bool   // it ended with \r\n
	ok   bool   // false: the file had no more lines
}

// next reads the next line; text is valid until the following call.
func (lr *lineReader) next() (line, error) {
	var l line
	lr.buf = lr.buf[:0]
	var prev byte // the line's last byte before the \n
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if len(chunk) > 0 {
			l.ok = true
		}
		body := chunk
		if err == nil {
			body = chunk[:len(chunk)-1]
		}
		if room := keepBytes - len(lr.buf); room > 0 {
			k := min(room, len(body))
			lr.buf = append(lr.buf, body[:k]...)
			l.more += int64(len(body) - k)
		} else {
			l.more += int64(len(body))
		}
		if len(body) > 0 {
			prev = body[len(body)-1]
		}
		switch {
		case err == nil:
			if prev == '\r' {
				l.crlf = true
				if l.more > 0 {
					l.more--
				} else {
					lr.buf = lr.buf[:len(lr.buf)-1]
				}
			}
			l.text = lr.buf
			return l, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			l.text = lr.buf
			return l, nil
		default:
			return l, err
		}
	}
}

// countLines counts the lines left in r, reading at most limit bytes;
// complete is false when it stopped before the end.
func countLines(r io.Reader, limit int64) (n int64, complete bool) {
	buf := make([]byte, 64<<10)
	var read int64
	last := byte('\n')
	for read < limit {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if k > 0 {
			last = buf[k-1]
		}
		read += int64(k)
		if errors.Is(err, io.EOF) {
			if last != '\n' {
				n++
			}
			return n, true
		}
		if err != nil {
			return n, false
		}
	}
	return n, false
}

// openRegular opens a file a tool reads: symlinks followed, a FIFO never
// blocks the open (O_NONBLOCK), anything but a regular file refused, with
// messages for the model (verb says what the tool was doing).
func openRegular(abs, shown, verb string) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(abs)
	if err != nil {
		return nil, nil, pathErr(verb, shown, err)
	}
	if err := checkRegular(shown, st); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, pathErr(verb, shown, err)
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", shown, err)
	}
	if err := checkRegular(shown, st); err != nil { // replaced since the first look
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// checkRegular refuses a directory or a special file.
func checkRegular(shown string, st fs.FileInfo) error {
	m := st.Mode()
	switch {
	case m.IsDir():
		return Failf("%s is a directory; use ls to list it", shown)
	case !m.IsRegular():
		return Failf("%s is not a regular file but %s; only regular files can be read or edited", shown, fileKind(m))
	}
	return nil
}

// fileKind names a special file's type.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}

// pathErr turns an error about a path into a message for the model.
func pathErr(verb, shown string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Failf("%s does not exist", shown)
	case errors.Is(err, fs.ErrPermission):
		return Failf("cannot %s %s: permission denied", verb, shown)
	case errors.Is(err, syscall.ENOTDIR):
		return Failf("cannot %s %s: a part of the path is not a directory", verb, shown)
	case errors.Is(err, syscall.ELOOP):
		return Failf("cannot %s %s: too many levels of symbolic links", verb, shown)
	case errors.Is(err, syscall.EROFS):
		return Failf("cannot %s %s: read-only file system", verb, shown)
	}
	return fmt.Errorf("%s %s: %w", verb, shown, err)
}

// plural is word, with an s unless n is 1.
func plural[N int | int64](n N, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
