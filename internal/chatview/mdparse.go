package chatview

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The Markdown a chat shows is parsed here, not by a CommonMark library:
// one linked into ctx ran its package init — an HTML entity table, its
// parsers' tables — in every ctx command, `ctx --help` included, for the
// one path that renders. What the renderer needs is the blocks and
// inlines assistants write: ATX and setext headings, paragraphs, fenced
// and indented code, block quotes, bullet and ordered lists (tight or
// loose, nested), thematic breaks, HTML blocks (shown as written), GFM
// tables (as written), and inline code, emphasis and strong emphasis (the
// CommonMark delimiter rules), links, images, autolinks, backslash escapes,
// hard line breaks and the common entities. Not read: link reference
// definitions (a reference link stays as written).

// mdKind is a block's kind.
type mdKind int

const (
	blkPara mdKind = iota
	blkHeading
	blkRule
	blkCode // fenced or indented: lines as written
	blkHTML // lines as written
	blkTable
	blkQuote
	blkList
)

// mdBlock is one parsed block.
type mdBlock struct {
	kind  mdKind
	lines []string   // text of a paragraph or heading; a code, HTML or table block's lines
	kids  []*mdBlock // a quote's blocks
	items [][]*mdBlock
	// A list's: ordered (its first number start), tight (no blank line
	// between its items or their blocks).
	ordered bool
	start   int
	tight   bool
	// blankBefore: a blank line came between this block and the one before.
	blankBefore bool
}

// mdMaxDepth bounds the nesting of quotes and lists: a line of a thousand
// ">" is a paragraph below it, not a thousand recursions.
const mdMaxDepth = 32

// expandTabs replaces the tabs of the line's indentation with spaces to
// the next multiple of 4 (CommonMark's tab stop).
func expandTabs(l string) string {
	if !strings.Contains(l, "\t") {
		return l
	}
	var b strings.Builder
	col := 0
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '\t':
			n := 4 - col%4
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case ' ':
			b.WriteByte(' ')
			col++
		default:
			b.WriteString(l[i:])
			return b.String()
		}
	}
	return b.String()
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

func isBlank(l string) bool { return strings.TrimSpace(l) == "" }

