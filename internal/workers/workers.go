// Package workers runs the actors' mailboxes on goroutines kept between
// messages: an actor.Dispatcher for protoactor.
//
// protoactor's default dispatcher starts a new goroutine each time an idle
// mailbox gets a message. A warm MCP call passes a dozen messages between
// the connection's reader, the agent, the session, the run, the tool actor
// and back, each to an idle mailbox: a dozen goroutines born with the
// smallest stack, each growing it again through the actor code (the stack
// copies and the goroutines' exits were an eighth of the daemon's CPU on
// that path). A Pool hands a mailbox to the worker parked last (its stack
// has already grown and is likely still in the cache, as Go's own free
// goroutines are reused last-in first-out); when every worker is busy it
// starts another, so Schedule never waits. Workers parked longer than the
// pool's idle time are ended (a timer armed only while one is parked: an
// idle daemon is not woken), and Close ends them all.
package workers

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Throughput is how many messages a mailbox processes before it yields
// (protoactor's default dispatcher's).
const Throughput = 300

// Pool is a dispatcher whose goroutines outlive the mailbox runs they do.
// The zero value is not usable: New makes one.
type Pool struct {
	idle time.Duration

	mu     sync.Mutex
	parked []*worker // waiting for work, the last parked last
	closed bool
	// sweep ends the workers parked longer than idle; armed while any is
	// parked.
	sweep   *time.Timer
	armed   bool
	wg      sync.WaitGroup // the workers; Add under mu, against Close's Wait
	started atomic.Int64   // workers ever started (tests, the benchmark)
}

// worker is one goroutine of the pool; run takes its next mailbox run
// (buffered: it is handed over only while the worker is parked, so the
// send never waits), nil to end.
type worker struct {
	run    chan func()
	parked time.Time
}

var _ actor.Dispatcher = (*Pool)(nil)

// New returns a pool whose workers end after idle without work.
func New(idle time.Duration) *Pool {
	p := &Pool{idle: idle}
	p.sweep = time.AfterFunc(time.Hour, p.endIdle)
	p.sweep.Stop()
	return p
}

// Throughput implements actor.Dispatcher.
func (p *Pool) Throughput() int { return Throughput }

// Schedule runs fn on the worker parked last, or on a new one when none is
// parked; it never blocks. After Close, fn runs on a goroutine of its own
// (as with protoactor's default dispatcher): a message sent while the
// actor system stops is still processed.
func (p *Pool) Schedule(fn func()) {
	p.mu.Lock()
	if n := len(p.parked); n > 0 {
		w := p.parked[n-1]
		p.parked[n-1] = nil
		p.parked = p.parked[:n-1]
		p.mu.Unlock()
		w.run <- fn
		return
	}
	if p.closed {
		p.mu.Unlock()
		go fn()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	p.started.Add(1)
	go p.work(&worker{run: make(chan func(), 1)}, fn)
}

func (p *Pool) work(w *worker, fn func()) {
	defer p.wg.Done()
	for fn != nil {
		fn()
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		w.parked = time.Now()
		p.parked = append(p.parked, w)
		if !p.armed {
			p.armed = true
			p.sweep.Reset(p.idle)
		}
		p.mu.Unlock()
		fn = <-w.run
	}
}

// endIdle ends the workers parked longer than idle — the first parked,
// at the bottom of the stack — and arms the timer again for the oldest
// one left.
func (p *Pool) endIdle() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	n := 0
	for n < len(p.parked) && now.Sub(p.parked[n].parked) >= p.idle {
		n++
	}
	old := slices.Clone(p.parked[:n])
	p.parked = append(p.parked[:0], p.parked[n:]...)
	clear(p.parked[len(p.parked):cap(p.parked)])
	if len(p.parked) > 0 {
		p.sweep.Reset(p.parked[0].parked.Add(p.idle).Sub(now))
	} else {
		p.armed = false
	}
	p.mu.Unlock()
	for _, w := range old {
		w.run <- nil
	}
}

// Started is how many workers the pool has started.
func (p *Pool) Started() int64 { return p.started.Load() }

// Parked is how many workers wait for work now.
func (p *Pool) Parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}

// Close ends the parked workers and waits for the busy ones to finish
// their mailbox runs. Call it after the actor system has stopped.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.sweep.Stop()
	parked := p.parked
	p.parked = nil
	p.mu.Unlock()
	for _, w := range parked {
		w.run <- nil
	}
	p.wg.Wait()
}
