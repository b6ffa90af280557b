package sessions

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

// frames builds a log: each spec is "type key=value ...", seq and ts are
// filled in (ts one second apart from a fixed origin).
func logOf(t testing.TB, lines ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	origin := time.Date(2025, 1, 2, 10, 0, 0, 0, time.UTC)
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad test frame %q: %v", l, err)
		}
		m["seq"] = i + 1
		if _, ok := m["ts"]; !ok {
			m["ts"] = origin.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z07:00")
		}
		m["session"] = "s"
		j, _ := json.Marshal(m)
		b.Write(append(j, '\n'))
	}
	return b.Bytes()
}

const (
	fUser1   = `{"type":"user","run":"r1","id":"m1","text":"what is in\n  notes.txt?"}`
	fStart1  = `{"type":"start","run":"r1","id":"m1","op":"send"}`
	fCall1   = `{"type":"tool_call","run":"r1","call_id":"c1","name":"cat","args":["notes.txt"]}`
	fRes1    = `{"type":"tool_result","run":"r1","call_id":"c1","name":"cat","status":"ok","content":"\n hello world \nsecond line","truncated":false}`
	fAns1    = `{"type":"assistant","run":"r1","text":"It says hello world."}`
	fDone1   = `{"type":"done","run":"r1","id":"m1","status":"ok"}`
	fDone1U  = `{"type":"done","run":"r1","id":"m1","status":"ok","usage":{"input":100,"output":20,"cache_read":7}}`
	fUser2   = `{"type":"user","run":"r2","id":"m2","text":"delete it"}`
	fStart2  = `{"type":"start","run":"r2","id":"m2","op":"send"}`
	fCall2   = `{"type":"tool_call","run":"r2","call_id":"c2","name":"rm","args":["notes.txt"]}`
	fAsk2    = `{"type":"approval_request","run":"r2","id":"c2","name":"rm","args":["notes.txt"],"timeout_ms":60000}`
	fAllow2  = `{"type":"approval","run":"r2","id":"c2","decision":"deny"}`
	fDenied2 = `{"type":"tool_result","run":"r2","call_id":"c2","name":"rm","status":"denied","content":"not approved","truncated":false}`
	fDelta2  = `{"type":"delta","run":"r2","text":"I will "}`
	fDone2U  = `{"type":"done","run":"r2","id":"m2","status":"ok","usage":{"input":50,"output":5,"note":"x"}}`
	fTsh3    = `{"type":"start","run":"r3","id":"t3","op":"tsh"}`
	fCall3   = `{"type":"tool_call","run":"r3","call_id":"c3","name":"tsh","args":["list"]}`
)

