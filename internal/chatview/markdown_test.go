package chatview

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// TestBlocks: streamed Markdown is cut into closed blocks whatever the
// delta boundaries; a blank line inside a fence does not close a block.
func TestBlocks(t *testing.T) {
	md := "# Title\nPara one\nstill one\n\n- a\n- b\n\n```go\nx := 1\n\ny := 2\n```\nafter fence\n\n   \n~~~~\n~~~\n~~~~\ntail"
	want := []string{"# Title", "Para one\nstill one", "- a\n- b", "```go\nx := 1\n\ny := 2\n```", "after fence", "~~~~\n~~~\n~~~~"}
	for _, step := range []int{1, 3, 7, len(md)} {
		var b Blocks
		var got []string
		for i := 0; i < len(md); i += step {
			got = append(got, b.Write(md[i:min(i+step, len(md))])...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %d:\n got %q\nwant %q", step, got, want)
		}
		if p := b.Pending(); p != "tail" {
			t.Errorf("step %d: pending %q", step, p)
		}
		if f := b.Flush(); f != "tail" || b.Pending() != "" {
			t.Errorf("step %d: flush %q", step, f)
		}
	}
}

// TestMarkdownRender: the rendered text without padding or blank edges,
// and escape sequences from the text neutralised.
func TestMarkdownRender(t *testing.T) {
	m, err := NewMarkdown(60)
	if err != nil {
		t.Fatal(err)
	}
	out := m.Render("Hello **world**\x1b]0;pwned\x07")
	if strings.HasPrefix(out, "\n") || strings.HasSuffix(out, "\n") || strings.HasSuffix(out, " ") {
		t.Errorf("edges: %q", out)
	}
	if strings.Contains(out, "\x1b]") || strings.Contains(out, "\x07") || strings.Contains(out, "**") {
		t.Errorf("not rendered or not neutralised: %q", out)
	}
	if got := screen(out); !strings.Contains(got, "Hello world") {
		t.Errorf("text: %q", got)
	}
}

// TestToolLineAndDuration: the finished line of each status.
func TestToolLineAndDuration(t *testing.T) {
	for _, tc := range []struct {
		status, layer, content string
		d                      time.Duration
		want                   string
	}{
		{"ok", "", "x", 42 * time.Millisecond, "✓ read calc.sh  42 ms"},
		{"error", "", "\nexit 1\nmore", 300 * time.Millisecond, "✗ read calc.sh  300 ms"},
		{"error", "", "", 1300 * time.Millisecond, "✗ read calc.sh  1.3 s"},
		{"denied", "agent-policy", "no", 0, "⊘ read calc.sh denied by agent-policy"},
		{"denied", "", "no", 0, "⊘ read calc.sh denied"},
		{"cancelled", "", "", 12 * time.Second, "⊘ read calc.sh cancelled  12 s"},
	} {
		if got := ToolLine(tc.status, "read calc.sh", tc.layer, tc.content, tc.d); got != tc.want {
			t.Errorf("ToolLine(%s) = %q, want %q", tc.status, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0 ms", 999 * time.Millisecond: "999 ms", 9949 * time.Millisecond: "9.9 s", 59 * time.Second: "59 s", 125 * time.Second: "2m5s"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestMarkdownBlocks: each kind of block rendered, no markup left, a style
// cut by the wrap closed at the line's end and opened again on the next.
func TestMarkdownBlocks(t *testing.T) {
	m, err := NewMarkdown(40)
	if err != nil {
		t.Fatal(err)
	}
	out := m.Render("# Fixed\n\nThe bug is **a long bold phrase that has to wrap across lines** and `code` and [docs](https://x.example).\n\n- a\n- b\n  more\n\n3. three\n4. four\n\n```sh\nsh  test.sh\n```\n\n> quoted\n\n| a | b |\n|---|---|\n| 1 | 2 |")
	got := screen(out)
	for _, want := range []string{"  Fixed\n", "• a\n  • b more", "3. three\n  4. four", "    sh  test.sh", "│ quoted", "docs https://x.example", "| a | b |\n  |---|---|\n  | 1 | 2 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	for _, markup := range []string{"# ", "**", "`", "](", "```"} {
		if strings.Contains(got, markup) {
			t.Errorf("markup %q left:\n%s", markup, got)
		}
	}
	lines := strings.Split(out, "\n")
	cut := false
	for i, l := range lines {
		if ansi.StringWidth(l) > 40 {
			t.Errorf("line %d wider than 40: %q", i, l)
		}
		if i > 0 && strings.HasSuffix(lines[i-1], "\x1b[m") && strings.Contains(lines[i-1], "\x1b[1m") {
			// The bold phrase was cut here: closed above, reopened below.
			cut = true
			if !strings.HasPrefix(l, "  \x1b[1m") {
				t.Errorf("line %d: bold not reopened after the cut: %q", i, l)
			}
		}
	}
	if !cut {
		t.Errorf("the bold phrase was not cut and closed at a line's end:\n%q", out)
	}
}

// TestTail: a failed call shows its result's last lines, not its first.
func TestTail(t *testing.T) {
	out := "total 36\n-rw a\n-rw b\n\n+ sh test.sh\nFAIL add: got -1, want 3\nexit status 1\n\n"
	got := Tail(out, 3)
	if strings.Join(got, "|") != "+ sh test.sh|FAIL add: got -1, want 3|exit status 1" {
		t.Fatalf("Tail = %q", got)
	}
	if got := Tail("a\x1b[31mb", 6); len(got) != 1 || strings.Contains(got[0], "\x1b") {
		t.Fatalf("control characters kept: %q", got)
	}
	if got := Tail("", 6); len(got) != 0 {
		t.Fatalf("empty: %q", got)
	}
}
