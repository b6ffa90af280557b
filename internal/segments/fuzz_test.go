package segments

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzDir lays out a session directory from fuzz input: legacy is
// events.jsonl (absent when it starts with 0xff); segs is split at NUL
// bytes, each part's first byte picking an epoch 1..16 and the rest its
// file's content.
func fuzzDir(t *testing.T, legacy, segs []byte) string {
	dir := t.TempDir()
	if len(legacy) == 0 || legacy[0] != 0xff {
		writeFile(t, filepath.Join(dir, Legacy), legacy)
	}
	for _, part := range bytes.Split(segs, []byte{0}) {
		if len(part) == 0 {
			continue
		}
		writeFile(t, segPath(dir, int64(part[0]%16)+1), part[1:])
	}
	return dir
}

// seedSegs encodes segment files as fuzzDir reads them.
func seedSegs(files map[int64][]byte) []byte {
	var out []byte
	for _, e := range slices.Sorted(func(yield func(int64) bool) {
		for e := range files {
			if !yield(e) {
				return
			}
		}
	}) {
		out = append(out, byte(e-1))
		out = append(out, files[e]...)
		out = append(out, 0)
	}
	return out
}

// FuzzChain: random chains, torn tails and garbage epoch records give an
// error or a consistent chain — never a panic — and an owner activated on
// a consistent chain continues exactly its bytes.
func FuzzChain(f *testing.F) {
	base := frames(1, 3)
	r2 := Record{Epoch: 2, Sealed: int64(len(base)), Seq: 3, Node: "a"}.Line()
	seg2 := append(append([]byte{}, r2...), frames(4, 5)...)
	r5 := Record{Epoch: 5, Prev: 2, Sealed: int64(len(seg2)), Seq: 5, Node: "b"}.Line()
	f.Add(base, []byte{})
	f.Add(append(base, `{"type":"de`...), []byte{})
	f.Add([]byte{0xff}, seedSegs(map[int64][]byte{3: Record{Epoch: 3, Node: "a"}.Line()}))
	f.Add(base, seedSegs(map[int64][]byte{2: seg2}))
	f.Add(base, seedSegs(map[int64][]byte{2: append(seg2, `{"ty`...), 5: append(r5, frames(6, 6)...)}))
	f.Add(base, seedSegs(map[int64][]byte{2: seg2, 5: r5, 4: append(Record{Epoch: 4, Prev: 2, Sealed: int64(len(seg2)), Seq: 5, Node: "c"}.Line(), "stale\n"...)}))
	f.Add(base, seedSegs(map[int64][]byte{2: seg2, 5: []byte(`{"epoch":5,"prev":2,`)}))
	f.Add(base, seedSegs(map[int64][]byte{2: []byte("{\"epoch\":2}\n"), 5: r5}))
	f.Fuzz(func(t *testing.T, legacy, segs []byte) {
		dir := fuzzDir(t, legacy, segs)
		c, err := Open(dir)
		if err != nil {
			return
		}
		defer c.Close()
		got := checkConsistent(t, c)
		if _, err := c.LastSeq(); err != nil {
			return // a last line without seq: Activate must refuse too
		}
		w, c2, err := Activate(dir, 17, "fuzz")
		if err != nil {
			t.Fatalf("Activate on a consistent chain with a seq: %v", err)
		}
		defer w.Close()
		defer c2.Close()
		if w.Base() != c.Size() || !bytes.Equal(checkConsistent(t, c2), got) {
			t.Fatalf("activation changed the chain's bytes (base %d, size %d)", w.Base(), c.Size())
		}
		c3, err := Open(dir)
		if err != nil {
			t.Fatalf("the chain after Activate: %v", err)
		}
		defer c3.Close()
		if !bytes.Equal(checkConsistent(t, c3), got) || c3.Epoch() != 17 {
			t.Fatalf("reopened chain differs (epoch %d)", c3.Epoch())
		}
	})
}

// checkConsistent checks a chain against its files and returns its bytes.
func checkConsistent(t *testing.T, c *Chain) []byte {
	t.Helper()
	var want []byte
	var off int64
	for _, s := range c.Segments() {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if s.Start < 0 || s.Start > s.End || s.End > int64(len(data)) || s.Off != off {
			t.Fatalf("segment %+v of a %d-byte file at logical %d", s, len(data), off)
		}
		if s.End > 0 && data[s.End-1] != '\n' {
			t.Fatalf("segment %s ends inside a line at %d", s.Path, s.End)
		}
		want = append(want, data[s.Start:s.End]...)
		off += s.Len()
	}
	got, err := io.ReadAll(c.Reader())
	if err != nil || !bytes.Equal(got, want) || int64(len(got)) != c.Size() {
		t.Fatalf("chain reads %d bytes (%v), its files hold %d, Size %d", len(got), err, len(want), c.Size())
	}
	return got
}