func summarize(t *testing.T, log []byte, up bool) Summary {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), log, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(dir, "s", "private", up)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The state comes from the log and the daemon's presence.
func TestSummaryStates(t *testing.T) {
	cases := []struct {
		name      string
		log       []byte
		up        bool
		state     string
		runs      int
		active    string
		approval  string
		title     string
		usageRuns int
		usage     map[string]int64
	}{
		{"empty", nil, true, StateIdle, 0, "", "", "", 0, nil},
		{"empty no daemon", nil, false, StatePassivated, 0, "", "", "", 0, nil},
		{"ended", logOf(t, fUser1, fStart1, fCall1, fRes1, fAns1, fDone1), true, StateIdle, 1, "", "", "what is in notes.txt?", 0, nil},
		{"ended no daemon", logOf(t, fUser1, fStart1, fAns1, fDone1), false, StatePassivated, 1, "", "", "what is in notes.txt?", 0, nil},
		{"user only", logOf(t, fUser1), true, StateRunning, 1, "r1", "", "what is in notes.txt?", 0, nil},
		{"running", logOf(t, fUser1, fStart1, fCall1), true, StateRunning, 1, "r1", "", "what is in notes.txt?", 0, nil},
		{"waiting", logOf(t, fUser1, fStart1, fAns1, fDone1, fUser2, fStart2, fCall2, fAsk2), true, StateWaitingApproval, 2, "r2", "c2", "what is in notes.txt?", 0, nil},
		{"answered", logOf(t, fUser2, fStart2, fCall2, fAsk2, fAllow2), true, StateRunning, 1, "r2", "", "delete it", 0, nil},
		{"waiting no daemon", logOf(t, fUser2, fStart2, fCall2, fAsk2), false, StateInterrupted, 1, "r2", "c2", "delete it", 0, nil},
		{"asked then done", logOf(t, fUser2, fStart2, fCall2, fAsk2, fAllow2, fDenied2, fDone2U), true, StateIdle, 1, "", "", "delete it", 1, map[string]int64{"input": 50, "output": 5}},
		{"usage summed", logOf(t, fUser1, fStart1, fAns1, fDone1U, fUser2, fStart2, fDone2U), true, StateIdle, 2, "", "", "what is in notes.txt?", 2, map[string]int64{"input": 150, "output": 25, "cache_read": 7}},
		{"usage partly", logOf(t, fUser1, fStart1, fDone1, fUser2, fStart2, fDone2U), true, StateIdle, 2, "", "", "what is in notes.txt?", 1, map[string]int64{"input": 50, "output": 5}},
		{"tsh title", logOf(t, fTsh3, fCall3), true, StateRunning, 1, "r3", "", "tsh tsh list", 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := summarize(t, c.log, c.up)
			if s.State != c.state || s.Runs != c.runs || s.ActiveRun != c.active || s.Title != c.title || s.UsageRuns != c.usageRuns {
				t.Fatalf("got state %q runs %d active %q title %q usage runs %d; want %q %d %q %q %d", s.State, s.Runs, s.ActiveRun, s.Title, s.UsageRuns, c.state, c.runs, c.active, c.title, c.usageRuns)
			}
			got := ""
			if s.Approval != nil {
				got = s.Approval.ID
			}
			if got != c.approval {
				t.Fatalf("approval %q, want %q", got, c.approval)
			}
			if len(s.Usage) != len(c.usage) {
				t.Fatalf("usage %v, want %v", s.Usage, c.usage)
			}
			for k, v := range c.usage {
				if s.Usage[k] != v {
					t.Fatalf("usage %v, want %v", s.Usage, c.usage)
				}
			}
			if c.usage == nil {
				// No usage field is invented when no done carries one.
				b, _ := json.Marshal(s)
				if bytes.Contains(b, []byte(`"usage`)) {
					t.Fatalf("usage invented: %s", b)
				}
			}
		})
	}
}

func TestSummaryLastActivityAndTorn(t *testing.T) {
	log := logOf(t, fUser1, fStart1, fAns1, fDone1)
	log = append(log, `{"type":"user","run":"r2","id":"m2","te`...) // torn: no newline
	s := summarize(t, log, true)
	if s.State != StateIdle || s.Runs != 1 || !s.TornTail || s.SkippedLines != 0 {
		t.Fatalf("%+v", s)
	}
	if s.LastActivity != "2025-01-02T10:00:03.000Z" {
		t.Fatalf("last activity %q", s.LastActivity)
	}
}

func TestScan(t *testing.T) {
	long := `{"type":"delta","run":"r","text":"` + strings.Repeat("x", MaxLine) + `"}` + "\n"
	cases := []struct {
		name    string
		in      string
		types   string
		skipped int
		torn    bool
	}{
		{"empty", "", "", 0, false},
		{"one", `{"type":"user"}` + "\n", "user", 0, false},
		{"torn", `{"type":"user"}` + "\n" + `{"type":"do`, "user", 0, true},
		{"torn valid json", `{"type":"user"}` + "\n" + `{"type":"done"}`, "user", 0, true},
		{"garbage", "nope\n" + `{"type":"user"}` + "\n", "user", 1, false},
		{"no type", `{"seq":1}` + "\n", "", 1, false},
		{"blank line", "\n" + `{"type":"done"}` + "\n", "done", 1, false},
		{"too long", long + `{"type":"done"}` + "\n", "done", 1, false},
		{"too long torn", `{"type":"done"}` + "\n" + long[:len(long)-1], "done", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var types []string
			st, err := Scan(strings.NewReader(c.in), func(f *Frame) { types = append(types, f.Type) })
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(types, ","); got != c.types || st.Skipped != c.skipped || st.Torn != c.torn {
				t.Fatalf("got %q skipped %d torn %v; want %q %d %v", got, st.Skipped, st.Torn, c.types, c.skipped, c.torn)
			}
		})
	}
}

func FuzzScan(f *testing.F) {
	f.Add(logOf(f, fUser1, fStart1, fCall1, fRes1, fAns1, fDone1U))
	f.Add([]byte(`{"type":"done","usage":{"input":1e3,"output":-1,"x":{"y":1}}}` + "\n{\"ty"))
	f.Add([]byte("\n\n\x00{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		var tr Transcript
		tr.Emit = func(Entry) {}
		st, err := Scan(bytes.NewReader(data), func(fr *Frame) {
			n++
			fr.Tokens()
			tr.Frame(fr)
		})
		if err != nil {
			t.Fatal(err)
		}
		tr.End(true)
		lines := bytes.Count(data, []byte("\n"))
		if n+st.Skipped != lines {
			t.Fatalf("%d frames + %d skipped != %d lines", n, st.Skipped, lines)
		}
		if st.Torn != (len(data) > 0 && data[len(data)-1] != '\n') {
			t.Fatalf("torn %v", st.Torn)
		}
	})
}