// isRule: three or more of one of - * _, spaces between (CommonMark 4.1).
func isRule(l string) bool {
	if indentOf(l) > 3 {
		return false
	}
	t := strings.TrimSpace(l)
	if t == "" || !strings.ContainsRune("-*_", rune(t[0])) {
		return false
	}
	n := 0
	for _, r := range t {
		switch {
		case r == rune(t[0]):
			n++
		case r == ' ' || r == '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// atxText is the text of an ATX heading line (heading(l) holds).
func atxText(l string) string {
	h := strings.TrimSpace(strings.TrimLeft(strings.TrimLeft(l, " "), "#"))
	// A closing sequence of #s, after a space, is not the text.
	if c := strings.TrimRight(h, "#"); c != h && (c == "" || strings.HasSuffix(c, " ") || strings.HasSuffix(c, "\t")) {
		h = strings.TrimSpace(c)
	}
	return h
}

// isSetext: an underline that makes the paragraph above it a heading.
func isSetext(l string) bool {
	t := strings.TrimSpace(l)
	return indentOf(l) <= 3 && t != "" && (strings.Trim(t, "=") == "" || strings.Trim(t, "-") == "")
}

func isQuote(l string) bool {
	return indentOf(l) <= 3 && strings.HasPrefix(strings.TrimLeft(l, " "), ">")
}

// unquote is a quote line without its marker (and one space after it).
func unquote(l string) string {
	return strings.TrimPrefix(strings.TrimLeft(l, " ")[1:], " ")
}

// htmlStart: a line that opens an HTML block — a comment, a
// declaration, or a tag: "<" or "</", a name of letters, digits and "-",
// then the end, a space, ">" or "/" (an autolink such as <https://…> is
// not one) — kept as written up to a blank line.
func htmlStart(l string) bool {
	if indentOf(l) > 3 {
		return false
	}
	t := strings.TrimLeft(l, " ")
	if strings.HasPrefix(t, "<!") || strings.HasPrefix(t, "<?") {
		return true
	}
	t = strings.TrimPrefix(strings.TrimPrefix(t, "<"), "/")
	if len(t) == len(strings.TrimLeft(l, " ")) || t == "" || !isASCIILetter(t[0]) {
		return false
	}
	n := 1
	for n < len(t) && (isASCIILetter(t[n]) || t[n] >= '0' && t[n] <= '9' || t[n] == '-') {
		n++
	}
	return n == len(t) || strings.ContainsRune(" \t>/", rune(t[n]))
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// mdItem is a list item's first line.
type mdItem struct {
	ordered bool
	mark    byte // the bullet, or an ordered item's delimiter
	num     int
	col     int    // the column its content starts at
	rest    string // the content on the marker's line
}

func listItem(l string) (mdItem, bool) {
	lead := indentOf(l)
	if lead > 3 {
		return mdItem{}, false
	}
	t := l[lead:]
	var it mdItem
	w := 0
	switch {
	case t != "" && strings.ContainsRune("-+*", rune(t[0])):
		it.mark, w = t[0], 1
	default:
		d := 0
		for d < len(t) && d < 9 && t[d] >= '0' && t[d] <= '9' {
			d++
		}
		if d == 0 || d >= len(t) || (t[d] != '.' && t[d] != ')') {
			return mdItem{}, false
		}
		it.ordered, it.mark, w = true, t[d], d+1
		it.num, _ = strconv.Atoi(t[:d])
	}
	after := t[w:]
	if strings.HasPrefix(after, "\t") { // a tab after the marker: spaces to its stop
		after = strings.Repeat(" ", 4-(lead+w)%4) + after[1:]
	}
	if after != "" && after[0] != ' ' {
		return mdItem{}, false
	}
	sp := indentOf(after)
	switch {
	case strings.TrimSpace(after) == "":
		it.col, it.rest = lead+w+1, ""
	case sp > 4: // indented code inside the item: one space is the gap
		it.col, it.rest = lead+w+1, after[1:]
	default:
		it.col, it.rest = lead+w+sp, after[sp:]
	}
	return it, true
}

// interrupts: a line that ends a paragraph without a blank line.
func interrupts(l string) bool {
	// An HTML line does not: inline HTML is text of the paragraph.
	if isBlank(l) || fenceOf(l) != "" || heading(l) || isRule(l) || isQuote(l) {
		return true
	}
	if it, ok := listItem(l); ok && it.rest != "" && (!it.ordered || it.num == 1) {
		return true
	}
	return false
}

// parseBlocks parses lines (tabs of their indentation expanded) into
// blocks.
func parseBlocks(lines []string, depth int) []*mdBlock {
	var out []*mdBlock
	blank := false
	add := func(b *mdBlock) {
		b.blankBefore = blank && len(out) > 0
		blank = false
		out = append(out, b)
	}
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case isBlank(l):
			blank = true
			i++
		case fenceOf(l) != "":
			fence, ind := fenceOf(l), indentOf(l)
			b := &mdBlock{kind: blkCode}
			for i++; i < len(lines) && !closesFence(lines[i], fence); i++ {
				// The fence's own indentation is taken off its lines.
				c := lines[i]
				c = c[min(ind, indentOf(c)):]
				b.lines = append(b.lines, c)
			}
			i++ // the closing fence (or the end)
			add(b)
		case heading(l):
			add(&mdBlock{kind: blkHeading, lines: []string{atxText(l)}})
			i++
		case isRule(l):
			add(&mdBlock{kind: blkRule})
			i++
		case indentOf(l) >= 4:
			b := &mdBlock{kind: blkCode}
			for ; i < len(lines) && (isBlank(lines[i]) || indentOf(lines[i]) >= 4); i++ {
				b.lines = append(b.lines, lines[i][min(4, indentOf(lines[i])):])
			}
			for len(b.lines) > 0 && isBlank(b.lines[len(b.lines)-1]) {
				b.lines = b.lines[:len(b.lines)-1]
			}
			add(b)
		case isQuote(l) && depth < mdMaxDepth:
			var inner []string
			para := false // the quote's last line is paragraph text (a lazy line may follow)
			for ; i < len(lines); i++ {
				c := lines[i]
				if isQuote(c) {
					u := expandTabs(unquote(c))
					inner = append(inner, u)
					para = !isBlank(u) && fenceOf(u) == "" && indentOf(u) < 4
					continue
				}
				if para && !interrupts(c) {
					inner = append(inner, c)
					continue
				}
				break
			}
			add(&mdBlock{kind: blkQuote, kids: parseBlocks(inner, depth+1)})
		case htmlStart(l):
			b := &mdBlock{kind: blkHTML}
			for ; i < len(lines) && !isBlank(lines[i]); i++ {
				b.lines = append(b.lines, lines[i])
			}
			add(b)
		default:
			if it, ok := listItem(l); ok && depth < mdMaxDepth {
				var b *mdBlock
				b, i = parseList(lines, i, it, depth)
				add(b)
				continue
			}
			b := &mdBlock{kind: blkPara, lines: []string{strings.TrimLeft(l, " ")}}
			for i++; i < len(lines); i++ {
				c := lines[i]
				if isSetext(c) {
					b.kind = blkHeading
					i++
					break
				}
				if interrupts(c) {
					break
				}
				b.lines = append(b.lines, strings.TrimLeft(c, " "))
			}
			if b.kind == blkPara && isTable(b.lines) {
				b.kind = blkTable
				for j, t := range b.lines {
					b.lines[j] = strings.TrimSpace(t)
				}
			}
			add(b)
		}
	}
	return out
}

// isTable: a paragraph whose every line starts with "|" (a GFM table,
// shown as written).
func isTable(lines []string) bool {
	if len(lines) < 2 {
		return false
	}
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "|") {
			return false
		}
	}
	return true
}

