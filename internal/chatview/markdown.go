package chatview

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"

	"github.com/cortexfs/ctx/internal/sessions"
)

// Markdown renders assistant Markdown for a terminal: parsed by
// mdparse.go and written as text with SGR styles, wrapped to the width.
// No syntax highlighter and no Markdown library: their package init
// (chroma's lexers, a CommonMark parser's entity table) ran in every ctx
// command, the client's whole start, for the one path that renders.
type Markdown struct {
	width int
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
	return &Markdown{width: width}, nil
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
	src := strings.Split(sessions.Clean(md), "\n")
	for i, l := range src {
		src[i] = expandTabs(l)
	}
	lines := renderBlocks(parseBlocks(src, 0), m.width-2*len(margin), false)
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

// renderBlocks renders blocks at width, a blank line between them; the
// blocks of a tight list's item sit on consecutive lines.
func renderBlocks(blocks []*mdBlock, width int, tight bool) []string {
	var out []string
	for _, b := range blocks {
		ls := renderBlock(b, width)
		if len(ls) == 0 {
			continue
		}
		if len(out) > 0 && !tight {
			out = append(out, "")
		}
		out = append(out, ls...)
	}
	return out
}

func renderBlock(b *mdBlock, width int) []string {
	width = max(width, 10)
	switch b.kind {
	case blkHeading:
		return wrap(mdHeading.Render(inline(b.lines[0])), width)
	case blkPara:
		return wrap(inline(strings.Join(b.lines, "\n")), width)
	case blkTable, blkHTML:
		return b.lines // as written
	case blkRule:
		return []string{mdFaint.Render(strings.Repeat("─", min(width, 40)))}
	case blkCode:
		// As written, never wrapped: indentation is meaning in code.
		out := make([]string, len(b.lines))
		for i, l := range b.lines {
			out[i] = margin + mdCode.Render(l)
		}
		return out
	case blkQuote:
		inner := renderBlocks(b.kids, width-2, false)
		for i, l := range inner {
			inner[i] = mdFaint.Render("│") + " " + l
		}
		return inner
	case blkList:
		var out []string
		num := b.start
		for _, item := range b.items {
			marker := "• "
			if b.ordered {
				marker = strconv.Itoa(num) + ". "
				num++
			}
			inner := renderBlocks(item, width-len([]rune(marker)), b.tight)
			if len(inner) == 0 {
				inner = []string{""}
			}
			if len(out) > 0 && !b.tight {
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
	return nil
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
