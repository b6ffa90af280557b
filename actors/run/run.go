// Package run is the actor of one run: one of four engines (engine.go: a
// tsh op, the sdk-envelope-v1 step loop of an executable agent, runtime.md
// X1–X12, a model's turns, an ACP conversation), and what they share — the
// 8-call / 9-start bounds, cancellation, and the conclusion only the host
// writes.
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/internal/runprep"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/ipc"
)

// Actor runs one run. It keeps what every engine shares (engine.go): the
// phase, the bounds, the tool call in flight, the conclusion and the
// processes it ends; the engine keeps the rest.
type Actor struct {
	cfg       *config.Config
	spec      Spec
	startProc startFunc // proc.Start; the process seam package tests use
	log       *slog.Logger
	eng       engine
	ctx       context.Context
	stop      context.CancelFunc
	// crashed ends when this incarnation panicked (Restarting): a process
	// it was still starting is then killed at once, not given the grace.
	crashed context.Context
	crash   context.CancelFunc

	def   *agentdef.Def
	prep  *runprep.Prepared
	view  sandbox.View
	group *cgroup.Group // every process of the run, steps and tool calls

	// The bounds (limits.go): agent process starts, model turns, tool
	// calls, and the call ids already used.
	starts, turns, calls int
	seenCalls            map[string]bool

	toolPID  *actor.PID     // the tool actor of the call in flight (calls.go)
	toolCall *envelope.Line // that call

	// phase is where the run is: loading, running, concluding, concluded,
	// finishing (phase.go has the transitions).
	phase phase
	// startPending: a process start (a step, or the ACP agent) is under way
	// off the actor; the run stops only once it has reported.
	startPending bool
	procs        []*proc.Proc    // every process started and not yet reaped
	warned       map[string]bool // warning texts already emitted (each once per run)
	usage        *provider.Usage // token use the providers reported over the run's turns (nil: none)
	// usageBy is usage per candidate that answered (provider/model).
	usageBy map[string]*provider.Usage
	audit   *audit // the workspace as the run found it
	// diskOff ends the run's registration with the disk reserve watcher.
	diskOff func()
}

// Receive only dispatches.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.onStarted(c)
	case *defLoaded:
		a.onDefLoaded(c, m)
	case *tool.Result:
		a.onToolResult(c, m)
	case *tool.NeedApproval:
		a.onNeedApproval(c, m)
	case *ApprovalAnswer:
		a.onApprovalAnswer(c, m)
	case *Cancel:
		a.onCancel(c)
	case *Concluded:
		a.onConcluded(c)
	case *audited:
		a.onAudited(c, m)
	case *diskLow:
		a.onDiskLow(c, m)
	case *actor.Restarting:
		// A crash: nothing of this incarnation survives; kill at once.
		if a.crash != nil {
			a.crash()
		}
		a.killAll()
		a.closeGroup(0)
		a.unwatchDisk()
	case *actor.Stopping:
		a.onStopping()
	case *actor.Terminated:
		a.onChildGone(c, m)
	case *actor.Stopped:
		a.onStopped()
	default:
		if !a.eng.receive(c, m) { // the engine's own continuations
			a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
		}
	}
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "run", "session", a.spec.Session, "run", a.spec.RunID)
	a.ctx, a.stop = context.WithCancel(context.Background())
	a.crashed, a.crash = context.WithCancel(context.Background())
	a.seenCalls = map[string]bool{}
	a.warned = map[string]bool{}
	a.eng = loading{}
	if a.spec.Attempts.Add(1) > 1 {
		// spec: L4 — a restarted run never runs again; the host concludes it.
		a.log.Warn("run actor restarted after a crash; concluding the run as interrupted")
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeInterrupted,
			"the run was interrupted by an internal failure; send the request again with a new id")), ipc.StatusError)
		return
	}
	a.cfg.Hit("run.start")
	self, root, l, spec, log, ctx := c.Self(), c.ActorSystem().Root, a.cfg.Layout, a.spec, a.log, a.ctx
	go func() {
		// Control files are re-read for every run (U6).
		def, err := agentdef.Load(l, spec.Agent)
		m := &defLoaded{def: def, err: err}
		// The workspace's audit and review snapshot (git processes)
		// are taken beside the prompt and providers, joined below.
		var wg sync.WaitGroup
		if err == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.audit = takeAudit(l, def, spec.Workspace)
				if spec.Op == ipc.OpSend && spec.Workspace != "" && m.audit != nil {
					m.audit.takeReview(l.SessionDir(spec.Agent, spec.Scope, spec.Session), spec.RunID, spec.Workspace, log)
				}
			}()
		}
		if err == nil && spec.Op == ipc.OpSend {
			// The window, its environment, and the prompt (R1, W4–W9) —
			// the same function `ctx agent prompt` calls (R4).
			sess := l.SessionDir(spec.Agent, spec.Scope, spec.Session)
			tools, err := runprep.ToolState(sess)
			if err != nil {
				log.Warn("tool context unreadable; the prompt gets none", "err", err)
			}
			m.prep, m.perr = runprep.Prepare(runprep.Input{Layout: l, Def: def, SessionDir: sess, Workspace: spec.Workspace,
				Cwd: spec.Cwd, ToolState: tools, History: spec.HistoryMsgs, Input: spec.Input, Images: spec.Images, Time: time.Now()})
		}
		if err == nil && m.perr == nil && def.Kind == agentdef.KindModel && spec.Op != ipc.OpTsh {
			// A model run's providers, read here rather than on the
			// actor.
			m.disp, m.derr = loadDispatcher(l, log)
		}
		wg.Wait()
		if ctx.Err() != nil {
			m.dropAudit() // the run stopped meanwhile: no one takes it
		}
		root.Send(self, m)
	}()
}