func TestTokensIgnoresNonIntegers(t *testing.T) {
	var f Frame
	if err := json.Unmarshal([]byte(`{"type":"done","usage":{"input":12,"output":3.5,"neg":-4,"obj":{"a":1},"s":"7"}}`), &f); err != nil {
		t.Fatal(err)
	}
	got := f.Tokens()
	if len(got) != 1 || got["input"] != 12 {
		t.Fatalf("%v", got)
	}
	f.Usage = nil
	if f.Tokens() != nil {
		t.Fatal("tokens without usage")
	}
}

func TestTitle(t *testing.T) {
	long := strings.Repeat("é", TitleRunes+5)
	cases := map[string]string{
		"":                              "",
		"  hello\n\n world  ":           "hello world",
		"a\x1b[31mb\u202ec":             "a[31mbc",
		long:                            strings.Repeat("é", TitleRunes-1) + "…",
		strings.Repeat("a", TitleRunes): strings.Repeat("a", TitleRunes),
	}
	for in, want := range cases {
		if got := Title(in); got != want {
			t.Errorf("Title(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCleanAndShort(t *testing.T) {
	if got := Clean("ok\tline\nnext\x1b]0;pwn\x07\u202e"); got != "ok\tline\nnext\uFFFD]0;pwn\uFFFD\uFFFD" {
		t.Fatalf("Clean: %q", got)
	}
	// Bytes that are not UTF-8 (a lone 0x9b is an 8-bit CSI) too; a
	// real U+FFFD and other text stay.
	if got := Clean("a\x9b31mb\xc2c\uFFFDd€"); got != "a\uFFFD31mb\uFFFDc\uFFFDd€" {
		t.Fatalf("Clean of bytes not UTF-8: %q", got)
	}
	if got := Short("\n\n  first  \nsecond"); got != "first" {
		t.Fatalf("Short: %q", got)
	}
	if got := Short(strings.Repeat("ж", 200)); got != strings.Repeat("ж", ResultRunes-1)+"…" {
		t.Fatalf("Short long: %q", got)
	}
	if got := Command("write", []string{"a b.txt", "", "x"}); got != `write "a b.txt" "" x` {
		t.Fatalf("Command: %q", got)
	}
}

// The rendered transcript, one table row per log.
func TestTranscriptText(t *testing.T) {
	cases := []struct {
		name string
		log  []byte
		up   bool
		want string
	}{
		{"a run with a tool", logOf(t, fUser1, fStart1, fCall1, fRes1, fAns1, fDone1U), true,
			"── 2025-01-02 10:00:00 · r1\n" +
				"> what is in\n    notes.txt?\n" +
				"  tool cat notes.txt → ok: hello world\n" +
				"It says hello world.\n" +
				"  (ok · 4s · usage cache_read=7 input=100 output=20)\n"},
		{"denied after asking", logOf(t, fUser2, fStart2, fCall2, fAsk2, fAllow2, fDenied2, `{"type":"error","run":"r2","code":"denied","message":"the tool was not approved"}`, `{"type":"done","run":"r2","id":"m2","status":"error"}`), true,
			"── 2025-01-02 10:00:00 · r2\n" +
				"> delete it\n" +
				"  tool rm notes.txt → denied (approval: deny): not approved\n" +
				"  error denied: the tool was not approved\n" +
				"  (error · 6s)\n"},
		{"waiting for approval", logOf(t, fUser2, fStart2, fDelta2, fCall2, fAsk2), true,
			"── 2025-01-02 10:00:00 · r2\n" +
				"> delete it\n" +
				"  tool rm notes.txt → waiting-approval\n" +
				"  (waiting-approval …)\n"},
		{"streaming", logOf(t, fUser2, fStart2, fDelta2), true,
			"── 2025-01-02 10:00:00 · r2\n" +
				"> delete it\n" +
				"I will\n" +
				"  (running …)\n"},
		{"interrupted", logOf(t, fUser2, fStart2, fCall2), false,
			"── 2025-01-02 10:00:00 · r2\n" +
				"> delete it\n" +
				"  tool rm notes.txt → running\n" +
				"  (interrupted: no daemon is running; it concludes this run as interrupted when it next starts)\n"},
		{"call without result", logOf(t, fTsh3, fCall3, `{"type":"cancelled","run":"r3"}`, `{"type":"done","run":"r3","id":"t3","status":"cancelled"}`), true,
			"── 2025-01-02 10:00:00 · r3\n" +
				"  tool tsh list → no-result\n" +
				"  cancelled\n" +
				"  (cancelled · 3s)\n"},
		{"warning candidate escape", logOf(t, fUser1, fStart1,
			`{"type":"candidate","run":"r1","model":"openai/gpt-4o","status":"failed","reason":"503"}`,
			`{"type":"warning","run":"r1","message":"history left out"}`,
			`{"type":"assistant","run":"r1","text":"\u001b[2Jgone\n"}`, fDone1), true,
			"── 2025-01-02 10:00:00 · r1\n" +
				"> what is in\n    notes.txt?\n" +
				"  model openai/gpt-4o failed: 503\n" +
				"  warning: history left out\n" +
				"\uFFFD[2Jgone\n" +
				"  (ok · 4s)\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			w := &TextWriter{W: &out, Loc: time.UTC}
			tr := &Transcript{Emit: w.Write}
			if _, err := Scan(bytes.NewReader(c.log), tr.Frame); err != nil {
				t.Fatal(err)
			}
			tr.End(c.up)
			if out.String() != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out.String(), c.want)
			}
		})
	}
}

