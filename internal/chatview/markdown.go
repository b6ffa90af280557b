package chatview

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"charm.land/glamour/v2"
	"charm.land/glamour/v2/styles"

	"github.com/cortexfs/ctx/internal/sessions"
)

// Markdown renders assistant Markdown for a terminal with glamour.
type Markdown struct {
	r *glamour.TermRenderer
}

// NewMarkdown makes a renderer wrapping at width columns (at most 100, so
// prose stays readable on a wide terminal). The style is glamour's "dark",
// or a standard style named by GLAMOUR_STYLE (light, dracula, ...).
func NewMarkdown(width int) (*Markdown, error) {
	if width <= 0 {
		width = 80
	}
	if width > 100 {
		width = 100
	}
	style := styles.DarkStyle
	if s := os.Getenv("GLAMOUR_STYLE"); s != "" {
		if _, ok := styles.DefaultStyles[s]; ok {
			style = s
		}
	}
	r, err := glamour.NewTermRenderer(glamour.WithStandardStyle(style), glamour.WithWordWrap(width-4))
	if err != nil {
		return nil, fmt.Errorf("markdown renderer: %w", err)
	}
	return &Markdown{r: r}, nil
}

// trailingPad matches what glamour pads a line with up to the wrap width:
// spaces and SGR sequences at the end of a line.
var trailingPad = regexp.MustCompile(`(?:\x1b\[[0-9;]*m| )+$`)

// Render turns one block of Markdown into terminal text without leading or
// trailing blank lines and without the padding to the wrap width. Control
// characters of the text become U+FFFD first, so an agent's answer cannot
// drive the terminal; the escape sequences in the result are glamour's.
func (m *Markdown) Render(md string) string {
	out, err := m.r.Render(sessions.Clean(md))
	if err != nil {
		return sessions.Clean(md) // the text as written beats nothing
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if trailingPad.MatchString(l) {
			l = trailingPad.ReplaceAllString(l, "")
			if strings.Contains(l, "\x1b[") {
				l += "\x1b[m"
			}
		}
		lines[i] = l
	}
	for len(lines) > 0 && blank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && blank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func blank(l string) bool { return strings.TrimSpace(sgr.ReplaceAllString(l, "")) == "" }

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
