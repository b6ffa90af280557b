package applypatch

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"unicode"
)

// Files reads the files a patch names.
type Files interface {
	// ReadFile returns the current bytes of the file name (a path as the
	// patch writes it), or an error wrapping fs.ErrNotExist when there is
	// no such file. Any other error stops Apply.
	ReadFile(name string) ([]byte, error)
}

// Change is a patch's effect on one file: its state before and after.
type Change struct {
	Path    string
	Existed bool   // the file was there before the patch
	Old     []byte // its bytes then
	Exists  bool   // the file is there after the patch (false: delete it)
	New     []byte // its bytes then
	// MovedFrom is the file whose content an Update moved here, "" when
	// none: the caller gives this file that one's mode.
	MovedFrom string
}

// Changed reports whether applying the change alters the file.
func (c *Change) Changed() bool {
	if c.Existed != c.Exists {
		return true
	}
	return c.Exists && (!bytes.Equal(c.Old, c.New) || c.MovedFrom != "")
}

// HunkError is a hunk that does not apply.
type HunkError struct {
	Hunk int // index in Patch.Hunks
	Kind Kind
	Path string
	Line int // the patch line of the hunk's header
	Err  error
}

// Error names the operation, its file and patch line, and the cause.
func (e *HunkError) Error() string {
	return fmt.Sprintf("%s %s (patch line %d): %v", e.Kind, e.Path, e.Line, e.Err)
}

// Unwrap is the cause.
func (e *HunkError) Unwrap() error { return e.Err }

// ChunkError is a chunk of an Update that does not apply.
type ChunkError struct {
	Chunk int // index in Hunk.Chunks
	Line  int // the patch line where the chunk starts
	Msg   string
}

// Error names the chunk and its patch line, and what went wrong.
func (e *ChunkError) Error() string {
	return fmt.Sprintf("chunk %d (patch line %d): %s", e.Chunk+1, e.Line, e.Msg)
}

// Apply runs the patch against files and returns the state of every file it
// names, in the order first named, without writing anything: one failing
// hunk fails the whole patch (a *HunkError). Hunks apply in order, each to
// the result of the ones before, so a patch may add a file and then update
// it. Where Codex overwrites, Apply refuses: an Add of a file that exists,
// a Move to a file that exists.
func Apply(p *Patch, files Files) ([]Change, error) {
	state := map[string]*Change{}
	var order []string
	get := func(name string) (*Change, error) {
		if c, ok := state[name]; ok {
			return c, nil
		}
		c := &Change{Path: name}
		b, err := files.ReadFile(name)
		switch {
		case err == nil:
			c.Existed, c.Old, c.Exists, c.New = true, b, true, b
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, err
		}
		state[name] = c
		order = append(order, name)
		return c, nil
	}
	for i := range p.Hunks {
		h := &p.Hunks[i]
		fail := func(err error) ([]Change, error) {
			return nil, &HunkError{Hunk: i, Kind: h.Kind, Path: h.Path, Line: h.Line, Err: err}
		}
		c, err := get(h.Path)
		if err != nil {
			return fail(err)
		}
		switch h.Kind {
		case Add:
			if c.Exists {
				return fail(fmt.Errorf("the file already exists; change it with '%s %s', or delete it first", UpdateMarker, h.Path))
			}
			c.Exists, c.New, c.MovedFrom = true, []byte(h.Contents), ""
		case Delete:
			if !c.Exists {
				return fail(errors.New("the file does not exist"))
			}
			c.Exists, c.New, c.MovedFrom = false, nil, ""
		case Update:
			if !c.Exists {
				return fail(fmt.Errorf("the file does not exist; create it with '%s %s'", AddMarker, h.Path))
			}
			updated, err := ApplyChunks(c.New, h.Chunks)
			if err != nil {
				return fail(err)
			}
			if h.MoveTo == "" || h.MoveTo == h.Path {
				c.New = updated
				break
			}
			d, err := get(h.MoveTo)
			if err != nil {
				return fail(fmt.Errorf("move to %s: %w", h.MoveTo, err))
			}
			if d.Exists {
				return fail(fmt.Errorf("cannot move it to %s: that file already exists", h.MoveTo))
			}
			from := c.Path
			if c.MovedFrom != "" {
				from = c.MovedFrom
			}
			d.Exists, d.New, d.MovedFrom = true, updated, from
			c.Exists, c.New, c.MovedFrom = false, nil, ""
		default:
			return fail(fmt.Errorf("unknown operation %v", h.Kind))
		}
	}
	out := make([]Change, len(order))
	for i, name := range order {
		out[i] = *state[name]
	}
	return out, nil
}

