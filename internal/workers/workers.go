// Package workers runs the actors' mailboxes on goroutines kept between
// messages: an actor.Dispatcher for protoactor.
//
// protoactor's default dispatcher starts a new goroutine each time an idle
// mailbox gets a message. A warm MCP call passes a dozen messages between
// the connection's reader, the agent, the session, the run, the tool actor
// and back, each to an idle mailbox: a dozen goroutines born with the
// smallest stack, each growing it again through the actor code (the stack
// copies and the goroutines' exits were a ninth of the daemon's CPU on that
// path). A Pool hands a mailbox to a worker parked since its last one, whose
// stack has already grown; when every worker is busy it starts another, so
// Schedule never waits. A worker idle for the pool's idle time ends, and
// Close ends them all.
package workers

import (
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
	// work takes a mailbox run to a parked worker: unbuffered, so a send
	// succeeds only when one is waiting.
	work chan func()
	done chan struct{}

	mu      sync.Mutex // closed, and wg.Add against Close's Wait
	closed  bool
	wg      sync.WaitGroup
	started atomic.Int64 // workers ever started (tests, the benchmark)
}

var _ actor.Dispatcher = (*Pool)(nil)

// New returns a pool whose workers end after idle without work.
func New(idle time.Duration) *Pool {
	return &Pool{idle: idle, work: make(chan func()), done: make(chan struct{})}
}

// Throughput implements actor.Dispatcher.
func (p *Pool) Throughput() int { return Throughput }

// Schedule runs fn on a parked worker, or on a new one when none is
// waiting; it never blocks. After Close, fn runs on a goroutine of its own
// (as with protoactor's default dispatcher): a message sent while the
// actor system stops is still processed.
func (p *Pool) Schedule(fn func()) {
	select {
	case p.work <- fn:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go fn()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	p.started.Add(1)
	go p.worker(fn)
}

func (p *Pool) worker(fn func()) {
	defer p.wg.Done()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		fn()
		fn = nil // nothing of the last mailbox is kept while parked
		t.Reset(p.idle)
		select {
		case fn = <-p.work:
		case <-t.C:
			return
		case <-p.done:
			return
		}
	}
}

// Started is how many workers the pool has started.
func (p *Pool) Started() int64 { return p.started.Load() }

// Close ends the parked workers and waits for the busy ones to finish
// their mailbox runs. Call it after the actor system has stopped.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.done)
	p.wg.Wait()
}
