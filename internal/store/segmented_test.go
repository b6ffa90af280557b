package store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/segments"
	"github.com/cortexfs/ctx/ipc"
)

func mustOpenSegmented(t *testing.T, dir string, epoch int64) (*Log, []Record) {
	t.Helper()
	l, recs, err := OpenSegmented(dir, epoch, "node-a")
	if err != nil {
		t.Fatalf("OpenSegmented(%d): %v", epoch, err)
	}
	return l, recs
}

// checkChain: the records are the chain, byte for byte and offset for
// offset, with contiguous seq from 1.
func checkChain(t *testing.T, dir string, recs []Record) {
	t.Helper()
	c, err := OpenChain(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want []byte
	for i := range recs {
		r := &recs[i]
		if r.Frame.Seq != int64(i+1) || r.Off != int64(len(want)) {
			t.Fatalf("record %d: seq %d off %d, want seq %d off %d", i, r.Frame.Seq, r.Off, i+1, len(want))
		}
		line := make([]byte, len(r.Line))
		if _, err := c.ReadAt(line, r.Off); err != nil || !bytes.Equal(line, r.Line) {
			t.Fatalf("record %d: the chain at %d holds %q (%v), not its line", i, r.Off, line, err)
		}
		want = append(want, r.Line...)
	}
	got, err := io.ReadAll(c.Reader())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("chain:\n%s\nwant:\n%s", got, want)
	}
}

// messagesOf is messages.jsonl as the records imply it.
func messagesOf(recs []Record) []byte {
	var b []byte
	for i := range recs {
		b = append(b, messageOf(&recs[i].Frame)...)
	}
	return b
}

// TestSegmentedTakeover: a session written by a single daemon (Open), then
// owned at epoch 5, then taken over at epoch 9 while the epoch-5 log still
// appends: the chain holds the first two owners' frames with contiguous
// seq and none of epoch 5's late lines; messages.jsonl neither.
func TestSegmentedTakeover(t *testing.T) {
	dir := t.TempDir()
	l0, _ := mustOpen(t, dir)
	first := appendAll(t, l0, runFrames("run-1", "msg-1"))
	if err := l0.Close(); err != nil {
		t.Fatal(err)
	}
	events := readFile(t, filepath.Join(dir, EventsFile))

	l5, recs5 := mustOpenSegmented(t, dir, 5)
	defer l5.Close()
	if len(recs5) != len(first) {
		t.Fatalf("epoch 5 read %d records, want %d", len(recs5), len(first))
	}
	for i := range first {
		if recs5[i].Off != first[i].Off || !bytes.Equal(recs5[i].Line, first[i].Line) {
			t.Fatalf("record %d changed its offset or line under OpenSegmented", i)
		}
	}
	second := appendAll(t, l5, runFrames("run-2", "msg-2"))
	if second[0].Frame.Seq != 8 || second[0].Off != int64(len(events)) {
		t.Fatalf("epoch 5's first frame: seq %d off %d, want 8 at %d", second[0].Frame.Seq, second[0].Off, len(events))
	}

	l9, recs9 := mustOpenSegmented(t, dir, 9)
	defer l9.Close()
	late := appendAll(t, l5, runFrames("run-late", "msg-late"))
	want := append(append([]Record{}, first...), second...)
	if len(recs9) != len(want) {
		t.Fatalf("epoch 9 read %d records, want %d", len(recs9), len(want))
	}
	for i := range want {
		if recs9[i].Off != want[i].Off || !bytes.Equal(recs9[i].Line, want[i].Line) {
			t.Fatalf("record %d: epoch 9 read %q at %d, want %q at %d", i, recs9[i].Line, recs9[i].Off, want[i].Line, want[i].Off)
		}
	}
	third := appendAll(t, l9, runFrames("run-3", "msg-3"))
	all := append(want, third...)
	checkChain(t, dir, all)
	c, err := OpenChain(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c.Reader())
	c.Close()
	if bytes.Contains(b, []byte("run-late")) {
		t.Fatal("the chain holds the stale owner's lines")
	}
	if late[0].Frame.Seq != 15 || !bytes.Contains(readFile(t, filepath.Join(dir, segments.Dir, segments.Name(5))), []byte("run-late")) {
		t.Fatal("the stale owner did not write (the test did not test)")
	}
	if err := l9.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, MessagesFile)); !bytes.Equal(got, messagesOf(all)) {
		t.Fatalf("messages.jsonl:\n%s\nwant:\n%s", got, messagesOf(all))
	}
	if got := readFile(t, filepath.Join(dir, EventsFile)); !bytes.Equal(got, events) {
		t.Fatal("events.jsonl was written in segmented mode")
	}
	_, recs10 := mustOpenSegmented(t, dir, 10)
	checkChain(t, dir, recs10)
	if len(recs10) != len(all) {
		t.Fatalf("epoch 10 read %d records, want %d", len(recs10), len(all))
	}
}

