package run

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/ipc"
)

// The sdk-envelope engine's rules proven in the package, through the
// process seam (startFunc): the agents are real programs in a real bwrap
// sandbox; the seam only counts the starts and keeps the processes, so a
// test can say how many the run made and whether each one is gone.

// starts wraps proc.Start, keeping every process it started.
type starts struct {
	mu    sync.Mutex
	procs []*proc.Proc
	fail  error // when set, every start fails with it
}

func (s *starts) start(o proc.Options) (*proc.Proc, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	p, err := proc.Start(o)
	if err == nil {
		s.mu.Lock()
		s.procs = append(s.procs, p)
		s.mu.Unlock()
	}
	return p, err
}

func (s *starts) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

// agent installs script as the executable agent name.
func agent(t *testing.T, cfg *config.Config, name, script string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), name+".sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := agentdef.Create(cfg.Layout, name, agentdef.CreateOptions{Exec: exe}); err != nil {
		t.Fatal(err)
	}
}

var runN atomic.Int32

func sendSpec(name string) Spec {
	n := runN.Add(1)
	return Spec{Agent: name, RunID: "run-" + string(rune('a'+n)) + "-cccccc", ReqID: "r" + name, Op: ipc.OpSend,
		Session: "s", Scope: "private", Input: "go", History: "[]", Attempts: &atomic.Int32{}}
}

func (p *parent) count(typ string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, f := range p.frames {
		if f.Type == typ {
			n++
		}
	}
	return n
}

func (p *parent) last(typ string) ipc.Frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.frames) - 1; i >= 0; i-- {
		if p.frames[i].Type == typ {
			return p.frames[i]
		}
	}
	return ipc.Frame{}
}

// TestEnvelopeCallBound: an agent that asks for a tool call at every step
// gets 8 calls, each with its result, from 9 process starts; the 9th call
// concludes the run limit_exceeded and is never run. spec: X6 X7
func TestEnvelopeCallBound(t *testing.T) {
	cfg := setup(t)
	agent(t, cfg, "loop", `cat >/dev/null
printf '{"type":"tool_call","id":"c%s","name":"nosuch","args":[]}\n' "$CTX_STEP"
`)
	s := &starts{}
	p := runParent(t, &parent{spec: sendSpec("loop"), cfg: cfg, start: s.start})
	if n := p.count(ipc.TypeToolCall); n != MaxCalls {
		t.Errorf("%d tool_call frames, want %d", n, MaxCalls)
	}
	if n := p.count(ipc.TypeToolResult); n != MaxCalls {
		t.Errorf("%d tool_result frames, want %d", n, MaxCalls)
	}
	if n := s.count(); n != MaxStarts {
		t.Errorf("%d agent starts, want %d", n, MaxStarts)
	}
	if e := p.last(ipc.TypeError); e.Code != ipc.CodeLimitExceeded || !strings.Contains(e.Message, "8 tool calls") {
		t.Errorf("error %+v, want limit_exceeded at 8 tool calls", e)
	}
	if d := p.last(ipc.TypeDone); d.Status != ipc.StatusError {
		t.Errorf("done %+v", d)
	}
}

// TestEnvelopeInvalidOutput: output that breaks the envelope's rules
// concludes the run invalid_agent_output; no call of that step runs.
// spec: X9
func TestEnvelopeInvalidOutput(t *testing.T) {
	cfg := setup(t)
	cases := []struct {
		name, script, why string
		calls             int
	}{
		{"garbage", `cat >/dev/null; echo 'not json'`, "not one JSON object", 0},
		{"extrakey", `cat >/dev/null; echo '{"type":"delta","text":"a","x":1}'`, "documented keys", 0},
		{"aftercall", `cat >/dev/null
echo '{"type":"tool_call","id":"c1","name":"nosuch","args":[]}'
echo '{"type":"delta","text":"late"}'`, "output after the tool_call", 0},
		{"replayed", `cat >/dev/null
echo '{"type":"tool_call","id":"same","name":"nosuch","args":[]}'`, `"same" was already used`, 1},
		{"status", `cat >/dev/null; echo '{"type":"delta","text":"hi"}'; exit 3`, "status 3 without a tool_call", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			agent(t, cfg, tc.name, tc.script)
			p := runWith(t, cfg, sendSpec(tc.name))
			e := p.last(ipc.TypeError)
			if e.Code != ipc.CodeInvalidAgentOutput || !strings.Contains(e.Message, tc.why) {
				t.Errorf("error %+v, want invalid_agent_output saying %q", e, tc.why)
			}
			if n := p.count(ipc.TypeToolCall); n != tc.calls {
				t.Errorf("%d tool calls run, want %d", n, tc.calls)
			}
			if d := p.last(ipc.TypeDone); d.Status != ipc.StatusError {
				t.Errorf("done %+v", d)
			}
		})
	}
}

// TestCancelEscalates: a cancel concludes the run cancelled; the agent
// that ignores SIGTERM gets it first (its trap ran) and is SIGKILLed
// after the grace: when the run stops, no process of it is left.
// spec: X12
func TestCancelEscalates(t *testing.T) {
	cfg := setup(t)
	agent(t, cfg, "stubborn", `cat >/dev/null
trap 'echo term >> "$HOME/got-term"' TERM
echo '{"type":"delta","text":"ready"}'
while :; do sleep 0.05; done
`)
	s := &starts{}
	once := sync.Once{}
	p := runParent(t, &parent{spec: sendSpec("stubborn"), cfg: cfg, start: s.start,
		onFrame: func(c actor.Context, f *ipc.Frame) {
			if f.Type == ipc.TypeDelta {
				once.Do(func() { c.Send(c.Sender(), &Cancel{}) })
			}
		}})
	got := p.types()
	if len(got) < 3 || got[len(got)-2] != ipc.TypeCancelled || p.last(ipc.TypeDone).Status != ipc.StatusCancelled {
		t.Fatalf("frames %v, want … cancelled, done(cancelled)", got)
	}
	if s.count() != 1 {
		t.Fatalf("%d starts", s.count())
	}
	pr := s.procs[0]
	select {
	case <-pr.Done():
	default:
		t.Fatal("the agent is still running after the run stopped")
	}
	// Killed by SIGKILL: bwrap itself (-1), or its child first, which
	// bwrap then reports as 128+9 — the tree is killed in no fixed order.
	if c := pr.ExitCode(); c != -1 && c != 128+9 {
		t.Errorf("agent exit code %d, want -1 or 137 (killed by SIGKILL)", c)
	}
	b, err := os.ReadFile(filepath.Join(cfg.Layout.AgentHome("stubborn"), "got-term"))
	if err != nil || !strings.Contains(string(b), "term") {
		t.Errorf("the agent never saw SIGTERM before SIGKILL: %v %q", err, b)
	}
}

// TestStartFailureConcludes: a sandbox that cannot start concludes the run
// sandbox_unavailable with the reason; nothing is retried.
func TestStartFailureConcludes(t *testing.T) {
	cfg := setup(t)
	agent(t, cfg, "never", "exit 0\n")
	s := &starts{fail: errors.New("bwrap: no user namespaces")}
	p := runParent(t, &parent{spec: sendSpec("never"), cfg: cfg, start: s.start})
	if e := p.last(ipc.TypeError); e.Code != ipc.CodeSandboxUnavailable || !strings.Contains(e.Message, "no user namespaces") {
		t.Errorf("error %+v", e)
	}
	if got := p.types(); strings.Join(got, ",") != "start,error,done" {
		t.Errorf("frames %v", got)
	}
}
