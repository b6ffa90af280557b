package ctlsock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/launchroot"
)

type gateFunc func(ctx context.Context, id launchroot.Identity, req Request) error

func (f gateFunc) Admit(ctx context.Context, id launchroot.Identity, req Request) error {
	return f(ctx, id, req)
}

// TestGateDecidesBeforeTheWrite: the gate (policy and approval) sees only
// well-formed updates, with the capability's identity and the exact
// content; its refusal answers EPERM, writes nothing, and the request id
// stays consumed. README "Self-iteration".
func TestGateDecidesBeforeTheWrite(t *testing.T) {
	e := rawEnv(t)
	var mu sync.Mutex
	var seen []Request
	allow := false
	e.stop()
	e.gate = gateFunc(func(_ context.Context, id launchroot.Identity, req Request) error {
		mu.Lock()
		defer mu.Unlock()
		if id != self {
			t.Errorf("gate got identity %+v", id)
		}
		seen = append(seen, req)
		if allow {
			return nil
		}
		return fmt.Errorf("%w by approval: deny", ErrDenied)
	})
	e.start()
	base := `"op":"agent.update","agent":"coder","session":"default","run":"run-1","control":"system.md"`
	if resp := e.raw([]byte(`{` + base + `,"request_id":"g1","content":"new text"}` + "\n")); resp.Errno != EPERM || !strings.Contains(resp.Message, "denied by approval") {
		t.Errorf("refused by the gate: %+v", resp)
	}
	if _, ok := e.control("system.md"); ok {
		t.Error("system.md written although the gate refused")
	}
	if resp := e.raw([]byte(`{` + base + `,"request_id":"g2","content":"a\u0000"}` + "\n")); resp.Errno != EINVAL {
		t.Errorf("NUL: %+v", resp)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].RequestID != "g1" || seen[0].Content != "new text" || seen[0].Control != "system.md" {
		t.Errorf("the gate saw %+v, want only g1 with its content", seen)
	}
	allow = true
	mu.Unlock()
	if resp := e.raw([]byte(`{` + base + `,"request_id":"g1","content":"new text"}` + "\n")); resp.Errno != EALREADY {
		t.Errorf("a refused id sent again: %+v", resp)
	}
	if resp := e.raw([]byte(`{` + base + `,"request_id":"g3","content":"new text"}` + "\n")); !resp.OK {
		t.Errorf("admitted: %+v", resp)
	}
	if got, _ := e.control("system.md"); got != "new text" {
		t.Errorf("system.md %q", got)
	}
}

// TestApprovers: an update is asked of the registered run's session only;
// no one registered (a terminal, a run already done) is eof, a lost
// answer is timeout, and only the first answer counts. spec: A3
func TestApprovers(t *testing.T) {
	var nilReg *Approvers
	nilReg.Register("a", "s", "r", func(*Ask) {})()
	if d := nilReg.Decide(context.Background(), self, "x", "system.md", "c"); d != "eof" {
		t.Errorf("nil registry: %q", d)
	}
	r := &Approvers{}
	if d := r.Decide(context.Background(), self, "x", "system.md", "c"); d != "eof" {
		t.Errorf("nobody registered: %q", d)
	}
	var asked []*Ask
	release := r.Register(self.Agent, self.Session, self.Run, func(k *Ask) {
		asked = append(asked, k)
		go func() { k.Answer("deny"); k.Answer("allow_once") }()
	})
	if d := r.Decide(context.Background(), self, "r1", "system.md", "c"); d != "deny" {
		t.Errorf("answered deny then allow_once: %q", d)
	}
	if len(asked) != 1 || asked[0].ID != "update:r1" || asked[0].Run != self.Run || asked[0].Content != "c" {
		t.Errorf("asked %+v", asked)
	}
	other := self
	other.Run = "run-2"
	if d := r.Decide(context.Background(), other, "r2", "system.md", "c"); d != "eof" {
		t.Errorf("another run: %q", d)
	}
	release()
	release()
	if d := r.Decide(context.Background(), self, "r3", "system.md", "c"); d != "eof" {
		t.Errorf("after release: %q", d)
	}
	r.Register(self.Agent, self.Session, self.Run, func(*Ask) {}) // never answers
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if d := r.Decide(ctx, self, "r4", "system.md", "c"); d != "timeout" {
		t.Errorf("no answer: %q", d)
	}
	if id := ApprovalID(strings.Repeat("x", 128)); len(id) > 128 || !strings.HasPrefix(id, "update:") {
		t.Errorf("ApprovalID of a 128-character id: %q", id)
	}
}
