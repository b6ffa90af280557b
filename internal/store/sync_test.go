package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

// countSyncs replaces fsync for one test with a counter (and an optional
// failure), restoring it afterwards.
func countSyncs(t *testing.T, fail error) *int {
	t.Helper()
	n := 0
	orig := syncFile
	syncFile = func(f *os.File) error {
		n++
		if fail != nil {
			return fail
		}
		return orig(f)
	}
	t.Cleanup(func() { syncFile = orig })
	return &n
}

// TestFsyncAtCommitPoints: one fsync per batch that holds a commit frame,
// none for a batch of deltas (group commit). The mutant without the fsync
// fails here.
func TestFsyncAtCommitPoints(t *testing.T) {
	l, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := countSyncs(t, nil)
	steps := []struct {
		frames []string
		syncs  int
	}{
		{[]string{ipc.TypeUser}, 1},
		{[]string{ipc.TypeStart, ipc.TypeDelta, ipc.TypeDelta}, 0},
		{[]string{ipc.TypeToolCall}, 0},
		{[]string{ipc.TypeToolResult}, 1},
		{[]string{ipc.TypeDelta, ipc.TypeAssistant, ipc.TypeDone}, 1},
		{[]string{ipc.TypeWarning}, 0},
		{[]string{ipc.TypeCancelled, ipc.TypeDone}, 1},
	}
	for i, st := range steps {
		before := *n
		var fs []ipc.Frame
		for _, typ := range st.frames {
			fs = append(fs, ipc.Frame{Type: typ, Run: "r", Text: "x"})
		}
		if _, err := l.AppendBatch(fs); err != nil {
			t.Fatal(err)
		}
		if got := *n - before; got != st.syncs {
			t.Errorf("step %d %v: %d fsyncs, want %d", i, st.frames, got, st.syncs)
		}
	}
}

// TestFsyncFailureRefusesTheLog: a failed fsync at a commit point is an
// error and every later append is refused (no seq reused).
func TestFsyncFailureRefusesTheLog(t *testing.T) {
	l, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	countSyncs(t, errors.New("injected EIO"))
	if _, err := l.Append(ipc.Frame{Type: ipc.TypeUser, Run: "r", Text: "x"}); err == nil {
		t.Fatal("a failed fsync committed the frame")
	}
	if _, err := l.Append(ipc.Frame{Type: ipc.TypeDelta, Run: "r", Text: "y"}); err == nil {
		t.Fatal("the log accepted an append after a failed fsync")
	}
}

// TestTornLineIsKeptDurably: the torn last line kept aside is fsynced (and
// its directory) before events.jsonl is cut.
func TestTornLineIsKeptDurably(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, EventsFile), []byte(`{"type":"user","seq":1,"run":"r","text":"a"}`+"\n"+`{"type":"del`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := countSyncs(t, nil)
	l, recs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(recs) != 1 || *n < 1 {
		t.Fatalf("%d records, %d fsyncs of the kept torn line", len(recs), *n)
	}
	// A failing fsync of the kept line fails the open: the torn bytes are
	// never cut before they are safe elsewhere.
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, EventsFile), []byte(`{"type":"del`), 0o600)
	countSyncs(t, errors.New("injected EIO"))
	if _, _, err := Open(dir2); err == nil {
		t.Fatal("Open cut a torn line it could not keep durably")
	}
	if b, _ := os.ReadFile(filepath.Join(dir2, EventsFile)); string(b) != `{"type":"del` {
		t.Fatalf("events.jsonl changed: %q", b)
	}
}

// TestMessagesWriteFailure: a messages.jsonl write that fails does not undo
// the commit, no later line is written after the gap, and the next Open
// rebuilds messages.jsonl from events.jsonl.
func TestMessagesWriteFailure(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ipc.Frame{Type: ipc.TypeUser, Run: "r", Text: "one"}); err != nil {
		t.Fatal(err)
	}
	// Inject the failure: messages.jsonl's descriptor becomes read-only.
	ro, err := os.Open(filepath.Join(dir, MessagesFile))
	if err != nil {
		t.Fatal(err)
	}
	l.messages.Close()
	l.messages = ro
	if _, err := l.Append(ipc.Frame{Type: ipc.TypeAssistant, Run: "r", Text: "two"}); err != nil {
		t.Fatalf("a messages.jsonl failure failed the commit: %v", err)
	}
	if l.messagesErr == nil {
		t.Fatal("the messages.jsonl write error was dropped")
	}
	l.Close()
	before, _ := os.ReadFile(filepath.Join(dir, MessagesFile))
	l2, recs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	after, _ := os.ReadFile(filepath.Join(dir, MessagesFile))
	if len(recs) != 2 || string(before) == string(after) {
		t.Fatalf("messages.jsonl not rebuilt: %d records\nbefore %q\nafter  %q", len(recs), before, after)
	}
	var want []byte
	for i := range recs {
		want = append(want, messageOf(&recs[i].Frame)...)
	}
	if string(after) != string(want) {
		t.Fatalf("rebuilt messages.jsonl %q, want %q", after, want)
	}
}
