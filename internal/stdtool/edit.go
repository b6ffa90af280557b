package stdtool

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

const (
	// maxEditSize bounds the files edit and apply_patch load whole.
	maxEditSize = 64 << 20
	// editContext is how many lines edit shows around a change.
	editContext = 3
	// editShowEnds is how many lines of a long new text edit shows at each end.
	editShowEnds = 12
	// editMaxViews bounds how many changed places edit shows.
	editMaxViews = 8
	// fuzzyMaxSize bounds the files edit searches ignoring whitespace.
	fuzzyMaxSize = 8 << 20
)

func init() {
	register(&Tool{
		Name:  "edit",
		Usage: "edit PATH OLD NEW [--all]",
		Min:   3, Max: 3,
		Flags: []Flag{{Name: "--all"}},
		Meta: Meta{Description: `Replace an exact piece of text in a file with another.
argv: edit PATH OLD NEW [--all] — OLD and NEW are one argument each and may span lines.
example: edit src/main.go "x := 1\n" "x := 2\n" (the \n are real newlines)
OLD must occur exactly once: copy it from read's output without the line-number prefix, with enough surrounding lines to be unique; --all replaces every occurrence instead. Newlines in OLD and NEW may be \n in a CRLF file: it keeps its CRLF endings, its mode and a missing final newline. The result shows the changed lines with a few lines around them, numbered like read. A word that looks like a flag (such as -x) is taken for one: put -- before OLD if needed. Binary files and symlinks that lead out of the workspace are refused.`},
		Run: runEdit,
	})
}