// TestSegmentedReplacesMessages: even when messages.jsonl already agrees,
// a new owner renames a fresh one over it, so a descriptor of the previous
// owner points at an inode no one reads.
func TestSegmentedReplacesMessages(t *testing.T) {
	dir := t.TempDir()
	l5, _ := mustOpenSegmented(t, dir, 5)
	appendAll(t, l5, runFrames("run-1", "msg-1"))
	if err := l5.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, MessagesFile)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	l6, recs := mustOpenSegmented(t, dir, 6)
	defer l6.Close()
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Fatal("messages.jsonl was kept, not replaced")
	}
	if got := readFile(t, path); !bytes.Equal(got, messagesOf(recs)) || len(got) == 0 {
		t.Fatalf("messages.jsonl %q", got)
	}
}

// TestSegmentedFsyncPolicy: the segmented log syncs exactly where Open's
// does (the same steps as TestFsyncAtCommitPoints).
func TestSegmentedFsyncPolicy(t *testing.T) {
	l, _ := mustOpenSegmented(t, t.TempDir(), 3)
	defer l.Close()
	n := countSyncs(t, nil)
	for i, st := range []struct {
		frames []string
		syncs  int
	}{
		{[]string{ipc.TypeUser}, 1},
		{[]string{ipc.TypeStart, ipc.TypeDelta, ipc.TypeDelta}, 0},
		{[]string{ipc.TypeDelta, ipc.TypeAssistant, ipc.TypeDone}, 1},
	} {
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

// TestSegmentedErrors: a newer owner is ErrSuperseded; a corrupt frame in
// a sealed segment is ErrCorrupt naming that file and its line (the epoch
// record is line 1).
func TestSegmentedErrors(t *testing.T) {
	dir := t.TempDir()
	l9, _ := mustOpenSegmented(t, dir, 9)
	appendAll(t, l9, runFrames("run-1", "msg-1")[:2])
	if _, err := l9.events.Write([]byte("not a frame\n")); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l9, runFrames("run-1", "msg-1")[2:3]) // the last line is a frame
	l9.Close()
	if _, _, err := OpenSegmented(dir, 5, "n"); !errors.Is(err, segments.ErrSuperseded) {
		t.Fatalf("OpenSegmented(5) after 9: %v", err)
	}
	_, _, err := OpenSegmented(dir, 12, "n")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), segments.Name(9)+":4:") {
		t.Fatalf("a corrupt line: %v, want ErrCorrupt at %s:4", err, segments.Name(9))
	}
	// A broken chain is corrupt too (session_corrupt on the wire).
	bad := filepath.Join(dir, segments.Dir, segments.Name(20))
	if err := os.WriteFile(bad, []byte(`{"epoch":20,"prev":19,"sealed":0,"seq":0,"node":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenSegmented(dir, 21, "n"); !errors.Is(err, ErrCorrupt) || !errors.Is(err, segments.ErrBadChain) {
		t.Fatalf("a broken chain: %v", err)
	}
}

// TestOpenChainPlain: for a single daemon's session OpenChain is its
// events.jsonl up to the last complete line, at the offsets Open gives.
func TestOpenChainPlain(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpen(t, dir)
	recs := appendAll(t, l, runFrames("run-1", "msg-1"))
	l.Close()
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"delta","se`)
	f.Close()
	checkChain(t, dir, recs)
	r, err := ChainSource(dir).OpenLog()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != recs[len(recs)-1].End() {
		t.Fatalf("Size %d, want %d", r.Size(), recs[len(recs)-1].End())
	}
	if _, err := ChainSource(filepath.Join(dir, "none")).OpenLog(); err != nil {
		t.Fatalf("a session with no log: %v", err)
	}
}

