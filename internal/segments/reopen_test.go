package segments

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// TestPlantedEventsJSONLIsNeverOpened: in a session begun in cluster mode
// the agent's sandbox can create events.jsonl in the (writable) session
// directory; the chain never opens it — a FIFO there blocks no reader and
// a file there changes nothing — and a FIFO where a segment is expected
// is refused, not waited on.
func TestPlantedEventsJSONLIsNeverOpened(t *testing.T) {
	dir := t.TempDir()
	w := mustActivate(t, dir, 3)
	write(t, w, frames(1, 2))
	if err := syscall.Mkfifo(filepath.Join(dir, Legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := Open(dir)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Open with a planted FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open blocked on a planted FIFO")
	}
	wantChain(t, dir, frames(1, 2), 2).Close()
	if _, _, err := Activate(dir, 4, "n2"); err != nil {
		t.Fatalf("a takeover with a planted events.jsonl: %v", err)
	}
	fifo := segPath(dir, 9)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := Open(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO segment was read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open blocked on a FIFO segment")
	}
}