// text is a file split into lines, each with its own line ending.
type text struct {
	lines []string // without their line endings
	eols  []string // "\n", "\r\n", or "" for a last line without one
	eol   string   // the ending new lines get: the file's usual one
	final bool     // the file ends with a line ending (or is empty)
}

func splitText(b []byte) text {
	s := string(b)
	t := text{final: len(s) == 0 || s[len(s)-1] == '\n'}
	crlf, lf := 0, 0
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			t.lines, t.eols = append(t.lines, s), append(t.eols, "")
			break
		}
		line, eol := s[:i], "\n"
		if strings.HasSuffix(line, "\r") {
			line, eol = line[:len(line)-1], "\r\n"
			crlf++
		} else {
			lf++
		}
		t.lines, t.eols = append(t.lines, line), append(t.eols, eol)
		s = s[i+1:]
	}
	t.eol = "\n"
	if crlf > 0 && crlf >= lf {
		t.eol = "\r\n"
	}
	return t
}

// replacement replaces n lines at start with the chunk lines ops.
type replacement struct {
	start, n int
	ops      []Line
	chunk    int
}

// ApplyChunks applies an Update's chunks to a file's bytes and returns the
// new bytes; the error is a *ChunkError. Chunks are found in order, each
// after the one before. The file keeps its line endings: lines it keeps
// (context lines too, even when matched ignoring whitespace) keep their
// bytes, added lines get the file's usual ending (CRLF in a CRLF file), and
// a file without a final line ending still has none (Codex adds one).
// A chunk of added lines only goes right after its "@@ …" line, or at the
// end of the file when it has none (Codex puts it at the end either way).
func ApplyChunks(content []byte, chunks []Chunk) ([]byte, error) {
	if len(chunks) == 0 {
		return content, nil
	}
	t := splitText(content)
	var rs []replacement
	idx := 0 // where the next chunk is looked for
	for ci := range chunks {
		c := &chunks[ci]
		fail := func(format string, args ...any) ([]byte, error) {
			return nil, &ChunkError{Chunk: ci, Line: c.Line, Msg: fmt.Sprintf(format, args...)}
		}
		if c.Context != "" {
			at, ok := seek(t.lines, []string{c.Context}, idx, false)
			if !ok {
				msg := fmt.Sprintf("could not find the line of its '@@ %s'%s", clip(c.Context), from(idx))
				if looksLikeRange(c.Context) {
					msg += "; the text after @@ is a line of the file to find (such as a function header), not a line-number range"
				}
				return fail("%s", msg)
			}
			idx = at + 1
		}
		ops, old := c.Lines, c.Old()
		at, ok := 0, len(old) > 0
		if ok {
			at, ok = seek(t.lines, old, idx, c.EOF)
			if !ok && old[len(old)-1] == "" {
				// A last empty context line often stands for the file's
				// final line break, which is no line of its own (Codex).
				ops, old = dropLastOld(ops), old[:len(old)-1]
				at, ok = seek(t.lines, old, idx, c.EOF)
			}
			if !ok {
				return fail("%s", notFound(t.lines, old, idx, c.EOF))
			}
		}
		if len(old) == 0 {
			at = len(t.lines)
			if c.Context != "" && !c.EOF {
				at = idx
			}
		}
		rs = append(rs, replacement{start: at, n: len(old), ops: ops, chunk: ci})
		if len(old) > 0 {
			idx = at + len(old)
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].start < rs[j].start })

	type outLine struct{ text, eol string }
	out := make([]outLine, 0, len(t.lines))
	cursor := 0
	for _, r := range rs {
		if r.start < cursor {
			c := &chunks[r.chunk]
			return nil, &ChunkError{Chunk: r.chunk, Line: c.Line, Msg: "its lines overlap another chunk's"}
		}
		for k := cursor; k < r.start; k++ {
			out = append(out, outLine{t.lines[k], t.eols[k]})
		}
		k := r.start
		for _, op := range r.ops {
			switch op.Op {
			case ' ':
				out = append(out, outLine{t.lines[k], t.eols[k]})
				k++
			case '-':
				k++
			case '+':
				out = append(out, outLine{op.Text, t.eol})
			}
		}
		cursor = r.start + r.n
	}
	for k := cursor; k < len(t.lines); k++ {
		out = append(out, outLine{t.lines[k], t.eols[k]})
	}

	var b bytes.Buffer
	b.Grow(len(content) + 64)
	for i, l := range out {
		b.WriteString(l.text)
		eol := l.eol
		if eol == "" {
			eol = t.eol // the old last line, now followed by more
		}
		if i == len(out)-1 && !t.final {
			eol = ""
		}
		b.WriteString(eol)
	}
	return b.Bytes(), nil
}

