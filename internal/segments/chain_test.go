package segments

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// frame is a frame line as the session writes it (only seq matters here).
func frame(seq int64) []byte {
	return fmt.Appendf(nil, `{"type":"delta","seq":%d,"text":"line %d"}`+"\n", seq, seq)
}

func frames(from, to int64) []byte {
	var b []byte
	for s := from; s <= to; s++ {
		b = append(b, frame(s)...)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func segPath(dir string, e int64) string { return filepath.Join(dir, Dir, Name(e)) }

func mustOpen(t *testing.T, dir string) *Chain {
	t.Helper()
	c, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustActivate(t *testing.T, dir string, epoch int64) *Writer {
	t.Helper()
	w, c, err := Activate(dir, epoch, "node-"+fmt.Sprint(epoch))
	if err != nil {
		t.Fatalf("Activate(%d): %v", epoch, err)
	}
	c.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

func write(t *testing.T, w *Writer, data []byte) {
	t.Helper()
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if _, err := w.Write(data[:i+1]); err != nil {
			t.Fatal(err)
		}
		data = data[i+1:]
	}
}

// all reads the whole chain through Reader and checks ReadAt and Size
// agree with it.
func all(t *testing.T, c *Chain) []byte {
	t.Helper()
	b, err := io.ReadAll(c.Reader())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != c.Size() {
		t.Fatalf("read %d bytes, Size %d", len(b), c.Size())
	}
	p := make([]byte, len(b))
	if n, err := c.ReadAt(p, 0); n != len(b) || (err != nil && err != io.EOF) || !bytes.Equal(p, b) {
		t.Fatalf("ReadAt(0, %d) = %d, %v", len(b), n, err)
	}
	return b
}

func wantChain(t *testing.T, dir string, want []byte, seq int64) *Chain {
	t.Helper()
	c := mustOpen(t, dir)
	if got := all(t, c); !bytes.Equal(got, want) {
		t.Fatalf("chain bytes:\n%s\nwant:\n%s", got, want)
	}
	if got, err := c.LastSeq(); err != nil || got != seq {
		t.Fatalf("LastSeq = %d, %v; want %d", got, err, seq)
	}
	return c
}

// TestPlainLog: without segments/, the chain is events.jsonl up to its
// last complete line; the torn tail is neither read nor cut.
func TestPlainLog(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir)
	if c.Size() != 0 || c.Epoch() != 0 || len(c.Segments()) != 0 {
		t.Fatalf("no log: size %d epoch %d segments %v", c.Size(), c.Epoch(), c.Segments())
	}
	if s, err := c.LastSeq(); s != 0 || err != nil {
		t.Fatalf("no log: LastSeq %d %v", s, err)
	}
	data := append(frames(1, 3), `{"type":"delta","seq":4,"te`...)
	writeFile(t, filepath.Join(dir, Legacy), data)
	wantChain(t, dir, frames(1, 3), 3)
	if got := readFile(t, filepath.Join(dir, Legacy)); !bytes.Equal(got, data) {
		t.Fatal("a reader changed events.jsonl")
	}
}

// TestActivateContinuesEventsJSONL: events.jsonl is segment 0: sealed at its
// last complete line (its torn tail stays, unread), continued with
// contiguous seq, and its offsets keep their meaning.
func TestActivateContinuesEventsJSONL(t *testing.T) {
	dir := t.TempDir()
	legacy := append(frames(1, 3), `{"type":"del`...)
	writeFile(t, filepath.Join(dir, Legacy), legacy)
	w, c, err := Activate(dir, 5, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer c.Close()
	sealed := int64(len(frames(1, 3)))
	rec := fmt.Sprintf(`{"epoch":5,"prev":0,"sealed":%d,"seq":3,"node":"n1"}`+"\n", sealed)
	if got := string(readFile(t, segPath(dir, 5))); got != rec {
		t.Fatalf("segment 5 holds %q, want %q", got, rec)
	}
	if w.Base() != sealed || c.Size() != sealed || w.Epoch() != 5 || c.Epoch() != 5 {
		t.Fatalf("base %d, chain size %d, epoch %d/%d; want %d and 5", w.Base(), c.Size(), w.Epoch(), c.Epoch(), sealed)
	}
	if s, err := c.LastSeq(); s != 3 || err != nil {
		t.Fatalf("LastSeq after activate %d %v", s, err)
	}
	for path, mode := range map[string]os.FileMode{segPath(dir, 5): 0o600, filepath.Join(dir, Dir): 0o700 | os.ModeDir} {
		if st, err := os.Stat(path); err != nil || st.Mode() != mode {
			t.Fatalf("%s: mode %v, want %v (%v)", path, st.Mode(), mode, err)
		}
	}
	write(t, w, frames(4, 6))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	c2 := wantChain(t, dir, frames(1, 6), 6)
	segs := c2.Segments()
	if len(segs) != 2 || segs[0].Epoch != 0 || segs[0].End != sealed || segs[1].Off != sealed || segs[1].Start != int64(len(rec)) {
		t.Fatalf("segments %+v", segs)
	}
	if got := readFile(t, filepath.Join(dir, Legacy)); !bytes.Equal(got, legacy) {
		t.Fatal("events.jsonl was changed (its torn tail must stay)")
	}
}

// TestStaleOwnerIsNeverRead: an owner that keeps writing after a newer
// epoch sealed its segment writes bytes no reader ever sees.
func TestStaleOwnerIsNeverRead(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, Legacy), frames(1, 2))
	w5 := mustActivate(t, dir, 5)
	write(t, w5, frames(3, 4))
	w9 := mustActivate(t, dir, 9)
	late := []byte(`{"type":"delta","seq":5,"text":"STALE"}` + "\n")
	write(t, w5, late)
	write(t, w5, late)
	c := wantChain(t, dir, frames(1, 4), 4)
	write(t, w9, frames(5, 6))
	c2 := wantChain(t, dir, frames(1, 6), 6)
	for _, ch := range []*Chain{c, c2} {
		b := all(t, ch)
		if bytes.Contains(b, []byte("STALE")) {
			t.Fatal("the chain holds the stale owner's lines")
		}
		// Every offset, every length up to 64: never a stale byte.
		for off := int64(0); off < ch.Size(); off++ {
			p := make([]byte, 64)
			n, _ := ch.ReadAt(p, off)
			if !bytes.Equal(p[:n], b[off:min(int64(len(b)), off+64)]) {
				t.Fatalf("ReadAt(%d) differs from the chain", off)
			}
		}
	}
	if !bytes.HasSuffix(readFile(t, segPath(dir, 5)), append(late, late...)) {
		t.Fatal("the stale lines are not in segment 5 (the test did not test)")
	}
}

// TestLateStaleSegmentIsNeverRead: a segment made after a newer one, with
// an epoch between two chained ones, is named by no successor.
func TestLateStaleSegmentIsNeverRead(t *testing.T) {
	dir := t.TempDir()
	w5 := mustActivate(t, dir, 5)
	write(t, w5, frames(1, 2))
	w9 := mustActivate(t, dir, 9)
	write(t, w9, frames(3, 3))
	// The owner of epoch 7 lost its race long ago and only now creates its
	// segment, with a record that looks right.
	if _, _, err := Activate(dir, 7, "n7"); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("Activate(7) after 9: %v, want ErrSuperseded", err)
	}
	size5 := int64(len(readFile(t, segPath(dir, 5))))
	stale := Record{Epoch: 7, Prev: 5, Sealed: size5, Seq: 2, Node: "n7"}.Line()
	writeFile(t, segPath(dir, 7), append(stale, `{"type":"delta","seq":3,"text":"STALE"}`+"\n"...))
	c := wantChain(t, dir, frames(1, 3), 3)
	var epochs []int64
	for _, s := range c.Segments() {
		epochs = append(epochs, s.Epoch)
	}
	if fmt.Sprint(epochs) != "[5 9]" {
		t.Fatalf("chain epochs %v, want [5 9]", epochs)
	}
	w10 := mustActivate(t, dir, 10)
	if !strings.Contains(string(readFile(t, w10.Path())), `"prev":9,`) {
		t.Fatal("epoch 10 did not continue 9")
	}
	wantChain(t, dir, frames(1, 3), 3)
}