// parseList parses the list whose first item starts at lines[i]; it
// returns the list and the index of the line after it.
func parseList(lines []string, i int, first mdItem, depth int) (*mdBlock, int) {
	b := &mdBlock{kind: blkList, ordered: first.ordered, start: first.num, tight: true}
	for i < len(lines) {
		it, ok := listItem(lines[i])
		if !ok || it.ordered != first.ordered || it.mark != first.mark || isRule(lines[i]) {
			break
		}
		body := []string{it.rest}
		para := it.rest != ""
		i++
		for i < len(lines) {
			c := lines[i]
			if isBlank(c) {
				// The item goes on after blank lines only with a line
				// indented to its content.
				j := i
				for j < len(lines) && isBlank(lines[j]) {
					j++
				}
				if j < len(lines) && indentOf(lines[j]) >= it.col {
					for ; i < j; i++ {
						body = append(body, "")
					}
					continue
				}
				break
			}
			if indentOf(c) >= it.col {
				body = append(body, c[it.col:])
				para = fenceOf(c[it.col:]) == "" && indentOf(c[it.col:]) < 4
				i++
				continue
			}
			if para && !interrupts(c) {
				if _, item := listItem(c); !item {
					body = append(body, strings.TrimLeft(c, " "))
					i++
					continue
				}
			}
			break
		}
		kids := parseBlocks(body, depth+1)
		for k, kid := range kids {
			if k > 0 && kid.blankBefore {
				b.tight = false
			}
		}
		b.items = append(b.items, kids)
		// Blank lines between this item and the next make the list loose.
		j := i
		for j < len(lines) && isBlank(lines[j]) {
			j++
		}
		if j > i && j < len(lines) {
			if next, ok := listItem(lines[j]); ok && next.ordered == first.ordered && next.mark == first.mark && !isRule(lines[j]) {
				b.tight = false
				i = j
			}
		}
	}
	return b, i
}

