package chatview

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/cortexfs/ctx/ipc"
)

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func plain(s string) string              { return ansi.Strip(s) }

// screen is what a terminal shows of out (colours dropped): "\r" goes
// to the line's start, "\x1b[K" erases to its end, "\n" starts a line.
func screen(out string) string {
	out = regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAllString(out, "")
	var lines []string
	var cur []rune
	col := 0
	for i := 0; i < len(out); {
		switch {
		case strings.HasPrefix(out[i:], "\x1b[K"):
			cur = cur[:col]
			i += 3
		case out[i] == '\r':
			col = 0
			i++
		case out[i] == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
			i++
		default:
			r := []rune(out[i:])[0]
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
			i += len(string(r))
		}
	}
	return strings.Join(append(lines, string(cur)), "\n")
}

// TestViewRun: a run's frames leave one line per tool call with its status
// and duration, the Markdown rendered block by block, and a status line
// with usage and cost.
func TestViewRun(t *testing.T) {
	var b strings.Builder
	clk := newClock()
	v, err := New(&b, Options{Width: 80, Now: clk.now, Cost: func(f *ipc.Frame) string { return "$0.0045" }})
	if err != nil {
		t.Fatal(err)
	}
	v.Begin()
	clk.add(1500 * time.Millisecond)
	v.Tick()
	if !strings.Contains(plain(b.String()), "waiting for the model  1.5 s") {
		t.Errorf("no wait shown: %q", b.String())
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeToolCall, Name: "tsh", Args: []string{"call", "read", "calc.sh"}})
	clk.add(42 * time.Millisecond)
	v.Tick()
	if !strings.Contains(plain(b.String()), " read calc.sh  42 ms") {
		t.Errorf("no running line: %q", b.String())
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeToolResult, Name: "tsh", Status: "ok", Content: "1\tx"})
	v.Frame(&ipc.Frame{Type: ipc.TypeToolCall, Name: "tsh", Args: []string{"call", "bash", "sh test.sh"}})
	clk.add(300 * time.Millisecond)
	v.Frame(&ipc.Frame{Type: ipc.TypeToolResult, Name: "tsh", Status: "error", Content: "FAIL add\nexit status 1\n"})
	v.Frame(&ipc.Frame{Type: ipc.TypeToolCall, Name: "tsh", Args: []string{"call", "bash", "rm -rf /"}})
	v.Frame(&ipc.Frame{Type: ipc.TypeToolResult, Name: "tsh", Status: "denied", Layer: "agent-policy", Content: "denied"})
	for _, d := range []string{"# Fix", "ed\n\nSome *text*", " here.\n\n- one\n- two\n\n```go\nx := 1\n", "```\n\ntail"} {
		v.Frame(&ipc.Frame{Type: ipc.TypeDelta, Text: d})
	}
	v.Frame(&ipc.Frame{Type: ipc.TypeAssistant, Text: "ignored: the deltas were shown"})
	clk.add(time.Second)
	v.Frame(&ipc.Frame{Type: ipc.TypeDone, Status: "ok", Usage: &ipc.Usage{Input: 1000, Output: 100}})
	got := screen(b.String())
	want := []string{
		"✓ read calc.sh  42 ms\n",
		"✗ bash \"sh test.sh\"  300 ms\n  │ FAIL add\n  │ exit status 1\n",
		"⊘ bash \"rm -rf /\" denied by agent-policy\n",
		"Fixed",
		"Some text here.",
		"• one\n",
		"x := 1",
		"tail",
		"── ok · 2.8 s · 1000 in · 100 out · $0.0045\n",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("screen lacks %q after %d:\n%s", w, at, got)
		}
		at += i + len(w)
	}
	for _, markup := range []string{"# Fixed", "*text*", "```", "ignored"} {
		if strings.Contains(got, markup) {
			t.Errorf("screen has %q:\n%s", markup, got)
		}
	}
	if !strings.Contains(got, "Fixed\n\n") {
		t.Errorf("blocks not separated by a blank line:\n%q", got)
	}
}
