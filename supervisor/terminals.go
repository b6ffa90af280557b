package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// The terminal ops' wire types live in ipc (the ctx client links them
// without the actor runtime).
const (
	OpTerminalStart  = ipc.OpTerminalStart
	OpTerminalStop   = ipc.OpTerminalStop
	OpTerminalStatus = ipc.OpTerminalStatus
	CodeNotRunning   = ipc.CodeNotRunning
	CodeTerminalBusy = ipc.CodeTerminalBusy
	CodeStartFailed  = ipc.CodeStartFailed
)

// TerminalRequest is ipc.TerminalRequest.
type TerminalRequest = ipc.TerminalRequest

// TerminalReply is ipc.TerminalReply.
type TerminalReply = ipc.TerminalReply

// terminalOp is a parsed terminal request routed by the root actor to the
// terminal actor of (agent, session); the reply goes to the sender.
type terminalOp struct {
	agent, session string
	msg            any
}

// terminalReceipts lists launch receipts found at start: their terminal
// actors are spawned at once to adopt (or clean up) them.
type terminalReceipts struct{ keys [][2]string }

type termKey struct{ agent, session string }

// terminalPID returns (spawning if needed) the actor of one terminal resource.
func (r *rootActor) terminalPID(c actor.Context, agent, session string) (*actor.PID, error) {
	k := termKey{agent, session}
	if pid, ok := r.terms[k]; ok {
		return pid, nil
	}
	pid, err := c.SpawnNamed(terminal.Props(r.cfg, r.launcher, agent, session), "terminal/"+agent+"/"+session)
	if err != nil {
		return nil, err
	}
	r.terms[k] = pid
	return pid, nil
}

// startTerminals reads the launch receipts in a goroutine of the actor's
// (loops) that sends them back, unless the actor stopped meanwhile.
func (r *rootActor) startTerminals(ctx context.Context, c actor.Context) {
	r.terms = map[termKey]*actor.PID{}
	self, root, l := c.Self(), c.ActorSystem().Root, r.cfg.Layout
	r.loops.Add(1)
	go func() {
		defer r.loops.Done()
		if keys := terminal.LaunchReceipts(l); ctx.Err() == nil {
			root.Send(self, &terminalReceipts{keys: keys})
		}
	}()
}

func (r *rootActor) onTerminalReceipts(c actor.Context, m *terminalReceipts) {
	for _, k := range m.keys {
		if _, err := r.terminalPID(c, k[0], k[1]); err != nil {
			r.log.Error("spawn terminal", "agent", k[0], "session", k[1], "err", err)
		}
	}
}

func (r *rootActor) onTerminalOp(c actor.Context, m *terminalOp) {
	pid, err := r.terminalPID(c, m.agent, m.session)
	if err != nil {
		c.Respond(&terminal.StartResponse{Err: err})
		return
	}
	c.RequestWithCustomSender(pid, m.msg, c.Sender())
}

func (r *rootActor) onTerminalGone(who *actor.PID) {
	for k, pid := range r.terms {
		if pid.Equal(who) {
			delete(r.terms, k)
		}
	}
}

// terminalTimeout bounds a terminal op: a start waits for bwrap and the
// manager; a stop for the hang-up and, at worst, the SIGKILL.
const terminalTimeout = 30 * time.Second

// parseTerminalRequest recognises a terminal op line; ok is false for
// every other op (left to ipc.ParseRequest).
func parseTerminalRequest(line []byte) (req *TerminalRequest, ok bool, err error) {
	var probe struct {
		Op string `json:"op"`
	}
	if json.Unmarshal(line, &probe) != nil {
		return nil, false, nil
	}
	switch probe.Op {
	case OpTerminalStart, OpTerminalStop, OpTerminalStatus:
	default:
		return nil, false, nil
	}
	req = &TerminalRequest{}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return nil, true, fmt.Errorf("%s: %v: %w", probe.Op, err, ipc.ErrBadRequest)
	}
	if req.Session == "" {
		req.Session = "default"
	}
	if err := layout.CheckName("agent", req.Agent); err != nil {
		return nil, true, err
	}
	if err := layout.CheckName("session", req.Session); err != nil {
		return nil, true, err
	}
	if req.Op == OpTerminalStart && req.Workspace == "" {
		return nil, true, fmt.Errorf("terminal.start needs workspace: %w", ipc.ErrBadRequest)
	}
	return req, true, nil
}

// serveTerminal answers one terminal op through the actors.
func serveTerminal(sys *actor.ActorSystem, root *actor.PID, l layout.Layout, launcher string, req *TerminalRequest) *TerminalReply {
	fail := func(code string, err error) *TerminalReply {
		return &TerminalReply{Type: ipc.TypeError, Code: ipc.Code(ipc.WithCode(code, err)), Message: err.Error(), Launcher: launcher}
	}
	if req.Op == OpTerminalStart {
		if _, err := agentdef.Load(l, req.Agent); err != nil {
			if errors.Is(err, agentdef.ErrNoSuchAgent) {
				return fail(ipc.CodeUnknownAgent, err)
			}
			return fail(ipc.CodeAgentInvalid, err)
		}
	}
	if req.Op == OpTerminalStatus {
		// Files are the truth (L5); no actor needed.
		st, err := terminal.Describe(l, req.Agent, req.Session)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fail(ipc.CodeNotFound, err)
			}
			return fail(ipc.CodeInternal, err)
		}
		return &TerminalReply{Type: "terminal", Status: &st, Launcher: launcher}
	}
	var msg any = &terminal.Stop{}
	if req.Op == OpTerminalStart {
		msg = &terminal.Start{Workspace: req.Workspace}
	}
	res, err := sys.Root.RequestFuture(root, &terminalOp{agent: req.Agent, session: req.Session, msg: msg}, terminalTimeout).Result()
	if err != nil {
		return fail(ipc.CodeInternal, fmt.Errorf("%s: %w", req.Op, err))
	}
	switch m := res.(type) {
	case *terminal.StartResponse:
		if m.Err != nil {
			code := CodeStartFailed
			switch {
			case errors.Is(m.Err, terminal.ErrBadWorkspace):
				code = ipc.CodeBadRequest
			case errors.Is(m.Err, terminal.ErrBusy):
				code = ipc.CodeBusy
			}
			return fail(code, m.Err)
		}
		return &TerminalReply{Type: "terminal", Status: &m.Status, Already: m.Already, Launcher: launcher}
	case *terminal.StopResponse:
		if m.Err != nil {
			code := ipc.CodeInternal
			switch {
			case errors.Is(m.Err, terminal.ErrNotRunning):
				code = CodeNotRunning
			case errors.Is(m.Err, terminal.ErrBusy):
				code = ipc.CodeBusy
			}
			return fail(code, m.Err)
		}
		st, _ := terminal.Describe(l, req.Agent, req.Session)
		return &TerminalReply{Type: "terminal", Status: &st, Cleanup: &m.Cleanup, Launcher: launcher}
	}
	return fail(ipc.CodeInternal, fmt.Errorf("%s: unexpected reply %T", req.Op, res))
}