// The inline parser: text, code spans, autolinks, links and images, and
// emphasis by CommonMark's delimiter runs. Its output is the styled text.

type inlNode struct {
	text string // rendered text (or a delimiter run's characters)
	// A delimiter run of * or _: its character, its length now and at
	// first, and whether it can open or close emphasis.
	delim       byte
	n, orig     int
	open, close bool
	seq         int      // its place in the text (emphasis' bottoms)
	prev, next  *inlNode // emphasis' list
}

// inline renders Markdown inline text (lines joined by "\n") as styled
// text; "\n" where the text has a hard line break.
func inline(s string) string {
	return emphasis(scanInline(s))
}

func isPunct(r rune) bool {
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

func scanInline(s string) []*inlNode {
	var nodes []*inlNode
	// The link openers ("[" or "![") not yet closed, by index in nodes;
	// those below linksFrom can no longer start a link (no link in a
	// link), only an image.
	var brackets []opener
	linksFrom := 0
	var text []byte
	flush := func() {
		if len(text) > 0 {
			nodes = append(nodes, &inlNode{text: string(text)})
			text = text[:0]
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			text = append(text, '\n') // a hard line break
			i += 2
			i += len(s[i:]) - len(strings.TrimLeft(s[i:], " "))
		case c == '\\' && i+1 < len(s) && s[i+1] < utf8.RuneSelf && isPunct(rune(s[i+1])):
			text = append(text, s[i+1])
			i += 2
		case c == '\n':
			// Soft break: a space; hard after two spaces.
			k := len(text) - len(bytes.TrimRight(text, " "))
			text = text[:len(text)-k]
			if k >= 2 {
				text = append(text, '\n')
			} else {
				text = append(text, ' ')
			}
			i++
			i += len(s[i:]) - len(strings.TrimLeft(s[i:], " "))
		case c == '`':
			n := len(s[i:]) - len(strings.TrimLeft(s[i:], "`"))
			end := closingTicks(s, i+n, n)
			if end < 0 {
				text = append(text, s[i:i+n]...)
				i += n
				continue
			}
			code := strings.ReplaceAll(s[i+n:end], "\n", " ")
			if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
				code = code[1 : len(code)-1]
			}
			text = append(text, mdCode.Render(code)...)
			i = end + n
		case c == '<':
			if url, n := autolink(s[i:]); n > 0 {
				text = append(text, mdUnderline.Render(url)...)
				i += n
				continue
			}
			text = append(text, c)
			i++
		case c == '&':
			r, n := entity(s[i:])
			text = append(text, r...)
			i += n
		case c == '*' || c == '_':
			flush()
			n := len(s[i:]) - len(strings.TrimLeft(s[i:], string(c)))
			before, _ := utf8.DecodeLastRuneInString(s[:i])
			after, _ := utf8.DecodeRuneInString(s[i+n:])
			if i == 0 {
				before = ' '
			}
			if i+n >= len(s) {
				after = ' '
			}
			left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
			right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
			d := &inlNode{text: s[i : i+n], delim: c, n: n, orig: n, open: left, close: right}
			if c == '_' {
				d.open = left && (!right || isPunct(before))
				d.close = right && (!left || isPunct(after))
			}
			nodes = append(nodes, d)
			i += n
		case c == '[' || c == '!' && i+1 < len(s) && s[i+1] == '[':
			flush()
			w := 1
			if c == '!' {
				w = 2
			}
			brackets = append(brackets, opener{at: len(nodes), image: c == '!'})
			nodes = append(nodes, &inlNode{text: s[i : i+w]})
			i += w
		case c == ']':
			flush()
			var n int
			nodes, brackets, linksFrom, n = closeBracket(nodes, brackets, linksFrom, s[i+1:])
			i += 1 + n
		default:
			_, n := utf8.DecodeRuneInString(s[i:])
			text = append(text, s[i:i+n]...)
			i += n
		}
	}
	flush()
	return nodes
}

