// Package applypatch parses and applies the file-oriented patch format Codex
// models are trained on (codex-rs/apply-patch):
//
//	*** Begin Patch
//	*** Add File: path/new.txt
//	+line one
//	*** Update File: path/old.go
//	*** Move to: path/renamed.go
//	@@ func main() {
//	 context line
//	-removed line
//	+added line
//	*** End of File
//	*** Delete File: path/gone.txt
//	*** End Patch
//
// It does no I/O of its own. Parse turns the text into hunks (one per file
// operation); ApplyChunks computes a file's new bytes from its old bytes and
// an update's chunks; Apply runs a whole patch against the current files,
// read through the small Files interface, and returns every file's new
// state in memory, so that the caller writes all of them or none.
//
// Parsing follows Codex, including its leniency: the whole text is trimmed,
// the Begin/End markers and file headers may be padded with whitespace, a
// "<<EOF … EOF" heredoc wrapper is removed, CRLF patch text is read as LF,
// the first chunk of an update may omit its "@@" line. A patch without
// "*** End Patch" is refused, as Codex does. Lines are located as Codex's
// seek_sequence does: exact, then ignoring trailing whitespace, then ignoring
// surrounding whitespace, then also mapping typographic dashes, quotes and
// spaces to ASCII. Where this package differs from Codex, it says so at the
// function.
package applypatch

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The patch markers.
const (
	BeginMarker  = "*** Begin Patch"
	EndMarker    = "*** End Patch"
	AddMarker    = "*** Add File:"
	DeleteMarker = "*** Delete File:"
	UpdateMarker = "*** Update File:"
	MoveMarker   = "*** Move to:"
	EOFMarker    = "*** End of File"
)

// Kind is what a hunk does to its file.
type Kind int

// The file operations.
const (
	Add Kind = iota + 1
	Delete
	Update
)