// dropLastOld removes the chunk's last context or removed line.
func dropLastOld(ops []Line) []Line {
	for j := len(ops) - 1; j >= 0; j-- {
		if ops[j].Op != '+' {
			out := make([]Line, 0, len(ops)-1)
			out = append(out, ops[:j]...)
			return append(out, ops[j+1:]...)
		}
	}
	return ops
}

// from says where a search started, for a message.
func from(idx int) string {
	if idx == 0 {
		return ""
	}
	return fmt.Sprintf(" (searched from line %d, after the chunk before)", idx+1)
}

// notFound explains why old was not found: where its longest first part
// matches and which line differs, or that it is before the previous chunk.
func notFound(lines, old []string, idx int, eof bool) string {
	var b strings.Builder
	b.WriteString("could not find its context and removed lines")
	if eof {
		b.WriteString(" at the end of the file ('" + EOFMarker + "')")
	}
	b.WriteString(from(idx))
	b.WriteString(":\n")
	const show = 8
	for i, l := range old {
		if i == show {
			fmt.Fprintf(&b, "  … (%d more lines)\n", len(old)-show)
			break
		}
		b.WriteString("  " + clip(l) + "\n")
	}
	if idx > 0 {
		if at, ok := seek(lines, old, 0, false); ok && at < idx {
			fmt.Fprintf(&b, "They occur at line %d, before the chunk before: chunks must come in file order.", at+1)
			return b.String()
		}
	}
	for k := len(old) - 1; k >= 1 && k >= len(old)-20; k-- {
		at, ok := seek(lines, old[:k], idx, false)
		if !ok {
			continue
		}
		if at+k < len(lines) {
			fmt.Fprintf(&b, "The first %d of these lines match at line %d, but line %d of the file is %q where the chunk has %q.",
				k, at+1, at+k+1, clip(lines[at+k]), clip(old[k]))
		} else {
			fmt.Fprintf(&b, "The first %d of these lines match at line %d, then the file ends.", k, at+1)
		}
		return b.String()
	}
	b.WriteString("Read the file again: it may not hold what the patch expects.")
	return b.String()
}

// looksLikeRange reports whether an @@ header is a unified diff range such
// as "-12,7 +12,8 @@".
func looksLikeRange(s string) bool {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "-") {
		return false
	}
	return strings.Contains(s, " +") && strings.IndexFunc(s[1:], unicode.IsDigit) == 0
}

// seek finds pattern in lines at or after start, as Codex's seek_sequence
// does: exact, then ignoring trailing whitespace, then ignoring surrounding
// whitespace, then also with typographic punctuation made ASCII; the first
// match of the strictest pass that matches wins. With eof the pattern must
// end the file.
func seek(lines, pattern []string, start int, eof bool) (int, bool) {
	if len(pattern) == 0 {
		return start, true
	}
	if len(pattern) > len(lines) || start < 0 {
		return 0, false
	}
	last := len(lines) - len(pattern)
	first := start
	if eof {
		first = max(start, last)
	}
	if first > last {
		return 0, false
	}
	for _, key := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) },
		strings.TrimSpace,
		normalize,
	} {
		want := make([]string, len(pattern))
		for i, p := range pattern {
			want[i] = key(p)
		}
	next:
		for i := first; i <= last; i++ {
			for j, w := range want {
				if key(lines[i+j]) != w {
					continue next
				}
			}
			return i, true
		}
	}
	return 0, false
}

// normalize trims s and maps typographic dashes, quotes and spaces to ASCII
// (the last pass of Codex's seek_sequence).
func normalize(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212':
			return '-'
		case '\u2018', '\u2019', '\u201A', '\u201B':
			return '\''
		case '\u201C', '\u201D', '\u201E', '\u201F':
			return '"'
		case '\u00A0', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200A', '\u202F', '\u205F', '\u3000':
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
}
