package ctlsock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/cortexfs/ctx/internal/launchroot"
)

// ErrDenied is wrapped by a Gate that refuses an update: the server
// answers EPERM and writes nothing.
var ErrDenied = errors.New("denied")

// Gate decides whether a verified, well-formed update may be written: the
// agent's policy and its approval mode reach the control socket as they
// reach a tool call (README "Self-iteration"). It runs after every check
// of the frame and before the write; an error refuses (fails closed). It
// may wait for a person's answer, bounded by ctx.
type Gate interface {
	Admit(ctx context.Context, id launchroot.Identity, req Request) error
}

// Ask is one update waiting for the approval of the person who started
// the run: the session emits an approval_request on the requester's
// connection, records the answer and calls Answer exactly once.
type Ask struct {
	Run     string // the run the update came from
	ID      string // the approval's id: ApprovalID(request id)
	Control string
	Content string
	// Answer receives the decision (allow_once, deny, timeout, eof, …).
	Answer func(decision string)
}

// Approvers maps a live run to the one that asks its person: the session
// actor registers its active run and releases it when the run is done.
// The zero value is ready; it is safe for concurrent use.
type Approvers struct {
	mu sync.Mutex
	m  map[approverKey]func(*Ask)
}

type approverKey struct{ agent, session, run string }

// Register makes ask the approver of (agent, session, run) until release
// is called (a nil registry registers nothing). ask must not block (it sends a message to an actor).
func (r *Approvers) Register(agent, session, run string, ask func(*Ask)) (release func()) {
	if r == nil {
		return func() {}
	}
	k := approverKey{agent, session, run}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[approverKey]func(*Ask){}
	}
	r.m[k] = ask
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.m, k)
		})
	}
}

// Decide asks the person behind the run of id about an update and waits
// for the decision. No registered run (a terminal, a run already done)
// (or a nil registry) means no one can be asked: "eof", failing closed
// (A3). ctx ending
// first gives "timeout".
func (r *Approvers) Decide(ctx context.Context, id launchroot.Identity, requestID, control, content string) string {
	if r == nil {
		return "eof"
	}
	r.mu.Lock()
	ask := r.m[approverKey{id.Agent, id.Session, id.Run}]
	r.mu.Unlock()
	if ask == nil {
		return "eof"
	}
	ch := make(chan string, 1)
	var once sync.Once
	ask(&Ask{Run: id.Run, ID: ApprovalID(requestID), Control: control, Content: content,
		Answer: func(d string) { once.Do(func() { ch <- d }) }})
	select {
	case d := <-ch:
		return d
	case <-ctx.Done():
		return "timeout"
	}
}

// ApprovalID is the id an update's approval_request carries: "update:"
// and the request id, which tells it apart from a tool call's id; a
// request id too long for a frame id (128 characters) is replaced by its
// hash.
func ApprovalID(requestID string) string {
	if id := "update:" + requestID; len(id) <= 128 {
		return id
	}
	h := sha256.Sum256([]byte(requestID))
	return "update:" + hex.EncodeToString(h[:16])
}
