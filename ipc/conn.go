package ipc

import (
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// QueueLen bounds the frames (or history batches) waiting to be written to
// one client. A client that falls further behind is dropped with a reason;
// the run it follows goes on and stays durable.
const QueueLen = 4096

// WriteTimeout bounds one write to a client.
const WriteTimeout = 10 * time.Second

type item struct {
	line   []byte
	batch  [][]byte
	log    *LogRange
	replay bool
}

// Conn is the server side of one client connection: a bounded outbound
// queue drained by its own writer goroutine, so no sender ever blocks.
type Conn struct {
	c    *net.UnixConn
	Cred unix.Ucred
	out  chan item

	mu       sync.Mutex
	closed   bool
	done     chan struct{}
	writerWG sync.WaitGroup

	approval *ApprovalWait
	dropped  bool
}

// Dropped reports whether the client was dropped for not keeping up.
func (k *Conn) Dropped() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dropped
}

// NewConn wraps an accepted connection whose peer credentials were checked.
func NewConn(c *net.UnixConn, cred unix.Ucred) *Conn {
	k := &Conn{c: c, Cred: cred, out: make(chan item, QueueLen), done: make(chan struct{})}
	k.writerWG.Add(1)
	go k.writer()
	return k
}

// Raw returns the underlying connection (for the reader goroutine).
func (k *Conn) Raw() *net.UnixConn { return k.c }

func (k *Conn) writer() {
	defer k.writerWG.Done()
	for {
		select {
		case it := <-k.out:
			if !k.write(it) {
				k.Close()
				return
			}
		case <-k.done:
			// Flush what is queued (bounded by QueueLen), then stop.
			for {
				select {
				case it := <-k.out:
					if !k.write(it) {
						return
					}
				default:
					return
				}
			}
		}
	}
}

func (k *Conn) write(it item) bool {
	_ = k.c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if it.line != nil {
		_, err := k.c.Write(it.line)
		return err == nil
	}
	if it.log != nil {
		return k.writeLog(it.log, it.replay) == nil
	}
	bufs := make(net.Buffers, 0, len(it.batch))
	for _, l := range it.batch {
		if it.replay {
			l = MarkReplay(l)
		}
		bufs = append(bufs, l)
	}
	_, err := bufs.WriteTo(k.c)
	return err == nil
}

// Send queues one line without blocking. A full queue drops the client: it
// is told why (best effort) and closed. It reports whether the line was queued.
func (k *Conn) Send(line []byte) bool { return k.enqueue(item{line: line}) }

// SendFrame queues a frame.
func (k *Conn) SendFrame(f *Frame) bool { return k.Send(f.Line()) }

// SendBatch queues stored lines as one unit (history), marked as replay if asked.
// lines must not be modified afterwards.
func (k *Conn) SendBatch(lines [][]byte, replay bool) bool {
	if len(lines) == 0 {
		return true
	}
	return k.enqueue(item{batch: lines, replay: replay})
}

func (k *Conn) enqueue(it item) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	select {
	case k.out <- it:
		return true
	default:
		k.closed = true
		k.dropped = true
		close(k.done)
		go func() {
			// The writer is stuck or behind: tell the client why, then close.
			_ = k.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			f := &Frame{Type: TypeError, Code: CodeSlowClient, Message: "client did not keep up with the frame stream; dropped (the run goes on and stays durable: use resume)"}
			_, _ = k.c.Write(f.Line())
			_ = k.c.Close()
		}()
		return false
	}
}

// Close stops the connection after flushing what is queued.
func (k *Conn) Close() {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	close(k.done)
	k.mu.Unlock()
	go func() {
		k.writerWG.Wait()
		_ = k.c.Close()
	}()
}

// Done is closed when Close is called or the client is dropped.
func (k *Conn) Done() <-chan struct{} { return k.done }

// Closed reports whether Close was called or the client was dropped.
func (k *Conn) Closed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

// ApprovalWait is a pending approval (A2): the next line on this connection
// is the answer to it, whatever it says.
type ApprovalWait struct {
	Run, ID string
	// Reason is set, before Answer, to a deny's reason.
	Reason string
	Answer func(decision string)
	// Forward, when set, takes the answer's line as it was read (nil at
	// the connection's end) instead of Answer: a cluster's front door
	// passes it on to the owner node, which judges it (A2 there).
	Forward func(line []byte)
}

// ExpectApproval makes the next line read on this connection the answer to w.
// It reports false if another approval is pending.
func (k *Conn) ExpectApproval(w *ApprovalWait) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.approval != nil || k.closed {
		return false
	}
	k.approval = w
	return true
}

// CancelApproval withdraws w (timeout) if it is still pending.
func (k *Conn) CancelApproval(w *ApprovalWait) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.approval == w {
		k.approval = nil
		return true
	}
	return false
}

// TakeApproval returns and clears the pending approval, if any.
func (k *Conn) TakeApproval() *ApprovalWait {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.approval
	k.approval = nil
	return w
}
