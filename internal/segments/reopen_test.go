package segments

import (
	"errors"
	"os"
	"testing"
)

// TestReopenOwnSegment: a writer restarted within one ownership continues
// its own segment — no new epoch record, its own torn tail cut, Base at
// the chain's end — and only its own: another epoch or node is ErrNotOwn,
// a newer segment ErrSuperseded.
func TestReopenOwnSegment(t *testing.T) {
	dir := t.TempDir()
	w := mustActivate(t, dir, 4)
	write(t, w, frames(1, 3))
	w.Close()
	// The crashed writer's last line was torn.
	f, err := os.OpenFile(segPath(dir, 4), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"del`)
	f.Close()
	if _, _, err := Reopen(dir, 4, "someone-else"); !errors.Is(err, ErrNotOwn) {
		t.Fatalf("another node's reopen: %v, want ErrNotOwn", err)
	}
	if _, _, err := Reopen(dir, 3, "node-4"); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("an older epoch's reopen: %v, want ErrSuperseded", err)
	}
	w2, c, err := Reopen(dir, 4, "node-4")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w2.Base() != c.Size() || c.Size() != int64(len(frames(1, 3))) {
		t.Fatalf("base %d, size %d; want %d", w2.Base(), c.Size(), len(frames(1, 3)))
	}
	c.Close()
	write(t, w2, frames(4, 5))
	wantChain(t, dir, frames(1, 5), 5).Close()
	if segs := mustOpen(t, dir).Segments(); len(segs) != 1 || segs[0].Epoch != 4 {
		t.Fatalf("segments %+v: a reopen made a new one", segs)
	}
	mustActivate(t, dir, 9)
	if _, _, err := Reopen(dir, 4, "node-4"); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("reopen after a newer owner: %v, want ErrSuperseded", err)
	}
	if _, _, err := Reopen(t.TempDir(), 1, "n"); !errors.Is(err, ErrNotOwn) {
		t.Fatalf("reopen of nothing: %v, want ErrNotOwn", err)
	}
}
