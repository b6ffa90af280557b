package stdtool

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// spec: Output keeps at most Budget bytes, cut at a line
// boundary (a rune boundary for one huge line), valid UTF-8, then the cut
// note with the hint, then the notes.
func TestOutput(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	last := strings.Repeat("w", Budget%100-1) + "\n"
	full := strings.Repeat(line, Budget/100) + last // exactly Budget bytes
	tests := []struct {
		name   string
		writes []string
		hint   string
		cut    bool
		notes  []string
		want   string
		full   bool
	}{
		{name: "small", writes: []string{"a\n", "b\n"}, want: "a\nb\n"},
		{name: "invalid UTF-8 replaced", writes: []string{"caf\xe9\n"}, want: "caf\uFFFD\n"},
		{name: "notes after the result", writes: []string{"a\n"}, notes: []string{"note one", "note two\n"}, want: "a\nnote one\nnote two\n"},
		{
			name: "cut at the last line boundary", writes: []string{full, "yy\nzzz\n"}, hint: "read on with --offset 9",
			want: full + "[output cut: 7 more bytes (2 lines) not shown; read on with --offset 9]\n", full: true,
		},
		{
			name: "a line across the budget is dropped whole", writes: []string{full[:len(full)-len(last)+10], strings.Repeat("y", 100) + "\n"},
			want: full[:len(full)-len(last)] + "[output cut: 111 more bytes (1 lines) not shown]\n", full: true,
		},
		{
			name: "writes after the cut are counted", writes: []string{full, "a\n", "b\nc\n"},
			want: full + "[output cut: 6 more bytes (3 lines) not shown]\n", full: true,
		},
		{
			name: "Cut without anything dropped", writes: []string{"a\n"}, cut: true, hint: "stopped at 1000 matches",
			want: "a\n[output cut; stopped at 1000 matches]\n", full: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			o := NewOutput(&buf)
			for _, w := range tc.writes {
				if n, err := o.WriteString(w); n != len(w) || err != nil {
					t.Fatalf("Write = %d %v", n, err)
				}
			}
			if tc.cut {
				o.Cut()
			}
			o.Hint = tc.hint
			for _, n := range tc.notes {
				o.Note("%s", n)
			}
			if o.Full() != tc.full {
				t.Fatalf("Full = %v", o.Full())
			}
			if err := o.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tc.want {
				t.Fatalf("got %d bytes\n%q\nwant %d bytes\n%q", len(got), tail(got), len(tc.want), tail(tc.want))
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-200):] }

// spec: one line longer than the budget is cut on a rune
// boundary: the kept part is valid UTF-8 within the budget.
func TestOutputLongLineRuneBoundary(t *testing.T) {
	for shift := 0; shift < 4; shift++ {
		var buf bytes.Buffer
		o := NewOutput(&buf)
		o.WriteString(strings.Repeat("a", shift) + strings.Repeat("€", Budget)) // 3-byte runes
		o.Flush()
		got := buf.String()
		body, note, ok := strings.Cut(got, "\n[output cut: ")
		if !ok || !utf8.ValidString(body) || strings.ContainsRune(body, utf8.RuneError) || len(body) > Budget || len(body) < Budget-3 {
			t.Fatalf("shift %d: body %d bytes, valid %v, note %q", shift, len(body), utf8.ValidString(body), note)
		}
		if want := len(strings.Repeat("a", shift)+strings.Repeat("€", Budget)) - len(body); !strings.HasPrefix(note, itoa(want)+" more bytes not shown]") {
			t.Fatalf("shift %d: note %q, want %d bytes", shift, note, want)
		}
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}