// TestSegmentedReopenWithinOwnership: the same ownership opening again (a
// restarted session actor) continues its own segment with contiguous seq
// and no new segment; the next owner's log names it as the previous owner.
func TestSegmentedReopenWithinOwnership(t *testing.T) {
	dir := t.TempDir()
	l, _ := mustOpenSegmented(t, dir, 5)
	if l.PrevOwner() != "" {
		t.Fatalf("first owner's PrevOwner %q", l.PrevOwner())
	}
	in := "hi"
	if _, err := l.AppendBatch([]ipc.Frame{{Type: ipc.TypeUser, Session: "s", Run: "r1", ID: "a", Input: in}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, recs := mustOpenSegmented(t, dir, 5)
	if len(recs) != 1 || l.Seq() != 1 || l.PrevOwner() != "" {
		t.Fatalf("reopened with %d records, seq %d", len(recs), l.Seq())
	}
	rec, err := l.Append(ipc.Frame{Type: ipc.TypeDone, Session: "s", Run: "r1", ID: "a", Status: ipc.StatusOK})
	if err != nil || rec.Frame.Seq != 2 {
		t.Fatalf("append after reopen: seq %d, %v", rec.Frame.Seq, err)
	}
	l.Close()
	if ents, _ := os.ReadDir(filepath.Join(dir, segments.Dir)); len(ents) != 1 {
		t.Fatalf("%d segments after a reopen, want 1", len(ents))
	}
	l2, recs, err := OpenSegmented(dir, 9, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	if l2.PrevOwner() != "node-a" {
		t.Fatalf("PrevOwner %q, want node-a", l2.PrevOwner())
	}
	checkChain(t, dir, recs)
	l2.Close()
	// node-b's own restart took over from no one.
	l3, _, err := OpenSegmented(dir, 9, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	if l3.PrevOwner() != "" {
		t.Fatalf("a reopen's PrevOwner %q, want none", l3.PrevOwner())
	}
}

// TestSegmentedFence: a cluster owner's log (Fence set) fsyncs every
// batch, deltas too, and checks the fence after the fsync: once it fails
// (the ownership deadline passed) the append returns no record — nothing
// to release — and every later append is refused.
func TestSegmentedFence(t *testing.T) {
	l, _ := mustOpenSegmented(t, t.TempDir(), 3)
	defer l.Close()
	n := countSyncs(t, nil)
	past := false
	l.Fence = func() error {
		if past {
			return errors.New("deadline passed")
		}
		return nil
	}
	if _, err := l.AppendBatch([]ipc.Frame{{Type: ipc.TypeStart, Run: "r"}, {Type: ipc.TypeDelta, Run: "r", Text: "x"}}); err != nil {
		t.Fatal(err)
	}
	if *n != 1 {
		t.Fatalf("a batch of deltas on a fenced log: %d fsyncs, want 1", *n)
	}
	past = true
	recs, err := l.AppendBatch([]ipc.Frame{{Type: ipc.TypeDelta, Run: "r", Text: "y"}})
	if err == nil || recs != nil || *n != 2 {
		t.Fatalf("past the fence: %v %v, %d fsyncs (want the fsync, then the refusal)", recs, err, *n)
	}
	past = false
	if _, err := l.AppendBatch([]ipc.Frame{{Type: ipc.TypeDelta, Run: "r", Text: "z"}}); err == nil {
		t.Fatal("an append after the fence failed was taken")
	}
}