func TestTranscriptEntries(t *testing.T) {
	var got []Entry
	tr := &Transcript{Emit: func(e Entry) { got = append(got, e) }}
	Scan(bytes.NewReader(logOf(t, fUser1, fStart1, fCall1, fRes1, fAns1, fDone1U, fUser2, fStart2, fCall2, fAsk2)), tr.Frame)
	tr.End(true)
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, e.Kind)
	}
	if k := strings.Join(kinds, ","); k != "run,user,tool,assistant,done,run,user,tool,open" {
		t.Fatalf("kinds %s", k)
	}
	tool := got[2]
	if tool.Status != "ok" || tool.Result != "hello world" || tool.Content != "\n hello world \nsecond line" || tool.CallID != "c1" {
		t.Fatalf("tool entry %+v", tool)
	}
	if d := got[4]; d.Usage["input"] != 100 || d.DurationMS != 4000 {
		t.Fatalf("done entry %+v", d)
	}
	if o := got[8]; o.Status != StateWaitingApproval || o.Run != "r2" || got[7].Status != CallWaiting {
		t.Fatalf("open entry %+v / %+v", o, got[7])
	}
}

// Reading a huge log holds one line at a time: a 64 MiB log is scanned
// with a heap that stays far below its size.
func TestScanBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	line := logOf(t, `{"type":"delta","run":"r1","text":"`+strings.Repeat("y", 8000)+`"}`)
	for i := 0; i < 8<<10; i++ {
		f.Write(line)
	}
	f.Close()
	n := 0
	var peak uint64
	st, err := ScanDir(dir, func(*Frame) {
		n++
		if n%1024 == 0 {
			// What is held, not garbage a loaded machine's GC has not
			// reached yet (46 MB of that once failed make test).
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	})
	if err != nil || n != 8<<10 || st.Skipped != 0 {
		t.Fatalf("n %d st %+v err %v", n, st, err)
	}
	if peak > 32<<20 {
		t.Fatalf("heap reached %d bytes reading a 64 MiB log", peak)
	}
}

func TestRemoveArchivesThenDeletes(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), UID: os.Getuid()}
	dir := l.SessionDir("a", "shared", "s1")
	if err := os.MkdirAll(filepath.Join(dir, "terminal"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "events.jsonl"), logOf(t, fUser1), 0o600)
	// A leftover of a crash between the rename and the delete.
	left := filepath.Join(TrashDir(l, "a", "shared"), "old.0123")
	os.MkdirAll(left, 0o700)
	if err := Remove(l, "a", "shared", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session still there: %v", err)
	}
	if ents, _ := os.ReadDir(TrashDir(l, "a", "shared")); len(ents) != 0 {
		t.Fatalf("trash not emptied: %v", ents)
	}
	if names, _ := Names(l, "a", "shared"); len(names) != 0 {
		t.Fatalf("names %v (the trash must not be listed)", names)
	}
	if err := Remove(l, "a", "shared", "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	if err := Remove(l, "a", "shared", "../x"); !errors.Is(err, layout.ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
}

