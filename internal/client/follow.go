package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cortexfs/ctx/ipc"
)

// Item is one frame a follower delivers, with its exact line, or the error
// that ended the following.
type Item struct {
	Frame *ipc.Frame
	Line  []byte
	Err   error
}

// MaxReattach bounds the reattaches in a row that bring no new frame.
const MaxReattach = 5

// ErrDropped is the daemon dropping a client that fell behind (slow_client).
var ErrDropped = errors.New("dropped by the daemon for not keeping up")

// Follower follows one request's frames — a send's run, a resume's history
// and live run — across drops: when the daemon drops the connection
// (slow_client) or it ends, the follower dials again (never starting a
// daemon: one that went away is reported, not replaced), sends the same
// request — its id replays what was recorded, then follows the live run,
// so nothing runs twice (P4) — asks again for a cancel it had asked, and
// skips by seq the frames it already delivered. Its one goroutine is
// stopped by Close. spec: P4 P2
type Follower struct {
	ctx    context.Context
	redial func(context.Context) (*Conn, error)
	req    Request
	items  chan Item
	done   chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	conn   *Conn
	cancel Request // asked before a drop: asked again after it
	closed bool
	onLost func(error)
}

// OnLost sets what to call when the connection is lost and the follower
// starts dialing again (a chat says so; it is called on the follower's
// goroutine, and must not block).
func (f *Follower) OnLost(fn func(error)) {
	f.mu.Lock()
	f.onLost = fn
	f.mu.Unlock()
}

// Follow sends req on conn and follows what it brings. redial opens a new
// connection after a drop (nil: a drop ends the following). The follower
// owns conn from here on.
func Follow(ctx context.Context, conn *Conn, req Request, redial func(context.Context) (*Conn, error)) (*Follower, error) {
	if err := conn.Send(req); err != nil {
		return nil, err
	}
	f := &Follower{ctx: ctx, redial: redial, req: req, conn: conn, items: make(chan Item, 64), done: make(chan struct{})}
	f.wg.Add(1)
	go f.loop()
	return f, nil
}

// Items is the frames, in order, each once; the last item of a following
// that failed carries Err.
func (f *Follower) Items() <-chan Item { return f.items }

// Cancel asks to cancel run (and again after any reattach).
func (f *Follower) Cancel(run string) error {
	f.mu.Lock()
	f.cancel = Cancel(f.req.Session, f.req.Scope, run)
	c := f.conn
	f.mu.Unlock()
	return c.Send(f.cancel)
}

// Approve answers an approval request on the current connection: the one
// that carries the run now is the one the daemon asked on.
func (f *Follower) Approve(run, id, decision string) error {
	f.mu.Lock()
	c := f.conn
	f.mu.Unlock()
	return c.Send(Approve(run, id, decision))
}

// Deny answers an approval request with a deny and the person's reason.
func (f *Follower) Deny(run, id, reason string) error {
	f.mu.Lock()
	c := f.conn
	f.mu.Unlock()
	return c.Send(Deny(run, id, reason))
}

// Close stops the follower and closes its connection.
func (f *Follower) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	close(f.done)
	c := f.conn
	f.mu.Unlock()
	c.Close() // unblocks a Next
	f.wg.Wait()
}

func (f *Follower) deliver(it Item) bool {
	select {
	case f.items <- it:
		return true
	case <-f.done:
		return false
	}
}

func (f *Follower) loop() {
	defer f.wg.Done()
	var lastSeq int64
	reattached := 0
	for {
		f.mu.Lock()
		c := f.conn
		f.mu.Unlock()
		fr, line, err := c.Next()
		bad := err != nil && line != nil // the daemon sent a line that is not a frame: not a drop
		if err == nil && fr.Type == ipc.TypeError && fr.Run == "" && fr.Code == ipc.CodeSlowClient {
			err = ErrDropped
		}
		if err != nil {
			select {
			case <-f.done:
				return
			default:
			}
			if bad || f.redial == nil || reattached >= MaxReattach {
				f.deliver(Item{Err: fmt.Errorf("connection to the daemon lost before the run finished: %w", err)})
				return
			}
			reattached++
			f.mu.Lock()
			lost := f.onLost
			f.mu.Unlock()
			if lost != nil {
				lost(err)
			}
			if rerr := f.reattach(); rerr != nil {
				f.deliver(Item{Err: fmt.Errorf("connection to the daemon lost before the run finished (%v), and it could not be followed again: %w", err, rerr)})
				return
			}
			continue
		}
		if fr.Seq != 0 {
			if fr.Seq <= lastSeq {
				continue // delivered before the reattach
			}
			lastSeq, reattached = fr.Seq, 0
		}
		if !f.deliver(Item{Frame: fr, Line: line}) {
			return
		}
	}
}

// ReattachFor is how long a follower dials again after a drop: a daemon
// restarting under its unit (RestartSec=1s, then its start) or by hand
// comes back within it.
const ReattachFor = 15 * time.Second

// reattach dials again until ReattachFor passed and sends the request,
// and a cancel asked before.
func (f *Follower) reattach() error {
	var c *Conn
	var err error
	deadline := time.Now().Add(ReattachFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		if c, err = f.redial(f.ctx); err == nil || time.Now().After(deadline) {
			break
		}
		select {
		case <-f.ctx.Done():
			return f.ctx.Err()
		case <-f.done:
			return errors.New("closed")
		case <-time.After(wait):
		}
	}
	if err != nil {
		return err
	}
	if err := c.Send(f.req); err != nil {
		c.Close()
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return errors.New("closed")
	}
	if f.cancel.Op != "" {
		_ = c.Send(f.cancel)
	}
	f.conn.Close()
	f.conn = c
	return nil
}