// closingTicks is where a run of exactly n backticks starts at or after
// from, or -1.
func closingTicks(s string, from, n int) int {
	for i := from; i < len(s); {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			return -1
		}
		i += j
		m := len(s[i:]) - len(strings.TrimLeft(s[i:], "`"))
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

// autolink reads <scheme:…> or <address@host>: the URL and the bytes
// taken, or 0.
func autolink(s string) (string, int) {
	end := strings.IndexByte(s, '>')
	if end < 2 {
		return "", 0
	}
	in := s[1:end]
	if strings.ContainsAny(in, " \t\n<") {
		return "", 0
	}
	if colon := strings.IndexByte(in, ':'); colon >= 2 && colon <= 32 {
		for k, r := range in[:colon] {
			if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || k > 0 && (unicode.IsDigit(r) || strings.ContainsRune("+.-", r)))) {
				return "", 0
			}
		}
		return in, end + 1
	}
	if at := strings.IndexByte(in, '@'); at > 0 && at < len(in)-1 && strings.Contains(in[at:], ".") {
		return in, end + 1
	}
	return "", 0
}

// entity decodes a character reference at the start of s — the common
// named ones and numeric ones that are not control characters — or keeps
// the "&" as written.
func entity(s string) (string, int) {
	semi := strings.IndexByte(s, ';')
	if semi < 2 || semi > 10 {
		return "&", 1
	}
	name := s[1:semi]
	if v := namedEntity(name); v != "" {
		return v, semi + 1
	}
	if name[0] != '#' {
		return "&", 1
	}
	var v uint64
	var err error
	if len(name) > 1 && (name[1] == 'x' || name[1] == 'X') {
		v, err = strconv.ParseUint(name[2:], 16, 32)
	} else {
		v, err = strconv.ParseUint(name[1:], 10, 32)
	}
	r := rune(v)
	if err != nil || v == 0 || !utf8.ValidRune(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
		return "&", 1 // as written, never a control character
	}
	return string(r), semi + 1
}

// namedEntity is the text of the common named references, or "".
func namedEntity(name string) string {
	switch name {
	case "amp":
		return "&"
	case "lt":
		return "<"
	case "gt":
		return ">"
	case "quot":
		return `"`
	case "apos":
		return "'"
	case "nbsp":
		return "\u00a0"
	case "copy":
		return "©"
	case "reg":
		return "®"
	case "trade":
		return "™"
	case "hellip":
		return "…"
	case "mdash":
		return "—"
	case "ndash":
		return "–"
	case "rarr":
		return "→"
	case "larr":
		return "←"
	}
	return ""
}

// opener is a "[" or "![" in the inline nodes.
type opener struct {
	at    int
	image bool
}

// closeBracket handles a "]" followed by rest: a link or image when the
// nearest opener may start one and rest starts with "(destination
// "title")", else a literal "]". It returns the nodes, the openers, the
// links' bound, and the bytes of rest it took.
func closeBracket(nodes []*inlNode, brackets []opener, linksFrom int, rest string) ([]*inlNode, []opener, int, int) {
	if len(brackets) == 0 {
		return append(nodes, &inlNode{text: "]"}), brackets, linksFrom, 0
	}
	o := brackets[len(brackets)-1]
	brackets = brackets[:len(brackets)-1] // matched or not, it is spent
	dest, n := linkTail(rest)
	if n == 0 || !o.image && o.at < linksFrom {
		return append(nodes, &inlNode{text: "]"}), brackets, linksFrom, 0
	}
	label := emphasis(nodes[o.at+1:])
	var out string
	if o.image {
		out = mdFaint.Render("[image: " + plainText(label) + "] " + dest)
	} else {
		out = mdUnderline.Render(label)
		if dest != "" && dest != plainText(label) {
			out += " " + mdFaint.Render(dest)
		}
		linksFrom = o.at // no link inside a link
	}
	nodes = append(nodes[:o.at], &inlNode{text: out})
	return nodes, brackets, linksFrom, n
}

