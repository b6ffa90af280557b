package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

// runFrames is one complete run as the session writes it.
func runFrames(run, id string) []ipc.Frame {
	return []ipc.Frame{
		{Type: ipc.TypeUser, Session: "s", Run: run, ID: id, Text: "hello"},
		{Type: ipc.TypeStart, Session: "s", Run: run, ID: id, Op: "send"},
		{Type: ipc.TypeDelta, Session: "s", Run: run, Text: "hi "},
		{Type: ipc.TypeToolCall, Session: "s", Run: run, CallID: "call-1", Name: "tsh", Args: []string{"load", "bash"}},
		{Type: ipc.TypeToolResult, Session: "s", Run: run, CallID: "call-1", Name: "tsh", Status: "ok", Content: "loaded"},
		{Type: ipc.TypeAssistant, Session: "s", Run: run, Text: "hi there"},
		{Type: ipc.TypeDone, Session: "s", Run: run, ID: id, Status: "ok"},
	}
}

func mustOpen(t *testing.T, dir string) (*Log, []Record) {
	t.Helper()
	l, recs, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, recs
}

func appendAll(t *testing.T, l *Log, fs []ipc.Frame) []Record {
	t.Helper()
	var out []Record
	for _, f := range fs {
		r, err := l.Append(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenNewDir: a session that never existed is created (0700) with an
// empty log, and seq starts at 1. spec: P5 (interfaces.md "Locations")
func TestOpenNewDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent", "a", "session", "default")
	l, recs := mustOpen(t, dir)
	defer l.Close()
	if len(recs) != 0 || l.Seq() != 0 {
		t.Fatalf("new log: %d records, seq %d", len(recs), l.Seq())
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("session dir: %v %v", err, st.Mode())
	}
	for _, f := range []string{EventsFile, MessagesFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() != 0 || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// TestAppend: seq is assigned (any given seq is ignored), ts is set unless
// given, exactly one line is written, and it is the record's line. The
// conversation messages follow. spec: P2 ("seq per session, strictly
// increasing, assigned when durable"), P5, X7
func TestAppend(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir)
	events := filepath.Join(dir, EventsFile)
	var size int
	for i, f := range runFrames("run-1", "msg-1") {
		f.Seq = 99 // ignored: the log assigns seq
		before := readFile(t, events)
		r, err := l.Append(f)
		if err != nil {
			t.Fatal(err)
		}
		after := readFile(t, events)
		if !bytes.Equal(after[:len(before)], before) || !bytes.Equal(after[len(before):], r.Line) {
			t.Fatalf("frame %d: the file did not grow by exactly the record's line", i)
		}
		if bytes.Count(r.Line, []byte("\n")) != 1 || r.Line[len(r.Line)-1] != '\n' {
			t.Fatalf("frame %d: not one line: %q", i, r.Line)
		}
		if r.Frame.Seq != int64(i+1) || l.Seq() != int64(i+1) || r.Frame.TS == "" {
			t.Fatalf("frame %d: seq %d (log %d) ts %q", i, r.Frame.Seq, l.Seq(), r.Frame.TS)
		}
		var back ipc.Frame
		if err := json.Unmarshal(r.Line, &back); err != nil || back.Seq != r.Frame.Seq || back.Type != f.Type {
			t.Fatalf("frame %d: line %s: %v", i, r.Line, err)
		}
		size = len(after)
	}
	r, err := l.Append(ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeBusy, Message: "x", TS: "2000-01-01T00:00:00.000Z"})
	if err != nil || r.Frame.TS != "2000-01-01T00:00:00.000Z" || r.Frame.Seq != 8 {
		t.Fatalf("a given ts must be kept: %+v %v", r.Frame, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(readFile(t, events)); got != size+len(r.Line) {
		t.Fatalf("events.jsonl is %d bytes, want %d", got, size+len(r.Line))
	}
	var roles []string
	for _, ln := range strings.Split(strings.TrimSuffix(string(readFile(t, filepath.Join(dir, MessagesFile))), "\n"), "\n") {
		var m Message
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatal(err)
		}
		roles = append(roles, m.Role)
	}
	// user, the normalized tool result, the assistant conclusion; the
	// run-less error (a transport-ish error) is no conversation message.
	if strings.Join(roles, " ") != "user tool assistant" {
		t.Fatalf("messages.jsonl roles: %v", roles)
	}
}

// TestOpenReturnsRecordsAndContinuesSeq: reopening returns every record
// byte for byte and the next append continues the sequence. spec: P4, L4
func TestOpenReturnsRecordsAndContinuesSeq(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir)
	written := appendAll(t, l, runFrames("run-1", "m1"))
	l.Close()
	l, recs := mustOpen(t, dir)
	defer l.Close()
	if len(recs) != len(written) {
		t.Fatalf("%d records, want %d", len(recs), len(written))
	}
	for i := range recs {
		if !bytes.Equal(recs[i].Line, written[i].Line) || recs[i].Frame.Seq != written[i].Frame.Seq || recs[i].Frame.Type != written[i].Frame.Type {
			t.Fatalf("record %d: %s vs %s", i, recs[i].Line, written[i].Line)
		}
	}
	if r, err := l.Append(ipc.Frame{Type: ipc.TypeUser, Run: "run-2", ID: "m2"}); err != nil || r.Frame.Seq != int64(len(written)+1) {
		t.Fatalf("next seq %d, %v", r.Frame.Seq, err)
	}
}

// TestOpenRepairsTornLastLine: a crash mid-write leaves a last line without
// newline; Open keeps it aside as events.jsonl.broken-1 (then -2), cuts it
// off, and the rest is intact and appendable with the right seq. spec: L4, X7
func TestOpenRepairsTornLastLine(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, EventsFile)
	l, _ := mustOpen(t, dir)
	appendAll(t, l, runFrames("run-1", "m1")[:3])
	l.Close()
	good := readFile(t, events)

	torn := []byte(`{"type":"delta","session":"s","seq":4,"ts":"2026`)
	if err := os.WriteFile(events, append(append([]byte{}, good...), torn...), 0o600); err != nil {
		t.Fatal(err)
	}
	l, recs := mustOpen(t, dir)
	if len(recs) != 3 || l.Seq() != 3 {
		t.Fatalf("after repair: %d records, seq %d", len(recs), l.Seq())
	}
	if !bytes.Equal(readFile(t, events), good) {
		t.Fatal("the log was not cut back to its last complete line")
	}
	if b := readFile(t, events+".broken-1"); !bytes.Equal(b, torn) {
		t.Fatalf("broken-1 holds %q", b)
	}
	r, err := l.Append(ipc.Frame{Type: ipc.TypeDelta, Run: "run-1", Text: "again"})
	if err != nil || r.Frame.Seq != 4 {
		t.Fatalf("append after repair: seq %d %v", r.Frame.Seq, err)
	}
	l.Close()

	// A second crash: the next torn line goes to broken-2, broken-1 stays.
	torn2 := []byte(`{"type":"done"`)
	f, err := os.OpenFile(events, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn2)
	f.Close()
	l, recs = mustOpen(t, dir)
	defer l.Close()
	if len(recs) != 4 || l.Seq() != 4 {
		t.Fatalf("after second repair: %d records, seq %d", len(recs), l.Seq())
	}
	if b := readFile(t, events+".broken-2"); !bytes.Equal(b, torn2) {
		t.Fatalf("broken-2 holds %q", b)
	}
	if b := readFile(t, events+".broken-1"); !bytes.Equal(b, torn) {
		t.Fatalf("broken-1 changed: %q", b)
	}
	if r, err := l.Append(ipc.Frame{Type: ipc.TypeDone, Run: "run-1", ID: "m1", Status: "ok"}); err != nil || r.Frame.Seq != 5 {
		t.Fatalf("append after second repair: seq %d %v", r.Frame.Seq, err)
	}
}

// TestOpenTornOnlyLine: a log whose only line is torn becomes empty.
func TestOpenTornOnlyLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, EventsFile), []byte(`{"type":"us`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, recs := mustOpen(t, dir)
	defer l.Close()
	if len(recs) != 0 || l.Seq() != 0 || len(readFile(t, filepath.Join(dir, EventsFile))) != 0 {
		t.Fatalf("%d records, seq %d", len(recs), l.Seq())
	}
	if r, err := l.Append(ipc.Frame{Type: ipc.TypeUser, Run: "r", ID: "m"}); err != nil || r.Frame.Seq != 1 {
		t.Fatalf("seq %d %v", r.Frame.Seq, err)
	}
}

