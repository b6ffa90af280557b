// Package tool is the actor that runs one tool call: resolve it, check every
// authority layer, ask for approval when the agent is in ask mode, then run it
// in the sandbox and normalize its result (runtime.md K1, K2, V3, A2, A3).
package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
)

// Actor runs one call.
type Actor struct {
	cfg    *config.Config
	call   Call
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	p      *proc.Proc
	prep   *prepared
	phase  phase // the table in phase.go
}

func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.onStarted(c)
	case *checked:
		a.onChecked(c, m)
	case *Approved:
		a.onApproved(c, m)
	case *finished:
		a.report(c, m.res)
	case *started:
		a.p = m.p // the spawn goroutine's watcher ends it when a.ctx is cancelled
		if a.phase == phaseSpawning {
			a.to(phaseRunning)
		}
	case *actor.Stopping:
		// spec: X12 — the process watcher sends SIGTERM to everything in the
		// sandbox, waits CTX_CANCEL_GRACE, then SIGKILLs it.
		a.cancel()
		if a.prep != nil && a.prep.tool != nil {
			a.prep.tool.Close()
		}
	case *actor.Stopped, *actor.Restarting:
		// Stopping already ended it; signalling again after the reap could hit a reused pid.
	default:
		a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "tool", "run", a.call.View.Run, "call", a.call.CallID, "tool", a.call.Name)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	self := c.Self()
	root := c.ActorSystem().Root
	call := a.call
	cfg := a.cfg
	ctx := a.ctx
	go func() {
		prep, res := check(ctx, cfg, call)
		root.Send(self, &checked{res: res, prep: prep})
	}()
}

func (a *Actor) onChecked(c actor.Context, m *checked) {
	if a.phase != phaseChecking {
		return
	}
	if m.res != nil {
		a.report(c, m.res)
		return
	}
	a.prep = m.prep
	if a.call.Ask {
		// spec: A2 — after every check, before spawn.
		need := &NeedApproval{CallID: a.call.CallID}
		if a.prep.mcp != nil {
			need.MCP = a.prep.mcp.approvalOf() // server, tool, arguments, hints
		}
		a.to(phaseAwaiting)
		c.Send(c.Parent(), need)
		return
	}
	a.spawn(c)
}

func (a *Actor) onApproved(c actor.Context, m *Approved) {
	if a.phase != phaseAwaiting { // an answer to nothing asked, or asked again
		return
	}
	if m.Decision != "allow_once" { // spec: A3 — everything else fails closed
		content := "not approved: " + m.Decision
		if m.Reason != "" {
			content += "; the person says: " + m.Reason
		}
		a.report(c, &Result{CallID: a.call.CallID, Name: a.call.Name, Status: envelope.StatusDenied,
			Content: content, Layer: "approval"})
		return
	}
	a.spawn(c)
}

func (a *Actor) report(c actor.Context, r *Result) {
	if !a.to(phaseReported) { // reported already: one result per call
		return
	}
	// The run stops this actor once it has the result (a self-stop's
	// Terminated could overtake the result: system messages go first).
	c.Send(c.Parent(), r)
}

func (a *Actor) spawn(c actor.Context) {
	a.to(phaseSpawning)
	if p := a.prep.mcp; p != nil {
		// The host calls the server; the call ends with a.ctx
		// (the SDK then sends notifications/cancelled for it).
		self, root, ctx, cfg, call := c.Self(), c.ActorSystem().Root, a.ctx, a.cfg, a.call
		go func() { root.Send(self, &finished{res: mcpResult(ctx, cfg, call, p)}) }()
		return
	}
	if t := a.prep.tool; t != nil {
		// What runs is what was checked and, in ask mode, approved: a file
		// replaced or rewritten since fails closed.
		if err := t.Unchanged(); err != nil {
			a.report(c, &Result{CallID: a.call.CallID, Name: a.call.Name, Status: envelope.StatusDenied,
				Content: err.Error() + "; nothing ran", Layer: LayerChanged})
			return
		}
	}
	v := a.call.View
	v.Tsh = a.prep.tool == nil  // tsh itself runs (list, load, pin, context …)
	v.Tools = sandbox.CallTools // Only what the policy allows is visible; one call: a tool tree
	argv := a.prep.argv
	tool := a.prep.tool
	a.prep.tool = nil // the goroutine owns the checked file from here
	opts := proc.Options{Bwrap: a.cfg.Bwrap, Roots: a.cfg.Roots, Ident: v.Identity(),
		Enter: a.call.Group.EnterFunc(), Place: a.call.Group.PlaceFunc()} // The run's cgroup, before the tool runs
	a.cfg.Procs.Add(1)
	self, root, ctx := c.Self(), c.ActorSystem().Root, a.ctx
	grace := a.cfg.CancelGrace
	call := a.call
	// The fork/exec and every wait run off the actor (STYLE: Receive never blocks).
	go func() {
		defer a.cfg.Procs.Done()
		// The view is built off the actor (it walks the
		// workspace); its descriptors close once bwrap has them, its
		// placeholders go once the tool ended.
		p, held, err := sandbox.Start(ctx, v, argv, v.ToolEnv(), func(spec bwrap.Spec) (*proc.Proc, error) {
			if tool != nil {
				// Bind exactly the checked file over its path: what runs is what was checked.
				spec.FDMounts = []bwrap.FDMount{{FD: spec.Pass(tool.File), Dst: argv[0]}}
			}
			opts.Spec = spec
			return proc.Start(opts)
		})
		defer held.Ended()
		if tool != nil {
			tool.Close()
		}
		if err != nil {
			root.Send(self, &finished{res: &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusError,
				Content: "sandbox: " + err.Error(), Layer: LayerSandbox}})
			return
		}
		// The watcher ends the process when the call is cancelled or the
		// actor stops — also when that happened while it was starting
		//: a started message could reach a stopped actor.
		go func() {
			select {
			case <-ctx.Done():
				p.Terminate(context.Background(), grace)
			case <-p.Done():
			}
		}()
		root.Send(self, &started{p: p})
		head := make([]byte, 0, 64<<10)
		buf := make([]byte, 32<<10)
		for {
			n, err := p.Stdout.Read(buf)
			if room := cap(head) - len(head); room > 0 {
				head = append(head, buf[:min(n, room)]...)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					slog.Debug("tool stdout", "err", err)
				}
				break
			}
		}
		werr := p.Wait()
		held.Ended() // before the result: placeholders go before the run can conclude
		if serr := proc.SandboxFailure(p.ExitCode(), len(head), p.Stderr()); serr != nil {
			// bwrap itself failed: fail closed and say how to fix it, never run unsandboxed.
			root.Send(self, &finished{res: &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusError,
				Content: serr.Error(), Layer: "sandbox"}})
			return
		}
		status, content, trunc := envelope.Normalize(head, p.Stderr(), werr == nil)
		root.Send(self, &finished{res: &Result{CallID: call.CallID, Name: call.Name, Status: status, Content: content, Truncated: trunc,
			Warnings: held.Warnings()}})
	}()
}