// linkTail reads "(destination "title")" at the start of s: the
// destination and the bytes taken, or 0.
func linkTail(s string) (string, int) {
	if !strings.HasPrefix(s, "(") {
		return "", 0
	}
	i := 1
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
	}
	skip()
	var dest string
	if i < len(s) && s[i] == '<' {
		end := strings.IndexAny(s[i+1:], ">\n")
		if end < 0 || s[i+1+end] != '>' {
			return "", 0
		}
		dest, i = s[i+1:i+1+end], i+end+2
	} else {
		start, parens := i, 0
		for i < len(s) && s[i] > ' ' {
			if s[i] == '\\' && i+1 < len(s) {
				i += 2
				continue
			}
			if s[i] == '(' {
				parens++
			} else if s[i] == ')' {
				if parens == 0 {
					break
				}
				parens--
			}
			i++
		}
		dest = s[start:i]
	}
	skip()
	if i < len(s) && strings.ContainsRune(`"'(`, rune(s[i])) {
		closer := s[i]
		if closer == '(' {
			closer = ')'
		}
		end := strings.IndexByte(s[i+1:], closer)
		if end < 0 {
			return "", 0
		}
		i += end + 2
		skip()
	}
	if i >= len(s) || s[i] != ')' {
		return "", 0
	}
	return dest, i + 1
}

// emphasis applies CommonMark's rules for delimiter runs to nodes and
// returns the text: each closer is matched with the nearest opener of its
// character before it (the rule of three kept), the text between becomes
// emphasis (one character of each run) or strong emphasis (two).
// Unmatched runs stay text. The nodes are a linked list here and a
// failed search leaves a bottom for its kind of closer, so a long line of
// runs costs what its length does.
func emphasis(nodes []*inlNode) string {
	if len(nodes) == 0 {
		return ""
	}
	head := &inlNode{}
	p := head
	for k, x := range nodes {
		x.seq, x.prev, x.next = k, p, nil
		p.next, p = x, x
	}
	// bottom[kind]: no opener for such a closer at or below this seq.
	bottom := map[[3]int]int{}
	for cl := head.next; cl != nil; cl = cl.next {
		if cl.delim == 0 || !cl.close || cl.n == 0 {
			continue
		}
		key := [3]int{int(cl.delim), btoi(cl.open), cl.orig % 3}
		low, seen := bottom[key]
		var op *inlNode
		for o := cl.prev; o != head && (!seen || o.seq > low); o = o.prev {
			if o.delim != cl.delim || !o.open || o.n == 0 {
				continue
			}
			if (o.close || cl.open) && (o.orig+cl.orig)%3 == 0 && !(o.orig%3 == 0 && cl.orig%3 == 0) {
				continue
			}
			op = o
			break
		}
		if op == nil {
			bottom[key] = cl.prev.seq
			if cl.prev == head {
				bottom[key] = -1
			}
			if !cl.open {
				cl.delim = 0 // text from now on
			}
			continue
		}
		use, st := 1, mdItalic
		if op.n >= 2 && cl.n >= 2 {
			use, st = 2, mdBold
		}
		var inner strings.Builder
		for x := op.next; x != cl; x = x.next {
			inner.WriteString(x.text)
		}
		op.n -= use
		op.text = op.text[:op.n]
		cl.n -= use
		cl.text = cl.text[:cl.n]
		em := &inlNode{text: st.Render(inner.String()), seq: op.seq, prev: op, next: cl}
		op.next, cl.prev = em, em
		if cl.n > 0 {
			cl = em // the loop's step lands on the closer again: it may close more
		}
	}
	var b strings.Builder
	for x := head.next; x != nil; x = x.next {
		b.WriteString(x.text)
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