// TestOpenCorrupt: a complete line that is not a frame, or a seq that does
// not increase, is a hard error naming events.jsonl:<line>; nothing is
// cut or rewritten. spec: P2 (seq strictly increasing), L4
func TestOpenCorrupt(t *testing.T) {
	line := func(seq int, typ string) string {
		return string((&ipc.Frame{Type: typ, Session: "s", Seq: int64(seq), TS: "t", Run: "r", Text: "x"}).Line())
	}
	cases := []struct {
		name, content string
		line          int
	}{
		{"garbage in the middle", line(1, "delta") + "garbage\n" + line(3, "delta"), 2},
		{"blank line in the middle", line(1, "delta") + "\n" + line(2, "delta"), 2},
		{"truncated object, complete line", line(1, "delta") + `{"type":"delta","seq":2` + "\n" + line(3, "delta"), 2},
		{"no type", line(1, "delta") + `{"seq":2}` + "\n", 2},
		{"repeated seq", line(1, "delta") + line(2, "delta") + line(2, "delta"), 3},
		{"decreasing seq", line(1, "delta") + line(5, "delta") + line(4, "delta"), 3},
		{"seq 0", line(0, "delta"), 1},
		{"missing seq", `{"type":"delta","run":"r","text":"x"}` + "\n", 1},
		{"corrupt last complete line", line(1, "delta") + "}\n", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			events := filepath.Join(dir, EventsFile)
			if err := os.WriteFile(events, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			l, recs, err := Open(dir)
			if !errors.Is(err, ErrCorrupt) || l != nil || recs != nil {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			want := EventsFile + ":" + strconv.Itoa(tc.line) + ":"
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %s", err, want)
			}
			if string(readFile(t, events)) != tc.content {
				t.Fatal("a corrupt log was modified")
			}
		})
	}
}