// String is the operation as its header names it ("Add File").
func (k Kind) String() string {
	switch k {
	case Add:
		return "Add File"
	case Delete:
		return "Delete File"
	case Update:
		return "Update File"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Patch is a parsed patch: its file operations in order.
type Patch struct {
	Hunks []Hunk
}

// Hunk is one file operation.
type Hunk struct {
	Kind Kind
	Path string // as written in the patch
	// MoveTo is where an Update moves the file ("" when it stays).
	MoveTo string
	// Contents is an Add's new file: each "+" line followed by "\n".
	Contents string
	// Chunks are an Update's changes, in file order. An Update with a
	// MoveTo may have none (a pure rename; Codex refuses it).
	Chunks []Chunk
	Line   int // the patch line of the hunk's header, 1-based
}

// Chunk is one change of an Update: the lines to find (context and removed
// lines, in order) and what replaces them (context and added lines).
type Chunk struct {
	// Context is the text of the chunk's "@@ …" line, "" for a bare "@@":
	// a line (usually a function or class header) found first; the
	// chunk's lines are then looked for after it.
	Context string
	Lines   []Line
	// EOF is set by "*** End of File": the chunk's old lines end the file.
	EOF  bool
	Line int // the patch line where the chunk starts, 1-based
}

// Line is one line of a chunk.
type Line struct {
	Op   byte // ' ' context, '-' removed, '+' added
	Text string
}

// Old is the lines the chunk looks for: its context and removed lines.
func (c *Chunk) Old() []string { return c.side('+') }

// New is the lines that replace them: its context and added lines.
func (c *Chunk) New() []string { return c.side('-') }

func (c *Chunk) side(skip byte) []string {
	out := make([]string, 0, len(c.Lines))
	for _, l := range c.Lines {
		if l.Op != skip {
			out = append(out, l.Text)
		}
	}
	return out
}

// Stats counts the lines the hunk adds and removes, as the patch says (a
// Delete counts nothing: the patch does not hold the file's lines).
func (h *Hunk) Stats() (added, removed int) {
	if h.Kind == Add {
		return strings.Count(h.Contents, "\n"), 0
	}
	for _, c := range h.Chunks {
		for _, l := range c.Lines {
			switch l.Op {
			case '+':
				added++
			case '-':
				removed++
			}
		}
	}
	return added, removed
}

// ParseError is a patch that does not parse; Line is the patch line (1-based,
// 0 when the error is about the patch as a whole).
type ParseError struct {
	Line int
	Msg  string
}

// Error says where the patch is wrong and why.
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("patch line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errAt(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Parse parses a patch. The error is a *ParseError.
func Parse(text string) (*Patch, error) {
	// Line numbers count from the text as given, before the trim.
	trimmed := strings.TrimLeftFunc(text, unicode.IsSpace)
	base := strings.Count(text[:len(text)-len(trimmed)], "\n")
	lines := splitLines(strings.TrimRightFunc(trimmed, unicode.IsSpace))
	body, first, err := boundaries(lines)
	if err != nil {
		if pe, ok := err.(*ParseError); ok && pe.Line > 0 {
			pe.Line += base
		}
		return nil, err
	}
	p := &Patch{}
	lineNo := base + first // the patch line of body[0]
	for len(body) > 0 {
		if strings.TrimSpace(body[0]) == "" {
			// a blank line between hunks (Codex refuses it after an Add)
			body, lineNo = body[1:], lineNo+1
			continue
		}
		h, n, err := parseHunk(body, lineNo)
		if err != nil {
			return nil, err
		}
		p.Hunks = append(p.Hunks, h)
		body, lineNo = body[n:], lineNo+n
	}
	if len(p.Hunks) == 0 {
		return nil, &ParseError{Msg: "the patch has no file operations (*** Add File:, *** Update File: or *** Delete File:)"}
	}
	return p, nil
}

// splitLines splits on "\n" and drops a "\r" before it (Rust's str::lines,
// which Codex uses).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// boundaries checks the Begin and End markers and returns the lines between
// them with the 1-based index of the first (in lines). A heredoc wrapper
// (<<EOF, <<'EOF' or <<"EOF" … EOF) around a patch is removed, as Codex's
// lenient mode does for models that send `apply_patch <<'EOF'` as argv.
func boundaries(lines []string) ([]string, int, error) {
	err := checkBoundaries(lines)
	if err == nil {
		return lines[1 : len(lines)-1], 2, nil
	}
	if n := len(lines); n >= 4 && (lines[0] == "<<EOF" || lines[0] == "<<'EOF'" || lines[0] == `<<"EOF"`) &&
		strings.HasSuffix(lines[n-1], "EOF") {
		inner := lines[1 : n-1]
		if checkBoundaries(inner) == nil {
			return inner[1 : len(inner)-1], 3, nil
		}
	}
	return nil, 0, err
}

func checkBoundaries(lines []string) error {
	switch {
	case len(lines) == 0:
		return &ParseError{Msg: "the patch is empty: it must start with '" + BeginMarker + "' and end with '" + EndMarker + "'"}
	case strings.TrimSpace(lines[0]) != BeginMarker:
		return errAt(1, "the first line of the patch must be '%s', not %q", BeginMarker, clip(lines[0]))
	case len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != EndMarker:
		return errAt(len(lines), "the last line of the patch must be '%s'", EndMarker)
	}
	return nil
}

// cutMarker reports whether line (trimmed) is the header marker and returns
// the path after it (trimmed).
func cutMarker(line, marker string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), marker)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// parseHunk parses one file operation at the start of lines (lines[0] is
// patch line lineNo) and returns it with the number of lines it used.
func parseHunk(lines []string, lineNo int) (Hunk, int, error) {
	if path, ok := cutMarker(lines[0], AddMarker); ok {
		if path == "" {
			return Hunk{}, 0, errAt(lineNo, "'%s' needs a path", AddMarker)
		}
		var b strings.Builder
		n := 1
		for _, l := range lines[1:] {
			text, ok := strings.CutPrefix(l, "+")
			if !ok {
				break
			}
			b.WriteString(text)
			b.WriteByte('\n')
			n++
		}
		return Hunk{Kind: Add, Path: path, Contents: b.String(), Line: lineNo}, n, nil
	}
	if path, ok := cutMarker(lines[0], DeleteMarker); ok {
		if path == "" {
			return Hunk{}, 0, errAt(lineNo, "'%s' needs a path", DeleteMarker)
		}
		return Hunk{Kind: Delete, Path: path, Line: lineNo}, 1, nil
	}
	path, ok := cutMarker(lines[0], UpdateMarker)
	if !ok {
		return Hunk{}, 0, errAt(lineNo, "%q is not a file operation: every operation starts with '%s PATH', '%s PATH' or '%s PATH'",
			clip(strings.TrimSpace(lines[0])), AddMarker, UpdateMarker, DeleteMarker)
	}
	if path == "" {
		return Hunk{}, 0, errAt(lineNo, "'%s' needs a path", UpdateMarker)
	}
	h := Hunk{Kind: Update, Path: path, Line: lineNo}
	n := 1
	if len(lines) > 1 {
		if to, ok := cutMarker(lines[1], MoveMarker); ok {
			if to == "" {
				return Hunk{}, 0, errAt(lineNo+1, "'%s' needs a path", MoveMarker)
			}
			h.MoveTo = to
			n++
		}
	}
	for n < len(lines) {
		l := lines[n]
		if strings.TrimSpace(l) == "" {
			n++ // blank lines between chunks
			continue
		}
		if strings.HasPrefix(l, "*") {
			break // the next operation's header
		}
		c, used, err := parseChunk(lines[n:], lineNo+n, len(h.Chunks) == 0)
		if err != nil {
			return Hunk{}, 0, err
		}
		h.Chunks = append(h.Chunks, c)
		n += used
	}
	if len(h.Chunks) == 0 && h.MoveTo == "" {
		return Hunk{}, 0, errAt(lineNo, "'%s %s' has no changes: add chunks of ' ' context, '-' removed and '+' added lines", UpdateMarker, path)
	}
	return h, n, nil
}

// parseChunk parses one chunk at the start of lines (lines[0] is patch line
// lineNo); the first chunk of an update may start without an "@@" line.
func parseChunk(lines []string, lineNo int, first bool) (Chunk, int, error) {
	c := Chunk{Line: lineNo}
	i := 0
	switch {
	case lines[0] == "@@":
		i = 1
	case strings.HasPrefix(lines[0], "@@ "):
		// "@@ " with only blanks after it is a bare "@@" (Codex would look
		// for a blank line)
		c.Context = lines[0][3:]
		if strings.TrimSpace(c.Context) == "" {
			c.Context = ""
		}
		i = 1
	case !first:
		return Chunk{}, 0, errAt(lineNo, "expected an '@@' line to start the next chunk, got %q", clip(lines[0]))
	}
	if i >= len(lines) {
		return Chunk{}, 0, errAt(lineNo, "an '@@' line with no chunk lines after it")
	}
	n := 0
loop:
	for _, l := range lines[i:] {
		if strings.TrimRightFunc(l, unicode.IsSpace) == EOFMarker {
			if n == 0 {
				return Chunk{}, 0, errAt(lineNo+i, "'%s' with no chunk lines before it", EOFMarker)
			}
			c.EOF = true
			n++
			break
		}
		if l == "" {
			// an empty line is an empty context line (Codex)
			c.Lines = append(c.Lines, Line{Op: ' '})
			n++
			continue
		}
		switch l[0] {
		case ' ', '-', '+':
			c.Lines = append(c.Lines, Line{Op: l[0], Text: l[1:]})
		default:
			if n == 0 {
				return Chunk{}, 0, errAt(lineNo+i, "unexpected line %q: every line of a chunk starts with ' ' (context), '-' (removed) or '+' (added)", clip(l))
			}
			break loop // the next chunk or operation
		}
		n++
	}
	return c, i + n, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