// TestTornTailOfNewest: the newest segment's partial last line is not read,
// not truncated, and the next owner seals before it.
func TestTornTailOfNewest(t *testing.T) {
	dir := t.TempDir()
	w := mustActivate(t, dir, 3)
	write(t, w, frames(1, 2))
	torn := []byte(`{"type":"delta","seq":3,"te`)
	if _, err := w.File().Write(torn); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, segPath(dir, 3))
	wantChain(t, dir, frames(1, 2), 2)
	w4 := mustActivate(t, dir, 4)
	if got := readFile(t, segPath(dir, 3)); !bytes.Equal(got, before) {
		t.Fatal("the torn tail was changed")
	}
	rec := readFile(t, w4.Path())
	want := Record{Epoch: 4, Prev: 3, Sealed: int64(len(before) - len(torn)), Seq: 2, Node: "node-4"}.Line()
	if !bytes.Equal(rec, want) {
		t.Fatalf("record %q, want %q", rec, want)
	}
	write(t, w4, frames(3, 3))
	wantChain(t, dir, frames(1, 3), 3)
}

// TestReadAtAcrossSegments: every (offset, length) over a five-segment
// chain, including empty segments, reads the concatenation byte for byte,
// with io.EOF exactly when it runs past the end.
func TestReadAtAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, Legacy), frames(1, 3))
	seq := int64(3)
	for _, e := range []int64{2, 4, 7, 8} {
		w := mustActivate(t, dir, e)
		if e != 4 { // segment 4 stays empty
			write(t, w, frames(seq+1, seq+int64(e)))
			seq += int64(e)
		}
	}
	want := frames(1, seq)
	c := wantChain(t, dir, want, seq)
	if n := len(c.Segments()); n != 5 {
		t.Fatalf("%d segments, want 5", n)
	}
	size := c.Size()
	for off := int64(0); off <= size+2; off++ {
		for n := 0; n <= 300; n += 7 {
			p := make([]byte, n)
			got, err := c.ReadAt(p, off)
			lo, hi := min(off, size), min(off+int64(n), size)
			if !bytes.Equal(p[:got], want[lo:hi]) {
				t.Fatalf("ReadAt(%d, %d): %q, want %q", off, n, p[:got], want[lo:hi])
			}
			if short := n > 0 && off+int64(n) > size; short != (err == io.EOF) || (!short && err != nil) {
				t.Fatalf("ReadAt(%d, %d) of %d: err %v", off, n, size, err)
			}
		}
	}
	if _, err := c.ReadAt(make([]byte, 1), -1); err == nil {
		t.Fatal("a negative offset was read")
	}
}

