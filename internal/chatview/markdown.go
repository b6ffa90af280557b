package chatview

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"

	"github.com/cortexfs/ctx/internal/sessions"
)

// Markdown renders assistant Markdown for a terminal: CommonMark parsed by
// goldmark's core parser and written as text with SGR styles, wrapped to
// the width. No extension and no syntax highlighter: glamour's (chroma's
// lexers and styles) cost every ctx command ~30 ms of package init, the
// client's whole start, to colour code blocks.
type Markdown struct {
	width int
	p     parser.Parser
}

// NewMarkdown makes a renderer wrapping at width columns (at most 100, so
// prose stays readable on a wide terminal).
func NewMarkdown(width int) (*Markdown, error) {
	if width <= 0 {
		width = 80
	}
	if width > 100 {
		width = 100
	}
	return &Markdown{width: width, p: goldmark.DefaultParser()}, nil
}

// The styles (sgrStyle, view.go), whose "off" undoes only what "on" set,
// so they nest (bold inside a link, code inside a heading).
var (
	mdBold      = styleBold
	mdItalic    = sgrStyle{"3", "23"}
	mdUnderline = sgrStyle{"4", "24"}
	mdFaint     = styleFaint
	mdCode      = sgrStyle{"36", "39"} // cyan: the terminal's palette decides the shade
	mdHeading   = sgrStyle{"1;35", "22;39"}
)

// margin is the left margin of every rendered line.
const margin = "  "

// Render turns one block of Markdown into terminal text without leading or
// trailing blank lines or trailing spaces. Control characters of the text
// become U+FFFD first, so an agent's answer cannot drive the terminal; the
// only escape sequences in the result are the renderer's own styles.
func (m *Markdown) Render(md string) string {
	src := []byte(sessions.Clean(md))
	doc := m.p.Parse(text.NewReader(src))
	r := mdRender{src: src}
	lines := r.children(doc, m.width-2*len(margin))
	for i, l := range lines {
		if l = strings.TrimRight(l, " "); l != "" {
			l = margin + l
		}
		lines[i] = l
	}
	return strings.Join(trimBlankLines(lines), "\n")
}

func trimBlankLines(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// mdRender writes one parsed document.
type mdRender struct{ src []byte }

// children renders n's blocks at width, a blank line between them; the
// items of a tight list sit on consecutive lines.
func (r *mdRender) children(n ast.Node, width int) []string {
	var out []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		ls := r.block(c, width)
		if len(ls) == 0 {
			continue
		}
		if len(out) > 0 && !tightIn(n) {
			out = append(out, "")
		}
		out = append(out, ls...)
	}
	return out
}

// tightIn: n is a list item of a tight list (its blocks, and the list's
// items, are not separated by blank lines).
func tightIn(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.List:
		return n.IsTight
	case *ast.ListItem:
		l, ok := n.Parent().(*ast.List)
		return ok && l.IsTight
	}
	return false
}

func (r *mdRender) block(n ast.Node, width int) []string {
	width = max(width, 10)
	switch n := n.(type) {
	case *ast.Heading:
		return wrap(mdHeading.Render(r.inline(n)), width)
	case *ast.Paragraph, *ast.TextBlock:
		if table := r.table(n); table != nil {
			return table
		}
		return wrap(r.inline(n), width)
	case *ast.ThematicBreak:
		return []string{mdFaint.Render(strings.Repeat("─", min(width, 40)))}
	case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
		// As written, never wrapped: indentation is meaning in code.
		var out []string
		for i := 0; i < n.Lines().Len(); i++ {
			seg := n.Lines().At(i)
			l := strings.TrimRight(string(seg.Value(r.src)), "\r\n")
			if _, html := n.(*ast.HTMLBlock); html {
				out = append(out, l)
				continue
			}
			out = append(out, margin+mdCode.Render(l))
		}
		if h, ok := n.(*ast.HTMLBlock); ok && h.HasClosure() {
			out = append(out, strings.TrimRight(string(h.ClosureLine.Value(r.src)), "\r\n"))
		}
		return out
	case *ast.Blockquote:
		inner := r.children(n, width-2)
		for i, l := range inner {
			inner[i] = mdFaint.Render("│") + " " + l
		}
		return inner
	case *ast.List:
		var out []string
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			marker := "• "
			if n.IsOrdered() {
				marker = strconv.Itoa(num) + ". "
				num++
			}
			inner := r.children(item, width-len([]rune(marker)))
			if len(inner) == 0 {
				inner = []string{""}
			}
			if len(out) > 0 && !n.IsTight {
				out = append(out, "")
			}
			pad := strings.Repeat(" ", len([]rune(marker)))
			for i, l := range inner {
				if i == 0 {
					out = append(out, marker+l)
				} else if l != "" {
					out = append(out, pad+l)
				} else {
					out = append(out, l)
				}
			}
		}
		return out
	}
	return r.children(n, width)
}

// table is a paragraph whose every line starts with "|" (a GFM table,
// which the core parser reads as a paragraph), line by line as written;
// nil for any other paragraph.
func (r *mdRender) table(n ast.Node) []string {
	lines := n.Lines()
	if lines.Len() < 2 {
		return nil
	}
	var out []string
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		l := strings.TrimSpace(string(seg.Value(r.src)))
		if !strings.HasPrefix(l, "|") {
			return nil
		}
		out = append(out, l)
	}
	return out
}