func runEdit(ctx context.Context, a *Args, out *Output) error {
	shown, old, repl := a.Pos[0], a.Pos[1], a.Pos[2]
	all := a.Has("--all")
	if old == "" {
		return Failf("OLD is empty: give the exact text to replace (to create a file, use write)")
	}
	if old == repl {
		return Failf("OLD and NEW are the same; nothing to change")
	}
	abs, err := Abs(shown)
	if err != nil {
		return err
	}
	target, err := CheckWritable(abs)
	if err != nil {
		return err
	}
	data, _, err := loadFile(target, shown, "edit")
	if err != nil {
		return err
	}
	if IsBinary(head(data)) {
		return Failf("%s is a binary file (%d bytes); edit changes text files only", shown, len(data))
	}
	text := string(data)

	// Line endings: a CRLF file gets NEW with CRLF; OLD written with the
	// other ending is looked for with the file's.
	eol := usualEOL(text)
	oldM, newM := old, repl
	if eol == "\r\n" {
		newM = toEOL(repl, eol)
	}
	count := strings.Count(text, oldM)
	if count == 0 {
		if conv := toEOL(old, eol); conv != old {
			if c := strings.Count(text, conv); c > 0 {
				oldM, newM, count = conv, toEOL(repl, eol), c
			}
		}
	}
	switch {
	case count == 0:
		return notFoundError(text, old, shown)
	case oldM == newM:
		return Failf("OLD and NEW differ only in their line endings, which edit keeps as the file has them; nothing to change")
	case count > 1 && !all:
		return Failf("OLD occurs %d times in %s (%s); add surrounding lines to OLD so that it occurs once, or pass --all to replace every occurrence",
			count, shown, linesList(matchLines(text, oldM, 10), count))
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	var b strings.Builder
	b.Grow(len(text) + count*(len(newM)-len(oldM)))
	var regions [][2]int // byte ranges of the new text in the new file
	rest := text
	for {
		j := strings.Index(rest, oldM)
		if j < 0 {
			break
		}
		b.WriteString(rest[:j])
		start := b.Len()
		b.WriteString(newM)
		regions = append(regions, [2]int{start, b.Len()})
		rest = rest[j+len(oldM):]
		if !all {
			break
		}
	}
	b.WriteString(rest)
	updated := b.String()
	if err := WriteAtomic(target, []byte(updated), newFileMode); err != nil {
		if _, ok := err.(*Failure); ok {
			return err
		}
		return pathErr("write", shown, err)
	}
	showEdit(out, shown, updated, regions)
	return nil
}

// loadFile reads a whole regular file for a tool that changes it.
func loadFile(path, shown, verb string) ([]byte, fs.FileInfo, error) {
	f, st, err := openRegular(path, shown, verb)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if st.Size() > maxEditSize {
		return nil, nil, Failf("%s is too large to %s (%d bytes; the limit is %d)", shown, verb, st.Size(), maxEditSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditSize+1))
	if err != nil {
		return nil, nil, pathErr(verb, shown, err)
	}
	if len(data) > maxEditSize {
		return nil, nil, Failf("%s is too large to %s (over %d bytes)", shown, verb, maxEditSize)
	}
	return data, st, nil
}

// head is the part of data IsBinary looks at.
func head(data []byte) []byte { return data[:min(len(data), SniffLen)] }

// usualEOL is "\r\n" when most of text's line endings are CRLF, else "\n".
func usualEOL(text string) string {
	crlf := strings.Count(text, "\r\n")
	if crlf > 0 && crlf >= strings.Count(text, "\n")-crlf {
		return "\r\n"
	}
	return "\n"
}

// toEOL gives every line ending of s the form eol.
func toEOL(s, eol string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if eol == "\r\n" {
		s = strings.ReplaceAll(s, "\n", "\r\n")
	}
	return s
}

// matchLines is the line numbers where sub starts in text, at most max.
func matchLines(text, sub string, max int) []int {
	var out []int
	line, pos := 1, 0
	for len(out) < max {
		j := strings.Index(text[pos:], sub)
		if j < 0 {
			break
		}
		line += strings.Count(text[pos:pos+j], "\n")
		out = append(out, line)
		line += strings.Count(sub, "\n")
		pos += j + len(sub)
	}
	return out
}

// linesList is "line 4" or "lines 4, 17, 30" (with "…" when total is more).
func linesList(lines []int, total int) string {
	ws := make([]string, len(lines))
	for i, l := range lines {
		ws[i] = fmt.Sprint(l)
	}
	s := strings.Join(ws, ", ")
	if total > len(lines) {
		s += ", …"
	}
	if total == 1 {
		return "line " + s
	}
	return "lines " + s
}

var readPrefix = regexp.MustCompile(`^ *[0-9]+\t`)

// notFoundError says that old is not in text, and where it would be if
// whitespace or line endings were ignored.
func notFoundError(text, old, shown string) error {
	msg := fmt.Sprintf("OLD was not found in %s.", shown)
	prefixed := true
	for _, l := range strings.Split(strings.TrimRight(old, "\n"), "\n") {
		prefixed = prefixed && readPrefix.MatchString(l)
	}
	switch first, last, ok := fuzzyFind(text, old); {
	case prefixed:
		msg += " OLD seems to hold read's line-number prefixes (spaces, a number, a tab): leave them out."
	case ok:
		what, them := fmt.Sprintf("Lines %d–%d", first, last), "them"
		if first == last {
			what, them = fmt.Sprintf("Line %d", first), "it"
		}
		msg += fmt.Sprintf(" %s would match it if whitespace were ignored (indentation, tabs or spaces, trailing spaces or line breaks differ); read %s --offset %d --limit %d shows %s exactly.",
			what, shown, first, last-first+1, them)
	default:
		msg += fmt.Sprintf(" Read it (read %s) and copy the text exactly, without the line-number prefixes.", shown)
	}
	return Failf("%s", msg)
}

// fuzzyFind looks for old in text with every run of whitespace (line
// breaks included) taken as one space and the ends trimmed; it returns the
// lines of the first match.
func fuzzyFind(text, old string) (first, last int, ok bool) {
	want, _ := collapse(strings.TrimSpace(old), false)
	if want == "" || len(text) > fuzzyMaxSize {
		return 0, 0, false
	}
	have, offs := collapse(text, true)
	i := strings.Index(have, want)
	if i < 0 {
		return 0, 0, false
	}
	start, end := offs[i], offs[i+len(want)-1]
	first = 1 + strings.Count(text[:start], "\n")
	last = first + strings.Count(text[start:end], "\n")
	return first, last, true
}

// collapse turns each run of whitespace in s into one space; with offsets
// it also returns where each byte of the result comes from in s.
func collapse(s string, offsets bool) (string, []int32) {
	var b strings.Builder
	b.Grow(len(s))
	var offs []int32
	if offsets {
		offs = make([]int32, 0, len(s))
	}
	space := false
	for i, r := range s {
		if unicode.IsSpace(r) {
			if !space {
				b.WriteByte(' ')
				if offsets {
					offs = append(offs, int32(i))
				}
			}
			space = true
			continue
		}
		space = false
		n := b.Len()
		b.WriteRune(r)
		if offsets {
			for k := n; k < b.Len(); k++ {
				offs = append(offs, int32(i))
			}
		}
	}
	return b.String(), offs
}

// showEdit writes what edit did: a summary line, then the changed places
// with a few lines around each, numbered like read.
func showEdit(out *Output, shown, text string, regions [][2]int) {
	starts := lineStarts(text)
	lineAt := func(off int) int { // the 1-based line holding byte off
		if off >= len(text) && (text == "" || text[len(text)-1] == '\n') {
			return len(starts) + 1 // past the last line
		}
		return sort.Search(len(starts), func(i int) bool { return starts[i] > off })
	}
	type span struct{ from, to int }
	var spans []span
	var changed []int
	for _, r := range regions {
		first := lineAt(r[0])
		last := first - 1 // a deletion: no line of new text
		if r[1] > r[0] {
			last = lineAt(r[1] - 1)
		}
		changed = append(changed, first)
		if last-first+1 > 2*editShowEnds {
			spans = append(spans, span{first - editContext, first + editShowEnds - 1}, span{last - editShowEnds + 1, last + editContext})
		} else {
			spans = append(spans, span{first - editContext, last + editContext})
		}
	}
	n := len(regions)
	out.Printf("edited %s: replaced %s (%s)\n", shown, fmtCount(n, "occurrence"), linesList(changed[:min(n, 10)], n))
	if len(starts) == 0 {
		out.Printf("(the file is now empty)\n")
		return
	}
	// merge touching spans, clamp them to the file, show the first few
	var merged []span
	for _, s := range spans {
		s.from, s.to = max(s.from, 1), min(s.to, len(starts))
		if s.from > s.to {
			continue
		}
		if k := len(merged) - 1; k >= 0 && s.from <= merged[k].to+1 {
			merged[k].to = max(merged[k].to, s.to)
			continue
		}
		merged = append(merged, s)
	}
	for i, s := range merged {
		if i == editMaxViews {
			out.Printf("  … (%d more changed places not shown; read the file to see them)\n", len(merged)-i)
			break
		}
		if i > 0 {
			out.Printf("  …\n")
		}
		for l := s.from; l <= s.to && !out.Full(); l++ {
			end := len(text)
			if l < len(starts) {
				end = starts[l]
			}
			line := strings.TrimSuffix(strings.TrimSuffix(text[starts[l-1]:end], "\n"), "\r")
			out.WriteString(numberedLine(int64(l), []byte(line), 0))
		}
	}
	if out.Full() {
		out.Hint = fmt.Sprintf("read %s to see the rest", shown)
	}
}

// lineStarts is the byte offset of each line of text.
func lineStarts(text string) []int {
	if text == "" {
		return nil
	}
	starts := []int{0}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' && i+1 < len(text) {
			starts = append(starts, i+1)
		}
	}
	return starts
}