// onDefLoaded acts in phase loading: the run starts (→ running), or
// concludes when its definition or prompt cannot be had.
func (a *Actor) onDefLoaded(c actor.Context, m *defLoaded) {
	if a.phase != phaseLoading {
		m.dropAudit() // concluded meanwhile (a cancel, a restart)
		return
	}
	if m.err != nil {
		a.emit(c, &ipc.Frame{Type: ipc.TypeStart, ID: a.spec.ReqID, Op: a.spec.Op, Digest: a.spec.Digest})
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeAgentInvalid, m.err)), ipc.StatusError)
		return
	}
	a.enter(phaseRunning)
	a.def = m.def
	a.prep = m.prep
	// The session's runs follow one another: each takes the group the
	// last one emptied, where the backend keeps one (cgroup.Lease).
	a.group = a.cfg.Cgroups.Lease(a.spec.Agent+"\x00"+a.spec.Scope+"\x00"+a.spec.Session, a.spec.RunID, m.def.Limits)
	if m.def.Kind != agentdef.KindModel || a.spec.Op == ipc.OpTsh {
		// A sandbox comes next (the agent's step, the tsh op's): the
		// cgroup is made meanwhile, off the actor, so that the sandbox's
		// start only joins it. A model's send may never start one: its
		// first tool call makes the group.
		a.group.Prepare()
	}
	start := &ipc.Frame{Type: ipc.TypeStart, ID: a.spec.ReqID, Op: a.spec.Op, Digest: a.spec.Digest}
	if m.prep != nil {
		start.Prompt = m.prep.PromptHash() // R4: match a run to `ctx agent prompt`
	}
	a.emit(c, start)
	var cands []runprep.Candidate
	var we *runprep.WindowError
	switch {
	case m.prep != nil && m.def.Kind == agentdef.KindModel:
		// The dispatcher reports each candidate as it reaches it.
	case m.prep != nil:
		cands = m.prep.Skipped
	case errors.As(m.perr, &we):
		cands = we.Candidates
	}
	for _, cd := range cands {
		if !cd.Usable && cd.Reason != "skipped" { // spec: W6 — auditable, settings untouched
			a.emit(c, &ipc.Frame{Type: ipc.TypeCandidate, Model: cd.Model, Status: "unusable", Reason: cd.Reason})
		}
	}
	if m.perr != nil {
		a.conclude(c, ipc.ErrorFrame("", m.perr), "error")
		return
	}
	if len(a.spec.Images) > 0 && m.def.Kind == agentdef.KindExec && m.def.ABI != agentdef.ABIACP {
		// The agent's socket refuses such a send before anything is
		// recorded; this holds when the definition changed in between.
		a.conclude(c, ipc.ErrorFrame("", NoImagesError(a.spec.Agent)), ipc.StatusError)
		return
	}
	if m.prep != nil && m.prep.Prompt != nil {
		// What the builder left out or shortened is said, as durable frames.
		a.warn(c, renderWarnings(m.prep.Prompt))
	}
	if m.prep != nil && m.prep.SnapshotErr != nil {
		a.log.Warn("session snapshots not written (the run goes on)", "err", m.prep.SnapshotErr) // R5
	}
	a.view = sandbox.View{Layout: a.cfg.Layout, Def: m.def, Session: a.spec.Session, Scope: a.spec.Scope, Run: a.spec.RunID, Pin: a.spec.RunID,
		Tools:     sandbox.NoTools, // An agent step acts only through tool_call
		Workspace: a.spec.Workspace, Cwd: a.spec.Cwd, Placeholders: a.cfg.Placeholders, Log: a.log}
	a.audit = m.audit
	a.watchDisk(c)
	if m.audit != nil {
		// Protection fails closed: the run is told which of its
		// directories are read-only and the grant that lifts it.
		a.warn(c, m.audit.readOnly)
	}
	a.eng = a.engineFor(m)
	a.eng.start(c)
}
