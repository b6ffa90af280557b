package session

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// idleTimer tells a session actor that nothing arrived for SessionIdle
// (passivation). It stands in for protoactor's receive
// timeout, whose timer goroutine writes the actor context's fields while
// the mailbox goroutine reads them (a data race `go test -race` found).
// Here the timer goroutine only sends a message; everything else happens
// on the actor's goroutine, and a message only stores a time: the timer is
// never reset per message.
type idleTimer struct {
	d       time.Duration
	last    time.Time // the last message that counts as activity (actor goroutine only)
	t       *time.Timer
	gen     int          // which arming an idleTick belongs to (actor goroutine only)
	stopped *atomic.Bool // this arming's: set when it is stopped, read by its timer
}

// idleTick is the timer's message to the actor.
type idleTick struct{ gen int }

// touch records activity.
func (t *idleTimer) touch() {
	if t.d > 0 {
		t.last = time.Now()
	}
}

// start arms the timer (anew: a restarted incarnation calls it again).
func (t *idleTimer) start(c actor.Context, d time.Duration) {
	t.stop()
	t.d = d
	if d <= 0 {
		return
	}
	t.gen++
	t.last = time.Now()
	root, self, gen, stopped := c.ActorSystem().Root, c.Self(), t.gen, new(atomic.Bool)
	t.stopped = stopped
	t.t = time.AfterFunc(d, func() {
		if !stopped.Load() { // a stopped actor's tick would be a dead letter
			root.Send(self, &idleTick{gen: gen})
		}
	})
}

// fired handles a tick: it reports whether the actor has been idle for d,
// and arms the timer for the next check either way.
func (t *idleTimer) fired(m *idleTick) bool {
	if t.t == nil || m.gen != t.gen {
		return false // from an arming since stopped
	}
	if wait := t.d - time.Since(t.last); wait > 0 {
		t.t.Reset(wait)
		return false
	}
	t.t.Reset(t.d)
	return true
}

// stop disarms the timer; a tick already on its way is ignored (gen).
func (t *idleTimer) stop() {
	if t.t == nil {
		return
	}
	t.stopped.Store(true)
	t.t.Stop()
	t.t, t.stopped = nil, nil
}
