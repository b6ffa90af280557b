package stdtool

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// The matcher: a pattern compiled once (literal prefilters, ASCII case
// folding, the regexp only where a literal matched) and searched line by
// line.

// grepper is a compiled grep PATTERN: a line matches when re matches in
// it. Most patterns hold a literal every match contains: the file is then
// searched for the literal (bytes.Index, fast) and only the lines holding
// it are checked with re.
type grepper struct {
	re *regexp.Regexp
	// lits: a matching line holds one of these; nil when the pattern
	// requires no literal (every line is checked with re).
	lits [][]byte
	// fold: lits are lower-case ASCII, searched in an ASCII-lower-cased
	// copy of the file (for -i or (?i)).
	fold bool
	// unicodeFold: a lit holds k or s, which also fold to non-ASCII runes
	// (K U+212A, ſ U+017F): a file holding those is checked line by line.
	unicodeFold bool
	// pure: the pattern is lits[0] and nothing else: holding it is a match.
	pure bool
}

// compileGrep compiles PATTERN with grep's line semantics: ^ and $ match
// at line ends, and nothing matches a line break ('.', \s, [^a] stop at
// it; a literal \n is refused, as rg does).
func compileGrep(pattern string, icase bool) (*grepper, error) {
	flags := syntax.Perl &^ syntax.OneLine
	if icase {
		flags |= syntax.FoldCase
	}
	tree, err := syntax.Parse(pattern, flags)
	if err != nil {
		return nil, Failf("grep: invalid regular expression %q: %v", pattern, err)
	}
	if err := noNewline(tree); err != nil {
		return nil, Failf("grep: %q: %v", pattern, err)
	}
	re, err := regexp.Compile(tree.String())
	if err != nil {
		return nil, Failf("grep: invalid regular expression %q: %v", pattern, err)
	}
	g := &grepper{re: re}
	if set, ok := requiredLits(tree); ok {
		for _, l := range set.lits {
			if set.fold {
				l = asciiLower(l)
				if strings.ContainsAny(l, "ks") {
					g.unicodeFold = true
				}
			}
			g.lits = append(g.lits, []byte(l))
		}
		g.fold = set.fold
		g.pure = tree.Op == syntax.OpLiteral && len(g.lits) == 1
	}
	return g, nil
}

// noNewline makes re unable to match a line break.
func noNewline(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpAnyChar:
		re.Op = syntax.OpAnyCharNotNL
	case syntax.OpCharClass:
		var rs []rune
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo <= '\n' && '\n' <= hi {
				if lo < '\n' {
					rs = append(rs, lo, '\n'-1)
				}
				if hi > '\n' {
					rs = append(rs, '\n'+1, hi)
				}
				continue
			}
			rs = append(rs, lo, hi)
		}
		if len(rs) == 0 {
			re.Op = syntax.OpNoMatch
		}
		re.Rune = rs
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return errors.New("the pattern holds a line break (\\n); grep matches within one line")
			}
		}
	}
	for _, sub := range re.Sub {
		if err := noNewline(sub); err != nil {
			return err
		}
	}
	return nil
}

// litSet is a set of literals one of which every match holds.
type litSet struct {
	lits []string
	fold bool // some literal is case-insensitive (ASCII only)
}

// maxLits bounds a literal set (an alternation of many words is checked
// with the regexp instead).
const maxLits = 16

// score ranks a set as a prefilter: longer shortest literal first, then
// fewer literals.
func (s litSet) score() int {
	short := 1 << 20
	for _, l := range s.lits {
		short = min(short, len(l))
	}
	return short*64 - len(s.lits)
}

// requiredLits is a literal set for re: every match of re holds one of
// them. ok is false when re requires no literal grep can search for.
func requiredLits(re *syntax.Regexp) (litSet, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		fold := re.Flags&syntax.FoldCase != 0
		s := string(re.Rune)
		if len(s) == 0 || fold && !isASCII(s) {
			return litSet{}, false
		}
		return litSet{lits: []string{s}, fold: fold}, true
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLits(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLits(re.Sub[0])
		}
	case syntax.OpConcat:
		var best litSet
		found := false
		for _, sub := range re.Sub {
			if s, ok := requiredLits(sub); ok && (!found || s.score() > best.score()) {
				best, found = s, true
			}
		}
		return best, found
	case syntax.OpAlternate:
		var all litSet
		for _, sub := range re.Sub {
			s, ok := requiredLits(sub)
			if !ok {
				return litSet{}, false
			}
			all.lits = append(all.lits, s.lits...)
			all.fold = all.fold || s.fold
		}
		if len(all.lits) > maxLits {
			return litSet{}, false
		}
		return all, true
	}
	return litSet{}, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// lowerInto is an ASCII-lower-cased copy of src in dst's storage.