// inline is n's inline content as one styled string; "\n" where the text
// has a hard line break.
func (r *mdRender) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Value(r.src))
			switch {
			case c.HardLineBreak():
				b.WriteByte('\n')
			case c.SoftLineBreak():
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.CodeSpan:
			var code strings.Builder
			for t := c.FirstChild(); t != nil; t = t.NextSibling() {
				if s, ok := t.(*ast.Text); ok {
					code.Write(s.Value(r.src))
				} else if s, ok := t.(*ast.String); ok {
					code.Write(s.Value)
				}
			}
			b.WriteString(mdCode.Render(code.String()))
		case *ast.Emphasis:
			st := mdItalic
			if c.Level >= 2 {
				st = mdBold
			}
			b.WriteString(st.Render(r.inline(c)))
		case *ast.Link:
			label := r.inline(c)
			b.WriteString(mdUnderline.Render(label))
			if dest := string(c.Destination); dest != "" && dest != plainText(label) {
				b.WriteString(" " + mdFaint.Render(dest))
			}
		case *ast.AutoLink:
			b.WriteString(mdUnderline.Render(string(c.URL(r.src))))
		case *ast.Image:
			b.WriteString(mdFaint.Render("[image: " + r.inline(c) + "] " + string(c.Destination)))
		case *ast.RawHTML:
			for i := 0; i < c.Segments.Len(); i++ {
				seg := c.Segments.At(i)
				b.Write(seg.Value(r.src))
			}
		default:
			b.WriteString(r.inline(c))
		}
	}
	return b.String()
}

// wrap cuts styled text into lines of at most width columns, at spaces
// when it can. A style open at a cut is closed at the line's end and opened
// again on the next line, so no margin or prompt is ever styled.
func wrap(s string, width int) []string {
	lines := strings.Split(ansi.Wrap(s, width, ""), "\n")
	open := ""
	for i, l := range lines {
		l = open + l
		open = openStyles(l)
		if open != "" {
			l += "\x1b[m"
		}
		lines[i] = l
	}
	return lines
}

// openStyles is the SGR sequence that restores what is still on at the end
// of l (only the renderer's own codes occur: 1–4, 22–24, 35, 36, 39).
func openStyles(l string) string {
	var on [5]string // bold/faint, italic, underline, colour, second weight
	for _, m := range sgr().FindAllString(l, -1) {
		for _, code := range strings.Split(m[2:len(m)-1], ";") {
			switch code {
			case "1", "2":
				on[0] = code
			case "22":
				on[0] = ""
			case "3":
				on[1] = code
			case "23":
				on[1] = ""
			case "4":
				on[2] = code
			case "24":
				on[2] = ""
			case "35", "36":
				on[3] = code
			case "39", "", "0":
				on[3] = ""
				if code != "39" {
					on = [5]string{}
				}
			}
		}
	}
	var codes []string
	for _, c := range on {
		if c != "" {
			codes = append(codes, c)
		}
	}
	if len(codes) == 0 {
		return ""
	}
	return "\x1b[" + strings.Join(codes, ";") + "m"
}

// sgr is compiled on first use: only the chat renders.
var sgr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\x1b\[[0-9;]*m`) })

// plainText is s without its styles.
func plainText(s string) string { return sgr().ReplaceAllString(s, "") }

// Blocks cuts streamed Markdown into blocks that are complete: a block
// closes at a blank line outside a fenced code block, at the line that
// closes a fence, and after an ATX heading line. A closed block renders
// the same whatever follows it (a loose list is the exception: its items
// render as separate lists, which reads the same).
type Blocks struct {
	pending string
	scanned int    // bytes of pending already looked at (whole lines)
	fence   string // the open fence's marker ("```" or "~~~"), "" outside one
}

// Write adds streamed text and returns the blocks it closed, in order.
func (b *Blocks) Write(s string) []string {
	b.pending += s
	var done []string
	for {
		nl := strings.IndexByte(b.pending[b.scanned:], '\n')
		if nl < 0 {
			return done
		}
		end := b.scanned + nl + 1
		line := b.pending[b.scanned : end-1]
		cut := false
		switch {
		case b.fence != "":
			if closesFence(line, b.fence) {
				b.fence, cut = "", true
			}
		case fenceOf(line) != "":
			b.fence = fenceOf(line)
		case strings.TrimSpace(line) == "":
			// A blank line closes a block; blank lines before any text
			// are dropped.
			cut = true
		case heading(line):
			cut = true
		}
		b.scanned = end
		if cut {
			if blk := trimBlank(b.pending[:end]); blk != "" {
				done = append(done, blk)
			}
			b.pending, b.scanned = b.pending[end:], 0
		}
	}
}

// Pending is the text of the block still open.
func (b *Blocks) Pending() string { return b.pending }

// Flush returns the open block (the stream ended or paused for a tool
// call) and starts afresh.
func (b *Blocks) Flush() string {
	s := trimBlank(b.pending)
	b.pending, b.scanned, b.fence = "", 0, ""
	return s
}

// trimBlank drops the blank lines (white space only) at both ends of s,
// keeping the indentation of the first line of text.
func trimBlank(s string) string {
	lines := strings.Split(s, "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// fenceOf is the marker of a line opening a fenced code block, or "".
func fenceOf(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, c := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, c) {
			n := len(t) - len(strings.TrimLeft(t, c[:1]))
			return strings.Repeat(c[:1], n)
		}
	}
	return ""
}

func closesFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == ""
}

func heading(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, "#") {
		return false
	}
	h := strings.TrimLeft(t, "#")
	return len(t)-len(h) <= 6 && (h == "" || h[0] == ' ' || h[0] == '\t')
}