// TestSuperseded: an epoch that is not newer than every segment is refused
// and writes nothing.
func TestSuperseded(t *testing.T) {
	dir := t.TempDir()
	mustActivate(t, dir, 9)
	for _, e := range []int64{9, 5} {
		if _, _, err := Activate(dir, e, "late"); !errors.Is(err, ErrSuperseded) {
			t.Fatalf("Activate(%d) after 9: %v", e, err)
		}
	}
	if _, err := os.Stat(segPath(dir, 5)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a superseded Activate created its segment")
	}
	for _, tc := range []struct {
		epoch int64
		node  string
	}{{0, "n"}, {-1, "n"}, {10, ""}} {
		if _, _, err := Activate(dir, tc.epoch, tc.node); err == nil {
			t.Fatalf("Activate(%d, %q) accepted", tc.epoch, tc.node)
		}
	}
}

// TestIncompleteRecord: a newest segment whose epoch record is not complete
// (an activation that crashed before its fsync) is no part of the chain,
// and the next owner continues the one before it.
func TestIncompleteRecord(t *testing.T) {
	for _, content := range []string{"", `{"epoch":6,"prev":5,"se`} {
		dir := t.TempDir()
		w := mustActivate(t, dir, 5)
		write(t, w, frames(1, 2))
		writeFile(t, segPath(dir, 6), []byte(content))
		c := wantChain(t, dir, frames(1, 2), 2)
		if c.Epoch() != 5 {
			t.Fatalf("%q: head epoch %d, want 5", content, c.Epoch())
		}
		w7 := mustActivate(t, dir, 7)
		if !strings.Contains(string(readFile(t, w7.Path())), `"prev":5,`) {
			t.Fatalf("%q: epoch 7 did not continue 5", content)
		}
	}
}

// TestFreshClusterSession: no events.jsonl: the first segment seals an
// empty segment 0.
func TestFreshClusterSession(t *testing.T) {
	dir := t.TempDir()
	w := mustActivate(t, dir, 3)
	if got, want := string(readFile(t, w.Path())), `{"epoch":3,"prev":0,"sealed":0,"seq":0,"node":"node-3"}`+"\n"; got != want {
		t.Fatalf("record %q, want %q", got, want)
	}
	write(t, w, frames(1, 2))
	c := wantChain(t, dir, frames(1, 2), 2)
	if len(c.Segments()) != 1 {
		t.Fatalf("segments %+v", c.Segments())
	}
}

