package envelope

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseLine: only delta and one-shaped tool_call lines are agent
// output; everything else is invalid (X9), results and lifecycle frames
// above all (only the host writes them). spec: X7, X8, X9, A3
func TestParseLine(t *testing.T) {
	cases := []struct {
		name, in string
		want     *Line
	}{
		{"delta", `{"type":"delta","text":"hi"}`, &Line{Type: "delta", Text: "hi"}},
		{"empty delta", `{"type":"delta","text":""}`, &Line{Type: "delta", Text: ""}},
		{"delta, keys reversed", `{"text":"a\nb","type":"delta"}`, &Line{Type: "delta", Text: "a\nb"}},
		{"tool_call", `{"type":"tool_call","id":"call-1","name":"tsh","args":["load","bash"]}`,
			&Line{Type: "tool_call", ID: "call-1", Name: "tsh", Args: []string{"load", "bash"}}},
		{"tool_call no args", `{"type":"tool_call","id":"c","name":"clock","args":[]}`,
			&Line{Type: "tool_call", ID: "c", Name: "clock", Args: []string{}}},
		{"surrounding space", ` {"type":"delta","text":"x"} `, &Line{Type: "delta", Text: "x"}},
		// An executable agent may report its model use
		{"usage", `{"type":"usage","input":1200,"output":80}`, &Line{Type: "usage", Usage: &Usage{Input: 1200, Output: 80}}},
		{"usage with cache", `{"type":"usage","input":1,"output":2,"cache_read":3,"cache_write":4}`,
			&Line{Type: "usage", Usage: &Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4}}},
		{"usage without output", `{"type":"usage","input":1}`, nil},
		{"usage negative", `{"type":"usage","input":-1,"output":2}`, nil},
		{"usage huge", `{"type":"usage","input":1099511627777,"output":2}`, nil},
		{"usage fraction", `{"type":"usage","input":1.5,"output":2}`, nil},
		{"usage unknown field", `{"type":"usage","input":1,"output":2,"cost":3}`, nil},

		{"tool_result", `{"type":"tool_result","call_id":"c","name":"tsh","status":"ok","content":"x","truncated":false}`, nil},
		{"approval", `{"type":"approval","run":"r","id":"c","decision":"allow_once"}`, nil},
		{"approval_request", `{"type":"approval_request","run":"r","id":"c","name":"tsh","args":[],"timeout_ms":1}`, nil},
		{"done", `{"type":"done","run":"r","id":"m","status":"ok"}`, nil},
		{"assistant", `{"type":"assistant","text":"x"}`, nil},
		{"error", `{"type":"error","code":"x","message":"y"}`, nil},
		{"start", `{"type":"start","run":"r","id":"m","op":"send"}`, nil},
		{"user", `{"type":"user","text":"x"}`, nil},
		{"cancelled", `{"type":"cancelled","run":"r"}`, nil},
		{"unknown type", `{"type":"thinking","text":"x"}`, nil},
		{"no type", `{"text":"x"}`, nil},
		{"type not a string", `{"type":1,"text":"x"}`, nil},
		{"delta unknown field", `{"type":"delta","text":"x","run":"r"}`, nil},
		{"delta missing text", `{"type":"delta"}`, nil},
		{"delta null text", `{"type":"delta","text":null}`, nil},
		{"delta text not a string", `{"type":"delta","text":1}`, nil},
		{"tool_call unknown field", `{"type":"tool_call","id":"c","name":"tsh","args":[],"call_id":"c"}`, nil},
		{"tool_call missing args", `{"type":"tool_call","id":"c","name":"tsh"}`, nil},
		{"tool_call null args", `{"type":"tool_call","id":"c","name":"tsh","args":null}`, nil},
		{"tool_call non-string args", `{"type":"tool_call","id":"c","name":"tsh","args":["a",1]}`, nil},
		{"tool_call args object", `{"type":"tool_call","id":"c","name":"tsh","args":{"a":"b"}}`, nil},
		{"tool_call missing id", `{"type":"tool_call","name":"tsh","args":[]}`, nil},
		{"tool_call missing name", `{"type":"tool_call","id":"c","args":[]}`, nil},
		{"tool_call id too long", `{"type":"tool_call","id":"` + strings.Repeat("c", 129) + `","name":"tsh","args":[]}`, nil},
		{"tool_call name too long", `{"type":"tool_call","id":"c","name":"` + strings.Repeat("n", 65) + `","args":[]}`, nil},
		{"invalid UTF-8", "{\"type\":\"delta\",\"text\":\"\xff\"}", nil},
		{"not JSON", `hello`, nil},
		{"empty line", ``, nil},
		{"array", `[{"type":"delta","text":"x"}]`, nil},
		{"trailing object", `{"type":"delta","text":"x"}{"type":"delta","text":"y"}`, nil},
		{"over 1 MiB", `{"type":"delta","text":"` + strings.Repeat("x", MaxOutputLine) + `"}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLine([]byte(tc.in))
			if tc.want == nil {
				if !errors.Is(err, ErrInvalidOutput) || got != nil {
					t.Fatalf("want ErrInvalidOutput, got %+v, %v", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	// A delta of exactly 1 MiB (the whole line) is still one line.
	pre, post := `{"type":"delta","text":"`, `"}`
	exact := pre + strings.Repeat("x", MaxOutputLine-len(pre)-len(post)) + post
	if _, err := ParseLine([]byte(exact)); err != nil {
		t.Fatalf("line of exactly %d bytes: %v", MaxOutputLine, err)
	}
}

// TestParseLineKeysAreExact: encoding/json matches keys case-insensitively
// and keeps the last of duplicate keys; agent output must use exactly the
// documented keys, once each. spec: X9
func TestParseLineKeysAreExact(t *testing.T) {
	for _, in := range []string{
		`{"type":"delta","TEXT":"x"}`,
		`{"Type":"delta","text":"x"}`,
		`{"type":"tool_call","ID":"c","Name":"tsh","Args":[]}`,
		`{"type":"tool_call","type":"delta","text":"x"}`,
		`{"type":"delta","text":"x","text":"y"}`,
	} {
		if l, err := ParseLine([]byte(in)); !errors.Is(err, ErrInvalidOutput) {
			t.Errorf("%s accepted as %+v", in, l)
		}
	}
}

// TestNormalize: content is stdout byte for byte; a failure appends stderr
// with status error; invalid UTF-8 becomes U+FFFD; the cut is at most
// 16 KiB on a character boundary. spec: X4, X5, X7 (interfaces.md "Locations")
func TestNormalize(t *testing.T) {
	cases := []struct {
		name           string
		stdout, stderr string
		ok             bool
		status, want   string
		truncated      bool
	}{
		{"ok keeps stdout verbatim", "  a\r\nb\n\n", "ignored", true, StatusOK, "  a\r\nb\n\n", false},
		{"ok, empty", "", "warn", true, StatusOK, "", false},
		{"error: stdout then stderr", "out\n", "err\n", false, StatusError, "out\nerr\n", false},
		{"error: stderr only", "", "boom", false, StatusError, "boom", false},
		{"invalid UTF-8", "a\xffb\xc3", "", true, StatusOK, "a\uFFFDb\uFFFD", false},
		{"split rune across stdout and stderr", "\xe2\x82", "\xac", false, StatusError, "€", false},
		{"exactly 16 KiB", strings.Repeat("a", MaxContent), "", true, StatusOK, strings.Repeat("a", MaxContent), false},
		{"16 KiB + 1", strings.Repeat("a", MaxContent+1), "", true, StatusOK, strings.Repeat("a", MaxContent), true},
		{"cut before a 2-byte rune", strings.Repeat("a", MaxContent-1) + "é", "", true, StatusOK, strings.Repeat("a", MaxContent-1), true},
		{"cut before a 4-byte rune", strings.Repeat("a", MaxContent-2) + "😀", "", true, StatusOK, strings.Repeat("a", MaxContent-2), true},
		{"16 KiB of stdout then stderr", strings.Repeat("o", MaxContent), "e", false, StatusError, strings.Repeat("o", MaxContent), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, content, tr := Normalize([]byte(tc.stdout), []byte(tc.stderr), tc.ok)
			if st != tc.status || content != tc.want || tr != tc.truncated {
				t.Fatalf("got %s %q(%d) %v; want %s %q(%d) %v", st, short(content), len(content), tr, tc.status, short(tc.want), len(tc.want), tc.truncated)
			}
			if !utf8.ValidString(content) || len(content) > MaxContent {
				t.Fatalf("content invalid or too long: %d bytes", len(content))
			}
		})
	}
	// Normalize never modifies its inputs (stdout is shared with the caller).
	out := []byte("o")
	_, _, _ = Normalize(out[:1:1], []byte("e"), false)
	if string(out) != "o" {
		t.Fatal("Normalize modified stdout")
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:20] + "…" + s[len(s)-20:]
	}
	return s
}

// TestCut: never splits a rune, never exceeds n, cuts only when needed. spec: X5
func TestCut(t *testing.T) {
	s := "aé€😀" // 1 + 2 + 3 + 4 bytes
	want := map[int]string{0: "", 1: "a", 2: "a", 3: "aé", 4: "aé", 5: "aé", 6: "aé€", 7: "aé€", 8: "aé€", 9: "aé€", 10: s, 11: s}
	for n := 0; n <= 11; n++ {
		got, tr := Cut(s, n)
		if got != want[n] || tr != (n < len(s)) {
			t.Errorf("Cut(%q, %d) = %q %v; want %q %v", s, n, got, tr, want[n], n < len(s))
		}
	}
}
