package session

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// maxBatch is the most frames one fsync commits (group commit).
const maxBatch = 64

// frameQueue hands frames from the session actor to its writer. push never
// blocks: a slow disk makes the queue longer, not the actor stall (STYLE:
// nothing that can stall runs inside Receive). It holds
// no more than the actor's own mailbox would: every frame in it came in as
// a message.
type frameQueue struct {
	mu     sync.Mutex
	items  []ipc.Frame
	closed bool
	wake   chan struct{} // one pending wake-up for the writer
}

func newFrameQueue() *frameQueue {
	return &frameQueue{wake: make(chan struct{}, 1)}
}

// push queues f for the writer. After close it is dropped.
func (q *frameQueue) push(f ipc.Frame) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, f)
	}
	q.mu.Unlock()
	q.signal()
}

// close lets the writer end once it has written what the queue holds.
func (q *frameQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *frameQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next waits for frames and returns up to maxBatch of them, in order;
// ok is false once the queue is closed and empty.
func (q *frameQueue) next() (batch []ipc.Frame, ok bool) {
	for {
		q.mu.Lock()
		if n := len(q.items); n > 0 {
			k := min(n, maxBatch)
			batch = append([]ipc.Frame(nil), q.items[:k]...)
			q.items = q.items[k:]
			if len(q.items) == 0 {
				q.items = nil // let a burst's backing array go
			}
			q.mu.Unlock()
			return batch, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.wake
	}
}

// writer is the session's one log writer. It owns the Log and stops when in
// is closed and drained, after closing the files. Whatever is queued when it
// wakes shares one fsync (group commit).
func writer(l *store.Log, in *frameQueue, flushed chan<- struct{}, root *actor.RootContext, self *actor.PID) {
	defer close(flushed)
	defer l.Close()
	for {
		batch, ok := in.next()
		if !ok {
			return
		}
		recs, err := l.AppendBatch(batch)
		if err != nil {
			root.Send(self, &appendFailed{err: err})
			continue
		}
		for _, rec := range recs {
			root.Send(self, &committed{rec: rec})
		}
	}
}