// TestWriterWholeLines: the writer refuses anything but one whole line.
func TestWriterWholeLines(t *testing.T) {
	w := mustActivate(t, t.TempDir(), 1)
	for _, b := range []string{"", "no newline", "two\nlines\n", "\n\n"} {
		if _, err := w.Write([]byte(b)); err == nil {
			t.Fatalf("Write(%q) accepted", b)
		}
	}
}

// TestBadChain: each broken link is an error wrapping ErrBadChain that
// names the file at fault.
func TestBadChain(t *testing.T) {
	base := frames(1, 2)
	rec := func(r Record) []byte { return r.Line() }
	r5 := rec(Record{Epoch: 5, Prev: 0, Sealed: int64(len(base)), Seq: 2, Node: "a"})
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		file  string // the file the error names
	}{
		{"prev missing", map[string][]byte{
			Name(9): rec(Record{Epoch: 9, Prev: 5, Sealed: 10, Seq: 2, Node: "b"}),
		}, Name(9)},
		{"sealed past the end", map[string][]byte{
			Legacy:  base,
			Name(5): rec(Record{Epoch: 5, Sealed: int64(len(base)) + 1, Seq: 2, Node: "a"}),
		}, Name(5)},
		{"sealed inside a line", map[string][]byte{
			Legacy:  base,
			Name(5): rec(Record{Epoch: 5, Sealed: int64(len(base)) - 3, Seq: 2, Node: "a"}),
		}, Name(5)},
		{"sealed inside the epoch record", map[string][]byte{
			Legacy:  base,
			Name(5): r5,
			Name(9): rec(Record{Epoch: 9, Prev: 5, Sealed: 3, Seq: 2, Node: "b"}),
		}, Name(9)},
		{"seq goes back", map[string][]byte{
			Legacy:  base,
			Name(5): r5,
			Name(9): rec(Record{Epoch: 9, Prev: 5, Sealed: int64(len(r5)), Seq: 1, Node: "b"}),
		}, Name(9)},
		{"empty segment, other seq", map[string][]byte{
			Legacy:  base,
			Name(5): r5,
			Name(9): rec(Record{Epoch: 9, Prev: 5, Sealed: int64(len(r5)), Seq: 3, Node: "b"}),
		}, Name(9)},
		{"no events.jsonl but sealed", map[string][]byte{
			Name(5): r5,
		}, Name(5)},
		{"empty events.jsonl, seq", map[string][]byte{
			Legacy:  nil,
			Name(5): rec(Record{Epoch: 5, Sealed: 0, Seq: 4, Node: "a"}),
		}, Name(5)},
		{"epoch differs from the name", map[string][]byte{
			Legacy:  base,
			Name(6): r5,
		}, Name(6)},
		{"garbage record at the head", map[string][]byte{
			Legacy:  base,
			Name(5): []byte("{\"epoch\":5}\n"),
		}, Name(5)},
		{"record too long", map[string][]byte{
			Name(5): bytes.Repeat([]byte("x"), maxRecord),
		}, Name(5)},
		{"named segment incomplete", map[string][]byte{
			Name(5): []byte(`{"epoch":5,`),
			Name(9): rec(Record{Epoch: 9, Prev: 5, Sealed: 0, Seq: 0, Node: "b"}),
		}, Name(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				p := filepath.Join(dir, Dir, name)
				if name == Legacy {
					p = filepath.Join(dir, name)
				}
				writeFile(t, p, data)
			}
			c, err := Open(dir)
			if err == nil {
				c.Close()
				t.Fatal("Open accepted a bad chain")
			}
			if !errors.Is(err, ErrBadChain) || !strings.Contains(err.Error(), tc.file) {
				t.Fatalf("error %q: want ErrBadChain naming %s", err, tc.file)
			}
			if _, _, err := Activate(dir, 100, "x"); !errors.Is(err, ErrBadChain) {
				t.Fatalf("Activate on a bad chain: %v", err)
			}
			if _, err := os.Stat(segPath(dir, 100)); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("Activate on a bad chain created its segment")
			}
		})
	}
}

// TestSymlinkSegmentRefused: a segment that is a symbolic link is not
// followed.
func TestSymlinkSegmentRefused(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), "x")
	writeFile(t, other, Record{Epoch: 5, Node: "a"}.Line())
	if err := os.MkdirAll(filepath.Join(dir, Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, segPath(dir, 5)); err != nil {
		t.Fatal(err)
	}
	if c, err := Open(dir); err == nil {
		c.Close()
		t.Fatal("a symlinked segment was read")
	}
}
