package session

import (
	"strconv"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ipc"
)

// The actor's side of the log queue never blocks, however far the writer
// is behind; the writer gets every frame once, in order, in batches of at
// most maxBatch, and ends after close only when the queue is drained.
// (nothing that can stall runs inside Receive.)
func TestFrameQueueNeverBlocksAndKeepsOrder(t *testing.T) {
	q := newFrameQueue()
	const n = 10_000 // far more than the old channel's 256
	pushed := make(chan struct{})
	go func() {
		for i := range n {
			q.push(ipc.Frame{ID: strconv.Itoa(i)})
		}
		q.close()
		close(pushed)
	}()
	select {
	case <-pushed:
	case <-time.After(30 * time.Second):
		t.Fatal("push blocked with no writer reading")
	}
	q.push(ipc.Frame{ID: "after-close"}) // dropped, not blocking
	got := 0
	for {
		batch, ok := q.next()
		if !ok {
			break
		}
		if len(batch) == 0 || len(batch) > maxBatch {
			t.Fatalf("batch of %d frames", len(batch))
		}
		for _, f := range batch {
			if f.ID != strconv.Itoa(got) {
				t.Fatalf("frame %d is %q", got, f.ID)
			}
			got++
		}
	}
	if got != n {
		t.Fatalf("writer got %d frames, want %d", got, n)
	}
}

// A writer waiting on an empty queue wakes for a push and for close.
func TestFrameQueueWakesWriter(t *testing.T) {
	q := newFrameQueue()
	out := make(chan []ipc.Frame)
	go func() {
		for {
			b, ok := q.next()
			if !ok {
				close(out)
				return
			}
			out <- b
		}
	}()
	time.Sleep(10 * time.Millisecond) // let the writer wait
	q.push(ipc.Frame{ID: "a"})
	if b := <-out; len(b) != 1 || b[0].ID != "a" {
		t.Fatalf("got %+v", b)
	}
	q.close()
	if _, ok := <-out; ok {
		t.Fatal("writer did not end after close")
	}
}
