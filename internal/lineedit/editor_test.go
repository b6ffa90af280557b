package lineedit

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// chunks is a reader returning its chunks one per Read, as a terminal's
// reads come.
type chunks struct{ c [][]byte }

func (r *chunks) Read(p []byte) (int, error) {
	if len(r.c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.c[0])
	if n == len(r.c[0]) {
		r.c = r.c[1:]
	} else {
		r.c[0] = r.c[0][n:]
	}
	return n, nil
}

func reads(parts ...string) *chunks {
	r := &chunks{}
	for _, p := range parts {
		r.c = append(r.c, []byte(p))
	}
	return r
}

func lines(t *testing.T, e *Editor, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		l, err := e.ReadLine()
		if err != nil {
			t.Fatalf("line %d: %v (so far %q)", i, err, out)
		}
		out = append(out, l)
	}
	return out
}

// TestEditorMessages: what each way of typing yields as messages.
func TestEditorMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"typed", []string{"hello\r"}, []string{"hello"}},
		{"two messages in one read", []string{"a\rb\r"}, []string{"a", "b"}},
		// A 3-line paste is one message, its newlines kept: never one run per line.
		{"bracketed paste", []string{"\x1b[200~one\r\ntwo\rthree\x1b[201~\r"}, []string{"one\ntwo\nthree"}},
		{"paste cut by the reads", []string{"\x1b[20", "0~one\r", "two\x1b[2", "01~", "\r"}, []string{"one\ntwo"}},
		{"paste then typing", []string{"\x1b[200~a\nb\x1b[201~ c\r"}, []string{"a\nb c"}},
		// Alt+Enter is a newline and eats nothing: the b after it stays.
		{"alt+enter", []string{"a\x1b\rb\r"}, []string{"a\nb"}},
		{"alt+enter alone in its read", []string{"a", "\x1b\r", "b\r"}, []string{"a\nb"}},
		{"ctrl+j", []string{"a\nb\r"}, []string{"a\nb"}},
		// A lone Escape at the end of a read is the Escape key: the next key is typed.
		{"lone escape", []string{"a\x1b", "b\r"}, []string{"ab"}},
		{"arrows and backspace", []string{"abd\x1b[D\x1b[Dx\x7f\x1b[Cc\r"}, []string{"abcd"}},
		{"home end", []string{"bc\x01a\x05d\r"}, []string{"abcd"}},
		{"kill word and line", []string{"one two\x17three\r", "junk\x15ok\r"}, []string{"one three", "ok"}},
		{"utf-8 cut by the reads", []string{"\xc3", "\xa9t\xc3\xa9\r"}, []string{"été"}},
		{"unknown sequence typed as nothing", []string{"a\x1b[99;99Zb\r"}, []string{"ab"}},
		{"control bytes of a paste dropped", []string{"\x1b[200~a\x07b\tc\x1b[201~\r"}, []string{"ab\tc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			e := New(reads(tc.in...), &out, "> ", 80)
			got := lines(t, e, len(tc.want))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEditorEnds: Ctrl+C interrupts; Ctrl+D on an empty message and the
// end of input are EOF.
func TestEditorEnds(t *testing.T) {
	var out bytes.Buffer
	if _, err := New(reads("ab\x03"), &out, "> ", 80).ReadLine(); !errors.Is(err, ErrInterrupt) {
		t.Fatalf("ctrl+c: %v", err)
	}
	if _, err := New(reads("\x04"), &out, "> ", 80).ReadLine(); err != io.EOF {
		t.Fatalf("ctrl+d: %v", err)
	}
	if l, err := New(reads("ab\x01\x04\r"), &out, "> ", 80).ReadLine(); err != nil || l != "b" {
		t.Fatalf("ctrl+d deletes under the cursor: %q %v", l, err)
	}
	if _, err := New(reads("ab"), &out, "> ", 80).ReadLine(); err != io.EOF {
		t.Fatalf("end of input: %v", err)
	}
}

// TestEditorLargePaste: a paste up to the bound is one message, whole; a
// larger one is refused with its size, and nothing of it is kept — never
// cut. The editor reads on after it.
func TestEditorLargePaste(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 400<<10/17) // ~400 KiB, many lines
	var parts []string
	parts = append(parts, "\x1b[200~")
	for i := 0; i < len(big); i += 4096 {
		parts = append(parts, big[i:min(i+4096, len(big))])
	}
	parts = append(parts, "\x1b[201~\r")
	var out bytes.Buffer
	e := New(reads(parts...), &out, "> ", 80)
	l, err := e.ReadLine()
	if err != nil || l != big {
		t.Fatalf("400 KiB paste: %d bytes, %v; want %d", len(l), err, len(big))
	}

	huge := strings.Repeat("x", 1<<20)
	out.Reset()
	e = New(reads("\x1b[200~", huge[:300000], huge[300000:], "\x1b[201~", "ok\r"), &out, "> ", 80)
	l, err = e.ReadLine()
	if err != nil || l != "ok" {
		t.Fatalf("after the refused paste: %q %v", l, err)
	}
	if !strings.Contains(out.String(), "paste of 1,048,576 bytes refused: a message holds at most 524,288 bytes") {
		t.Fatalf("no refusal with the size in %q", tail(out.String()))
	}
}

func tail(s string) string {
	if len(s) > 400 {
		return s[len(s)-400:]
	}
	return s
}

// TestEditorHistory: ↑ recalls earlier messages (multi-line ones whole),
// ↓ comes back to the one being written, and a new chat's editor reads
// the history the last one saved.
func TestEditorHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h", "demo")
	var out bytes.Buffer
	e := New(reads("first\r", "\x1b[200~two\nlines\x1b[201~\r"), &out, "> ", 80)
	e.History = LoadHistory(path)
	lines(t, e, 2)
	e = New(reads("draft\x1b[A\x1b[A\r", "x\x1b[A\x1b[B\r"), &out, "> ", 80)
	e.History = LoadHistory(path)
	got := lines(t, e, 2)
	if got[0] != "first" || got[1] != "x" {
		t.Fatalf("got %q", got)
	}
	e = New(reads("\x1b[A\x1b[A\x1b[A\r"), &out, "> ", 80)
	e.History = LoadHistory(path)
	if got := lines(t, e, 1); got[0] != "two\nlines" {
		t.Fatalf("third back: %q", got)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v %v", st, err)
	}
	h := LoadHistory(path)
	for i := 0; i < 3*MaxHistory; i++ {
		h.Add(strings.Repeat("y", i%7) + string(rune('a'+i%26)))
	}
	if h2 := LoadHistory(path); h2.Len() != MaxHistory || h2.At(MaxHistory-1) != h.At(MaxHistory-1) {
		t.Fatalf("bounded history: %d entries", h2.Len())
	}
}