// TestTranscriptKeepsCancelledText: what a run streamed before it was
// cancelled (or failed) is in the transcript, once, before the
// cancellation; an answered run's deltas are not repeated.
func TestTranscriptKeepsCancelledText(t *testing.T) {
	var got []Entry
	tr := &Transcript{Emit: func(e Entry) { got = append(got, e) }}
	log := `{"type":"user","session":"s","seq":1,"ts":"2025-01-02T15:04:05Z","run":"r1","id":"a","text":"go"}
{"type":"start","session":"s","seq":2,"ts":"2025-01-02T15:04:05Z","run":"r1","id":"a","op":"send"}
{"type":"delta","session":"s","seq":3,"ts":"2025-01-02T15:04:05Z","run":"r1","text":"half of "}
{"type":"delta","session":"s","seq":4,"ts":"2025-01-02T15:04:05Z","run":"r1","text":"an answer"}
{"type":"cancelled","session":"s","seq":5,"ts":"2025-01-02T15:04:06Z","run":"r1"}
{"type":"done","session":"s","seq":6,"ts":"2025-01-02T15:04:06Z","run":"r1","id":"a","status":"cancelled"}
{"type":"user","session":"s","seq":7,"ts":"2025-01-02T15:04:07Z","run":"r2","id":"b","text":"again"}
{"type":"delta","session":"s","seq":8,"ts":"2025-01-02T15:04:07Z","run":"r2","text":"whole"}
{"type":"assistant","session":"s","seq":9,"ts":"2025-01-02T15:04:07Z","run":"r2","text":"whole"}
{"type":"done","session":"s","seq":10,"ts":"2025-01-02T15:04:07Z","run":"r2","id":"b","status":"ok"}
`
	Scan(strings.NewReader(log), tr.Frame)
	tr.End(true)
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, e.Kind)
	}
	if k := strings.Join(kinds, ","); k != "run,user,partial,cancelled,done,run,user,assistant,done" {
		t.Fatalf("kinds %s", k)
	}
	if got[2].Text != "half of an answer" {
		t.Fatalf("partial %q", got[2].Text)
	}
	var b strings.Builder
	w := &TextWriter{W: &b, Markdown: func(s string) string { return "<md>" + s + "</md>" }}
	for _, e := range got {
		w.Write(e)
	}
	if !strings.Contains(b.String(), "<md>half of an answer</md>\n  cancelled") || !strings.Contains(b.String(), "<md>whole</md>") {
		t.Fatalf("text:\n%s", b.String())
	}
}

// TestTranscriptUserImages: a stored user frame's images reach the
// transcript as references and print as their lines (ctx agent history).
func TestTranscriptUserImages(t *testing.T) {
	sum := strings.Repeat("cd", 32)
	log := `{"type":"user","session":"s","seq":1,"ts":"2026-01-01T00:00:00Z","run":"r1","id":"m","text":"look","images":[{"sha256":"` + sum + `","media_type":"image/png","name":"shot.png","size":42}]}` + "\n"
	var got []Entry
	tr := &Transcript{Emit: func(e Entry) { got = append(got, e) }}
	Scan(strings.NewReader(log), tr.Frame)
	tr.End(true)
	if len(got) < 2 || got[1].Kind != KindUser || len(got[1].Images) != 1 || got[1].Images[0].SHA256 != sum {
		t.Fatalf("entries %+v", got)
	}
	var b strings.Builder
	w := &TextWriter{W: &b}
	for _, e := range got {
		w.Write(e)
	}
	if !strings.Contains(b.String(), "> look\n  [image shot.png, image/png, 42 bytes, sha256:cdcdcdcdcdcd…]\n") {
		t.Fatalf("text:\n%s", b.String())
	}
}

// TestTextWriterFull: history --full prints a call's whole stored result
// below its line, control characters cleaned; without it, the first line.
func TestTextWriterFull(t *testing.T) {
	e := Entry{Kind: KindTool, Name: "bash", Args: []string{"go test"}, Status: "error", Result: "--- FAIL: TestX", Content: "--- FAIL: TestX\n    x_test.go:9: got 1\x1b[31m\nFAIL\n"}
	for _, full := range []bool{false, true} {
		var b strings.Builder
		w := &TextWriter{W: &b, Full: full}
		w.Write(e)
		has := strings.Contains(b.String(), "    │ --- FAIL: TestX\n    │     x_test.go:9: got 1\uFFFD[31m\n    │ FAIL\n")
		if has != full || strings.Contains(b.String(), "\x1b") {
			t.Errorf("full=%v:\n%s", full, b.String())
		}
	}
}