// TestMessagesRebuilt: messages.jsonl is derived from the committed
// frames: rebuilt when missing or different, left alone when equal.
// spec: P5 ("the context pack is a rebuildable view"), X7
func TestMessagesRebuilt(t *testing.T) {
	dir := t.TempDir()
	msgs := filepath.Join(dir, MessagesFile)
	l, _ := mustOpen(t, dir)
	appendAll(t, l, runFrames("run-1", "m1"))
	appendAll(t, l, []ipc.Frame{
		{Type: ipc.TypeUser, Run: "run-2", ID: "m2", Text: "again"},
		{Type: ipc.TypeError, Run: "run-2", Code: ipc.CodeInterrupted, Message: "gone"},
		{Type: ipc.TypeDone, Run: "run-2", ID: "m2", Status: "error"},
	})
	l.Close()
	want := readFile(t, msgs)
	if n := bytes.Count(want, []byte("\n")); n != 5 {
		t.Fatalf("messages: %d lines:\n%s", n, want)
	}

	inode := func() uint64 {
		st, err := os.Stat(msgs)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	ino := inode()
	l, _ = mustOpen(t, dir)
	l.Close()
	if inode() != ino {
		t.Fatal("an equal messages.jsonl was rewritten")
	}

	for name, damage := range map[string]func(){
		"missing":   func() { os.Remove(msgs) },
		"truncated": func() { os.WriteFile(msgs, want[:len(want)/2], 0o600) },
		"extra": func() {
			os.WriteFile(msgs, append(append([]byte{}, want...), `{"role":"user","text":"injected"}`+"\n"...), 0o600)
		},
		"edited": func() { os.WriteFile(msgs, bytes.Replace(want, []byte("hello"), []byte("HELLO"), 1), 0o600) },
		"empty":  func() { os.WriteFile(msgs, nil, 0o600) },
	} {
		damage()
		l, _ := mustOpen(t, dir)
		l.Close()
		if got := readFile(t, msgs); !bytes.Equal(got, want) {
			t.Errorf("%s: not rebuilt:\n%s", name, got)
		}
	}
}

// TestIsCommitPoint: the frames after which the log fsyncs — every frame
// that is a durable fact of the conversation or concludes a run.
// spec: P5, X7 (README fsync policy)
func TestIsCommitPoint(t *testing.T) {
	cases := map[string]bool{
		ipc.TypeUser: true, ipc.TypeToolResult: true, ipc.TypeApproval: true, ipc.TypeAssistant: true,
		ipc.TypeError: true, ipc.TypeCancelled: true, ipc.TypeDone: true,
		ipc.TypeStart: false, ipc.TypeDelta: false, ipc.TypeToolCall: false, ipc.TypeApprovalRequest: false,
		ipc.TypeCandidate: false, ipc.TypeWarning: false, ipc.TypePong: false, ipc.TypeCaughtUp: false, "": false,
	}
	for typ, want := range cases {
		if got := IsCommitPoint(typ); got != want {
			t.Errorf("IsCommitPoint(%q) = %v, want %v", typ, got, want)
		}
	}
}

// TestMessageOf: which frames are conversation messages, and what they carry. spec: P5, X7
func TestMessageOf(t *testing.T) {
	cases := []struct {
		f    ipc.Frame
		want *Message
	}{
		{ipc.Frame{Type: ipc.TypeUser, Run: "r", Seq: 1, TS: "t", Text: "hi"}, &Message{Role: "user", Run: "r", Seq: 1, TS: "t", Text: "hi"}},
		{ipc.Frame{Type: ipc.TypeToolResult, Run: "r", Seq: 2, TS: "t", CallID: "c", Name: "tsh", Status: "error", Content: "x", Truncated: true},
			&Message{Role: "tool", Run: "r", Seq: 2, TS: "t", CallID: "c", Name: "tsh", Status: "error", Content: "x", Truncated: true}},
		// A user message keeps its images' references (never bytes).
		{ipc.Frame{Type: ipc.TypeUser, Run: "r", Seq: 5, TS: "t", Text: "look", Images: []ipc.Image{{SHA256: "ab", MediaType: ipc.MediaPNG, Name: "a.png", Size: 3}}},
			&Message{Role: "user", Run: "r", Seq: 5, TS: "t", Text: "look", Images: []ipc.Image{{SHA256: "ab", MediaType: ipc.MediaPNG, Name: "a.png", Size: 3}}}},
		{ipc.Frame{Type: ipc.TypeAssistant, Run: "r", Seq: 3, TS: "t", Text: "bye"}, &Message{Role: "assistant", Run: "r", Seq: 3, TS: "t", Text: "bye"}},
		{ipc.Frame{Type: ipc.TypeError, Run: "r", Seq: 4, TS: "t", Code: "denied", Message: "no"}, &Message{Role: "error", Run: "r", Seq: 4, TS: "t", Code: "denied", Text: "no"}},
		{ipc.Frame{Type: ipc.TypeError, Code: "busy", Message: "no"}, nil},
		{ipc.Frame{Type: ipc.TypeDelta, Run: "r", Text: "x"}, nil},
		{ipc.Frame{Type: ipc.TypeDone, Run: "r"}, nil},
		{ipc.Frame{Type: ipc.TypeToolCall, Run: "r"}, nil},
	}
	for _, tc := range cases {
		got := MessageOf(&tc.f)
		if (got == nil) != (tc.want == nil) || got != nil && !reflect.DeepEqual(*got, *tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.f.Type, got, tc.want)
		}
	}
}

// Every record says where its line is in events.jsonl, after Open (with a
// torn line cut) and after appends, so committed lines can be served from
// the file instead of memory.
func TestRecordOffsets(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir)
	if _, err := l.AppendBatch(runFrames("run-1", "r1")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	path := filepath.Join(dir, EventsFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"type":"delta","se`) // torn
	f.Close()
	l, recs := mustOpen(t, dir)
	more, err := l.AppendBatch(runFrames("run-2", "r2"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := append(recs, more...)
	if len(all) != 14 {
		t.Fatalf("%d records", len(all))
	}
	var at int64
	for i := range all {
		r := &all[i]
		if r.Off != at || !bytes.Equal(data[r.Off:r.End()], r.Line) {
			t.Fatalf("record %d: off %d (want %d), file has %q, record %q", i, r.Off, at, data[r.Off:min(r.End(), int64(len(data)))], r.Line)
		}
		at = r.End()
	}
	if at != int64(len(data)) {
		t.Fatalf("records end at %d, file is %d bytes", at, len(data))
	}
}