func lowerInto(dst, src []byte) []byte {
	if cap(dst) < len(src) {
		dst = make([]byte, len(src))
	}
	dst = dst[:len(src)]
	for i, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}

var (
	kelvin = []byte("\u212a") // folds to k
	longS  = []byte("\u017f") // folds to s
)

// grepScratch is a search worker's reused memory.
type grepScratch struct {
	buf, lower []byte
	next       []int
}

// search calls emit for each line of data that matches, with its number
// (from 1); emit returns false to stop. search returns the number of
// matching lines seen.
func (g *grepper) search(data []byte, sc *grepScratch, emit func(lineNo int, line []byte) bool) int {
	if len(data) == 0 {
		return 0 // an empty file has no line, not one empty line
	}
	if g.lits == nil || g.unicodeFold && (bytes.Contains(data, kelvin) || bytes.Contains(data, longS)) {
		return g.searchRegexp(data, emit)
	}
	hay := data
	if g.fold {
		sc.lower = lowerInto(sc.lower, data)
		hay = sc.lower
	}
	// next[j] is where lits[j] occurs next at or after pos (-1: nowhere).
	next := sc.next[:0]
	for range g.lits {
		next = append(next, -2)
	}
	sc.next = next
	count, lineNo, counted := 0, 1, 0
	for pos := 0; pos < len(hay); {
		i := -1
		for j, lit := range g.lits {
			if next[j] == -1 {
				continue
			}
			if next[j] < pos {
				k := bytes.Index(hay[pos:], lit)
				if k < 0 {
					next[j] = -1
					continue
				}
				next[j] = pos + k
			}
			if i < 0 || next[j] < i {
				i = next[j]
			}
		}
		if i < 0 {
			break
		}
		start := bytes.LastIndexByte(hay[pos:i], '\n') + 1 + pos
		end := bytes.IndexByte(hay[i:], '\n')
		if end < 0 {
			end = len(hay)
		} else {
			end += i
		}
		line := data[start:end]
		if g.pure || g.re.Match(line) {
			count++
			lineNo += bytes.Count(data[counted:start], []byte{'\n'})
			counted = start
			if !emit(lineNo, line) {
				return count
			}
		}
		pos = end + 1
	}
	return count
}

// searchRegexp is search without a literal: the regexp runs over the
// whole file, resuming after each matching line.
func (g *grepper) searchRegexp(data []byte, emit func(lineNo int, line []byte) bool) int {
	count, lineNo, counted := 0, 1, 0
	for pos := 0; pos <= len(data); {
		loc := g.re.FindIndex(data[pos:])
		if loc == nil {
			break
		}
		i := pos + loc[0]
		if i == len(data) && i > 0 && data[i-1] == '\n' {
			break // the empty "line" after the final newline
		}
		start := bytes.LastIndexByte(data[pos:i], '\n') + 1 + pos
		end := bytes.IndexByte(data[i:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += i
		}
		count++
		lineNo += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		if !emit(lineNo, data[start:end]) {
			return count
		}
		pos = end + 1
	}
	return count
}

// showLine is a matching line as grep prints it: without its \r, a long
// line cut to a window around its first match.
func (g *grepper) showLine(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) <= grepLineShow {
		return line
	}
	at := 0
	if loc := g.re.FindIndex(line); loc != nil {
		at = loc[0]
	}
	start := max(0, at-grepLineShow/4)
	end := min(len(line), start+grepLineShow)
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end--
	}
	var b []byte
	if start > 0 {
		b = append(b, "…"...)
	}
	b = append(b, line[start:end]...)
	if end < len(line) {
		b = append(b, "…"...)
	}
	return append(b, fmt.Sprintf(" [line of %d bytes cut]", len(line))...)
}
