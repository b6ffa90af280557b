package run

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cortexfs/ctx/ipc"
)

func TestCutText(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abc", 4, "abc"},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd"},
		{"ab€", 4, "ab"},        // € is 3 bytes: not split
		{"€€", 4, "€"},          // a cut on the second rune's first byte
		{"€", 2, "€"},           // at least one rune, or a delta split would not end
		{"\xff\xff", 1, "\xff"}, // invalid bytes count as one each
	} {
		if got := cutText(tc.s, tc.n); got != tc.want {
			t.Errorf("cutText(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestReplyBounded: a reply keeps at most MaxAssistantText bytes (plus a
// rune's worth, so the cut can end on a boundary) and counts them all.
// (an agent streaming without end does not grow the daemon)
func TestReplyBounded(t *testing.T) {
	var r reply
	chunk := strings.Repeat("é", 1000) // 2,000 bytes
	for i := 0; i < 2000; i++ {
		r.WriteString(chunk)
	}
	if r.total != 4_000_000 {
		t.Errorf("total %d", r.total)
	}
	if n := r.b.Len(); n > ipc.MaxAssistantText+utf8.UTFMax {
		t.Errorf("kept %d bytes", n)
	}
	if got := cutText(r.b.String(), ipc.MaxAssistantText); len(got) != ipc.MaxAssistantText || !utf8.ValidString(got) {
		t.Errorf("cut to %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	r.Reset()
	if r.total != 0 || r.b.Len() != 0 {
		t.Error("Reset left something")
	}
}