// TestEditorRedraw: a message wider than the terminal and one of several
// lines are drawn with the cursor where it belongs (the redraw goes back
// up exactly the rows it drew).
func TestEditorRedraw(t *testing.T) {
	var out bytes.Buffer
	e := New(reads("0123456789\r"), &out, "> ", 6)
	lines(t, e, 1)
	// "> 0123456789" is 12 cells: exactly two rows of 6, the cursor moved
	// down out of the pending wrap.
	if !strings.Contains(out.String(), "\r\x1b[J> 0123456789\r\n\r") {
		t.Fatalf("drawn %q", tail(out.String()))
	}
	out.Reset()
	e = New(reads("ab\ncd\x1b[A"), &out, "> ", 80)
	e.ReadLine()
	if !strings.Contains(out.String(), "> ab\r\n  cd\r") {
		t.Fatalf("continuation not indented: %q", out.String())
	}
}

// FuzzEditor: whatever bytes come, ReadLine ends, and every message is
// valid UTF-8 within the bound.
func FuzzEditor(f *testing.F) {
	for _, s := range []string{"a\r", "\x1b[200~x\ny\x1b[201~\r", "\x1b\r\x1b[A\x1b[B\x7f\r", "\x1b[1;5D\x17\x15\r", "\xff\xfe\r", "\x1b[200~\x1b[200~\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		e := New(bytes.NewReader(in), &out, "> ", 20)
		e.Max = 64
		e.History = LoadHistory("")
		for i := 0; i < 1000; i++ {
			l, err := e.ReadLine()
			if err != nil {
				return
			}
			if !utf8.ValidString(l) || len(l) > e.Max {
				t.Fatalf("message %q", l)
			}
		}
	})
}
