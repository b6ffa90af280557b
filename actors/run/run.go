// Package run is the actor of one run: the sdk-envelope-v1 step loop of an
// executable agent (runtime.md X1–X12), its 8-call / 9-start bounds,
// cancellation, and the conclusion only the host writes.
package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/internal/runprep"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/ipc"
)

// Actor runs one run.
type Actor struct {
	cfg   *config.Config
	spec  Spec
	log   *slog.Logger
	usage *provider.Usage // token use the providers reported over the run's turns (nil: none)
	// usageBy is usage per candidate that answered (provider/model).
	usageBy map[string]*provider.Usage
	ctx     context.Context
	stop    context.CancelFunc
	// crashed ends when this incarnation panicked (Restarting): a process
	// it was still starting is then killed at once, not given the grace.
	crashed context.Context
	crash   context.CancelFunc

	def   *agentdef.Def
	prep  *runprep.Prepared
	view  sandbox.View
	group *cgroup.Group // every process of the run, steps and tool calls (issue 11)

	step      int
	starts    int
	calls     int
	seenCalls map[string]bool
	obs       *envelope.Observation

	model  *model          // a model-backed run's conversation
	acp    *acpState       // an acp-v1 run's agent and conversation (issue 14)
	warned map[string]bool // warning texts already emitted (each once per run)

	gen       int        // current step generation
	p         *proc.Proc // live agent process, if any
	procs     []*proc.Proc
	deltas    reply
	call      *envelope.Line // the step's tool call
	stepBytes int            // stdout bytes of the current step
	toolPID   *actor.PID
	toolCall  *envelope.Line

	// phase is where the run is: loading, running, concluding, concluded,
	// finishing (phase.go has the transitions).
	phase phase
	// startPending: a process start (a step, or the ACP agent) is under way
	// off the actor; the run stops only once it has reported.
	startPending bool
	audit        *audit // the workspace as the run found it (issue 11)
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
	case *stepStarted:
		a.onStepStarted(c, m)
	case *agentLine:
		a.onAgentLine(c, m)
	case *agentExited:
		a.onAgentExited(c, m)
	case *tool.Result:
		a.onToolResult(c, m)
	case *tool.NeedApproval:
		a.onNeedApproval(c, m)
	case *modelEvent:
		a.onModelEvent(c, m)
	case *modelCandidate:
		a.onModelCandidate(c, m)
	case *modelPrepared:
		a.onModelPrepared(c, m)
	case *modelDone:
		a.onModelDone(c, m)
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
	case *acpStarted:
		a.onACPStarted(c, m)
	case *acpSession:
		a.onACPSession(m)
	case *acpFrame:
		a.onACPFrame(c, m)
	case *acpPermission:
		a.onACPPermission(c, m)
	case *acpTerminal:
		a.onACPTerminal(c, m)
	case *acpProc:
		a.onACPProc(m)
	case *acpFlood:
		a.onACPFlood(c)
	case *acpEnded:
		a.onACPEnded(c, m)
	case *acpExited:
		a.onACPExited(c, m)
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
		a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "run", "session", a.spec.Session, "run", a.spec.RunID)
	a.ctx, a.stop = context.WithCancel(context.Background())
	a.crashed, a.crash = context.WithCancel(context.Background())
	a.seenCalls = map[string]bool{}
	a.warned = map[string]bool{}
	if a.spec.Attempts.Add(1) > 1 {
		// spec: L4 — a restarted run never runs again; the host concludes it.
		a.log.Warn("run actor restarted after a crash; concluding the run as interrupted")
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeInterrupted,
			"the run was interrupted by an internal failure; send the request again with a new id")), ipc.StatusError)
		return
	}
	a.cfg.Hit("run.start")
	self, root, l, spec, log := c.Self(), c.ActorSystem().Root, a.cfg.Layout, a.spec, a.log
	go func() {
		// Control files are re-read for every run (U6).
		def, err := agentdef.Load(l, spec.Agent)
		m := &defLoaded{def: def, err: err}
		if err == nil && spec.Op == ipc.OpSend {
			// The window, its environment, and the prompt (R1, W4–W9) —
			// the same function `ctx agent prompt` calls (R4).
			sess := l.SessionDir(spec.Agent, spec.Scope, spec.Session)
			tools, err := runprep.ToolState(sess)
			if err != nil {
				log.Warn("tool context unreadable; the prompt gets none", "err", err)
			}
			m.prep, m.perr = runprep.Prepare(runprep.Input{Layout: l, Def: def, SessionDir: sess, Workspace: spec.Workspace,
				Cwd: spec.Cwd, ToolState: tools, History: spec.HistoryMsgs, Input: spec.Input, Time: time.Now()})
		}
		if err == nil {
			m.audit = takeAudit(l, def, spec.Workspace)
		}
		if err == nil && m.perr == nil && def.Kind == agentdef.KindModel && spec.Op != ipc.OpTsh {
			// A model run's providers, read here rather than on the
			// actor (issue 17 item 2).
			m.disp, m.derr = loadDispatcher(l, log)
		}
		root.Send(self, m)
	}()
}

// onDefLoaded acts in phase loading: the run starts (→ running), or
// concludes when its definition or prompt cannot be had.
func (a *Actor) onDefLoaded(c actor.Context, m *defLoaded) {
	if a.phase != phaseLoading {
		return // concluded meanwhile (a cancel, a restart)
	}
	if m.err != nil {
		a.emit(c, &ipc.Frame{Type: ipc.TypeStart, ID: a.spec.ReqID, Op: a.spec.Op, Digest: a.spec.Digest})
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeAgentInvalid, m.err)), ipc.StatusError)
		return
	}
	a.enter(phaseRunning)
	a.def = m.def
	a.prep = m.prep
	a.group = a.cfg.Cgroups.Group(a.spec.RunID, m.def.Limits) // created by the first process
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
	if m.prep != nil && m.prep.Prompt != nil {
		// What the builder left out or shortened is said, as durable frames.
		a.warn(c, renderWarnings(m.prep.Prompt))
	}
	if m.prep != nil && m.prep.SnapshotErr != nil {
		a.log.Warn("session snapshots not written (the run goes on)", "err", m.prep.SnapshotErr) // R5
	}
	a.view = sandbox.View{Layout: a.cfg.Layout, Def: m.def, Session: a.spec.Session, Scope: a.spec.Scope, Run: a.spec.RunID,
		Tools:     sandbox.NoTools, // issue 11 item 4: an agent step acts only through tool_call
		Workspace: a.spec.Workspace, Cwd: a.spec.Cwd, Placeholders: a.cfg.Placeholders, Log: a.log}
	a.audit = m.audit
	a.watchDisk(c)
	if m.audit != nil {
		// Protection fails closed: the run is told which of its
		// directories are read-only and the grant that lifts it.
		a.warn(c, m.audit.readOnly)
	}
	if a.spec.Op == ipc.OpTsh {
		// spec: P3 — a tsh op runs one tsh call through the tool path; no agent, no model.
		a.startTool(c, &envelope.Line{Type: "tool_call", ID: "call-1", Name: "tsh", Args: a.spec.Args})
		return
	}
	if a.def.Kind == agentdef.KindModel {
		a.startModel(c, m.disp, m.derr)
		return
	}
	if a.def.ABI == agentdef.ABIACP {
		a.startACP(c)
		return
	}
	a.startStep(c)
}

// startStep starts the next SDK process with the envelope on its stdin.
// In phase running only.
func (a *Actor) startStep(c actor.Context) {
	if a.phase != phaseRunning { // spec: X6 — cancellation checked before every process
		return
	}
	if a.starts >= MaxStarts { // spec: X6
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
			"run reached %d agent process starts", MaxStarts)), ipc.StatusError)
		return
	}
	// Everything that touches files or forks runs off the actor: the tool
	// context (session state tsh may have changed during the run), the
	// envelope, the bwrap start; the outcome comes back as stepStarted,
	// followed by the process's lines and exit.
	agentEnv := a.view.AgentEnv(a.step)
	if a.prep != nil {
		maps.Copy(agentEnv, a.prep.Env) // spec: W7 — exactly when the window is known
	}
	view := a.view
	opts := proc.Options{Bwrap: a.cfg.Bwrap, Roots: a.cfg.Roots, Ident: a.view.Identity(),
		Enter: a.group.EnterFunc(), Place: a.group.PlaceFunc()} // issue 11: born in the run's cgroup (v1), else placed while held
	env := envelope.Envelope{Schema: envelope.Schema, Run: a.spec.RunID, Step: a.step, Input: a.spec.Input,
		HistoryMessages: a.spec.History, Observation: a.obs}
	prep := a.prep
	file := filepath.Join(a.cfg.Layout.SessionDir(a.spec.Agent, a.spec.Scope, a.spec.Session), toolctx.StateFileName)
	a.starts++
	a.gen++
	a.startPending = true
	a.deltas.Reset()
	a.stepBytes = 0
	a.call = nil
	self, root, gen, cfg, log := c.Self(), c.ActorSystem().Root, a.gen, a.cfg, a.log
	actx, crashed := a.ctx, a.crashed
	cfg.Procs.Add(1)
	go func() {
		defer cfg.Procs.Done()
		var tools *toolctx.State
		if st, err := toolctx.ReadState(file); err == nil {
			tools = &st
		} else {
			log.Warn("tool context unreadable; sending none", "err", err)
			tools = &toolctx.State{}
		}
		var warnings []string
		if prep != nil {
			// spec: X5 R4 — the envelope carries the budgeted view `ctx agent
			// prompt` prints and the start hash describes: the history view
			// and the tool context as rendered for this step (issue 16 item 3).
			res, err := prep.Render(prep.Selection(), tools, nil)
			if err != nil {
				root.Send(self, &stepStarted{gen: gen, err: err, code: ipc.Code(err)})
				return
			}
			env.HistoryMessages, env.ToolContext = historyView(res.History), res.ToolContext
			warnings = renderWarnings(res)
		} else {
			env.ToolContext = toolctx.ContextText(*tools, toolctx.DefaultContextBudget)
		}
		stdin, err := envelope.Encode(&env)
		if err != nil {
			root.Send(self, &stepStarted{gen: gen, err: err, code: ipc.CodeInternal})
			return
		}
		opts.Stdin = stdin
		// issue 11: the view is built here, off the actor (it walks the
		// workspace); its descriptors close once bwrap has them, its
		// placeholders go once the step ended.
		spec, held, err := view.Build([]string{view.AgentPath()}, agentEnv)
		if err != nil {
			root.Send(self, &stepStarted{gen: gen, err: err, code: ipc.CodeSandboxUnavailable})
			return
		}
		warnings = append(warnings, held.Warnings()...)
		opts.Spec = spec
		p, err := proc.Start(opts)
		held.Started()
		if err != nil {
			held.Ended()
			root.Send(self, &stepStarted{gen: gen, err: err, code: ipc.CodeSandboxUnavailable})
			return
		}
		// issue 15 item 5: if this incarnation crashes or stops before it
		// learns of the process (stepStarted still in its mailbox, or
		// delivered to a restarted incarnation), the process still ends.
		cfg.Procs.Add(1)
		go func() {
			defer cfg.Procs.Done()
			select {
			case <-p.Done():
			case <-actx.Done():
				if crashed.Err() != nil {
					p.Kill()
				} else {
					p.Terminate(context.Background(), cfg.CancelGrace)
				}
			}
		}()
		root.Send(self, &stepStarted{gen: gen, p: p, warnings: warnings})
		cfg.Procs.Add(1)
		readAgent(root, self, gen, p, cfg, held.Ended)
	}()
}

// onStepStarted records the started process, or concludes when it could not
// start. A process that started after a cancel is ended at once.
func (a *Actor) onStepStarted(c actor.Context, m *stepStarted) {
	if m.gen != a.gen {
		// A start this incarnation did not ask for (its crashed
		// predecessor's): never let it run. issue 15 item 5
		if m.p != nil {
			m.p.Kill()
		}
		return
	}
	a.startPending = false
	if m.err != nil {
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(m.code, m.err)), ipc.StatusError)
		a.maybeStop(c)
		return
	}
	a.p = m.p
	a.procs = append(a.procs, m.p)
	if a.phase.concluded() {
		m.p.Terminate(a.ctx, a.cfg.CancelGrace) // spec: X6 — checked after the process too
		return
	}
	a.warn(c, m.warnings)
}

// readAgent streams the agent's stdout lines to the actor, then its exit.
// All lines are sent before the exit (same sender, ordered mailbox).
// ended runs once the process is gone, before its exit is reported (the
// view's placeholders go before the run can conclude).
func readAgent(root *actor.RootContext, self *actor.PID, gen int, p *proc.Proc, cfg *config.Config, ended func()) {
	defer cfg.Procs.Done()
	r := bufio.NewReaderSize(p.Stdout, 64<<10)
	total := 0
	var readErr error
	for {
		line, err := readLine(r)
		total += len(line)
		if total > MaxStepOutput {
			root.Send(self, &agentLine{gen: gen, err: fmt.Errorf("step output exceeds %d bytes: %w", MaxStepOutput, envelope.ErrInvalidOutput)})
			p.Kill()
			_, _ = io.Copy(io.Discard, r)
			break
		}
		if len(line) > 0 || err == nil {
			root.Send(self, &agentLine{gen: gen, line: line})
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
				root.Send(self, &agentLine{gen: gen, err: err})
				p.Kill()
				_, _ = io.Copy(io.Discard, r)
			}
			break
		}
	}
	werr := p.Wait()
	ended()
	if readErr != nil && werr == nil {
		werr = readErr
	}
	root.Send(self, &agentExited{gen: gen, code: p.ExitCode(), err: werr, stderr: p.Stderr()})
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > envelope.MaxOutputLine+1 {
			return nil, fmt.Errorf("output line exceeds %d bytes: %w", envelope.MaxOutputLine, envelope.ErrInvalidOutput)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		return line, err
	}
}

// onAgentLine acts in phase running, on the current step's lines.
func (a *Actor) onAgentLine(c actor.Context, m *agentLine) {
	if m.gen != a.gen || a.phase != phaseRunning {
		return // spec: X12 — nothing the agent prints after the conclusion is recorded
	}
	if m.err != nil {
		a.invalidOutput(c, m.err.Error())
		return
	}
	a.stepBytes += len(m.line)
	if len(bytes.TrimSpace(m.line)) == 0 {
		return // blank lines carry nothing
	}
	if a.call != nil { // spec: X9 — any frame after a tool_call
		a.invalidOutput(c, "output after the tool_call")
		return
	}
	ln, err := envelope.ParseLine(m.line)
	if err != nil { // spec: X9
		a.invalidOutput(c, err.Error())
		return
	}
	switch ln.Type {
	case "delta":
		a.deltas.WriteString(ln.Text)
		a.emit(c, &ipc.Frame{Type: ipc.TypeDelta, Text: ln.Text})
	case "tool_call":
		if err := ipc.CheckID("tool_call id", ln.ID); err != nil {
			a.invalidOutput(c, err.Error())
			return
		}
		if a.seenCalls[ln.ID] { // spec: X6 — a replayed call id is refused before authorization
			a.invalidOutput(c, fmt.Sprintf("tool_call id %q was already used in this run", ln.ID))
			return
		}
		a.call = ln
	case "usage":
		// issue 18: an executable agent may report its model use; it is
		// summed into the done frame's usage, and into usage_by_model under
		// the definition's preferred .d/model when it has one.
		u := &provider.Usage{Input: ln.Usage.Input, Output: ln.Usage.Output, CacheRead: ln.Usage.CacheRead, CacheWrite: ln.Usage.CacheWrite}
		if a.usage == nil {
			a.usage = &provider.Usage{}
		}
		a.usage.Add(u)
		if a.def != nil && len(a.def.Models) > 0 {
			if a.usageBy == nil {
				a.usageBy = map[string]*provider.Usage{}
			}
			m := a.def.Models[0]
			if a.usageBy[m] == nil {
				a.usageBy[m] = &provider.Usage{}
			}
			a.usageBy[m].Add(u)
		}
	}
}

// invalidOutput concludes the run: the step broke X9, and with the run
// concluded its remaining output is ignored.
func (a *Actor) invalidOutput(c actor.Context, why string) {
	if a.p != nil {
		a.p.Kill()
	}
	a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeInvalidAgentOutput, "%s", why)), ipc.StatusError)
}

func (a *Actor) onAgentExited(c actor.Context, m *agentExited) {
	if m.gen == a.gen {
		a.p = nil
	}
	a.reap()
	// A cancelled run (and one whose step broke X9) is concluded: it may
	// now be able to stop.
	if m.gen != a.gen || a.phase != phaseRunning { // spec: X6 — and after every process
		a.maybeStop(c)
		return
	}
	if serr := proc.SandboxFailure(m.code, a.stepBytes, m.stderr); serr != nil && a.call == nil {
		// bwrap could not build the sandbox: fail closed and name the fix.
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeSandboxUnavailable, serr)), ipc.StatusError)
		return
	}
	if a.call == nil {
		if m.err == nil && m.code == 0 {
			a.concludeReply(c, a.deltas.b.String(), a.deltas.total)
			return
		}
		a.invalidOutput(c, fmt.Sprintf("agent exited with status %d without a tool_call%s", m.code, stderrTail(m.stderr)))
		return
	}
	call := a.call
	a.seenCalls[call.ID] = true
	a.calls++
	if a.calls > MaxCalls { // spec: X6
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
			"run reached %d tool calls", MaxCalls)), ipc.StatusError)
		return
	}
	a.startTool(c, call)
}

// historyView is history_messages: the history view as a JSON array of
// {"role","content"} objects, within X5's 64 KiB (the builder already caps
// the view at that size; this only guards the encoding's edge).
func historyView(h []prompt.Message) string {
	for {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if h == nil {
			h = []prompt.Message{}
		}
		_ = enc.Encode(h) // strings only: cannot fail
		out := strings.TrimSuffix(b.String(), "\n")
		if len(out) <= envelope.MaxContext || len(h) == 0 {
			return out
		}
		h = h[1:]
	}
}

func stderrTail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "; stderr: " + strings.ToValidUTF8(string(b), "\uFFFD")
}

// startTool records the call and hands it to a tool actor. spec: X8
func (a *Actor) startTool(c actor.Context, call *envelope.Line) {
	a.toolCall = call
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolCall, CallID: call.ID, Name: call.Name, Args: nonNil(call.Args)})
	a.cfg.Hit("run.tool_call")
	a.toolPID = c.Spawn(tool.Props(a.cfg, tool.Call{View: a.view, CallID: call.ID, Name: call.Name, Args: call.Args,
		Ask: a.def.Approval == "ask", Group: a.group}))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// onToolResult acts in phase running, on the call in flight (a cancel
// writes that call's result itself).
func (a *Actor) onToolResult(c actor.Context, r *tool.Result) {
	if a.toolCall == nil || r.CallID != a.toolCall.ID || a.phase.concluded() {
		return
	}
	if a.toolPID != nil {
		c.Stop(a.toolPID)
	}
	a.toolCall, a.toolPID = nil, nil
	// A sandbox whose workspace the run made read-only (it planted files
	// past the protected-path walk's bound) is said, once per run.
	a.warn(c, r.Warnings)
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: r.CallID, Name: r.Name, Status: r.Status,
		Content: r.Content, Truncated: r.Truncated, Layer: r.Layer})
	if a.model != nil {
		a.onModelToolResult(c, r)
		return
	}
	if a.spec.Op == ipc.OpTsh {
		status := ipc.StatusOK
		if r.Status != envelope.StatusOK {
			status = ipc.StatusError
		}
		a.conclude(c, nil, status)
		return
	}
	a.obs = &envelope.Observation{ToolCallID: r.CallID, Name: r.Name, Status: r.Status, Content: r.Content, Truncated: r.Truncated}
	a.step++
	a.startStep(c)
}

// onChildGone: a tool actor that stopped without a result crashed; the call
// is reported failed, never run again.
func (a *Actor) onChildGone(c actor.Context, m *actor.Terminated) {
	if a.toolPID == nil || !m.Who.Equal(a.toolPID) || a.toolCall == nil {
		return
	}
	a.onToolResult(c, &tool.Result{CallID: a.toolCall.ID, Name: a.toolCall.Name, Status: envelope.StatusError,
		Content: "the tool call failed inside the runtime and was not retried"})
}

func (a *Actor) onNeedApproval(c actor.Context, m *tool.NeedApproval) {
	if a.toolCall == nil || a.toolCall.ID != m.CallID || a.phase.concluded() {
		return
	}
	c.Request(c.Parent(), &ApprovalNeeded{Run: a.spec.RunID, CallID: m.CallID, Name: a.toolCall.Name, Args: nonNil(a.toolCall.Args), MCP: m.MCP})
}

func (a *Actor) onApprovalAnswer(c actor.Context, m *ApprovalAnswer) {
	if a.acp != nil {
		a.onACPApprovalAnswer(m)
		return
	}
	if a.toolCall == nil || a.toolCall.ID != m.CallID || a.toolPID == nil {
		return
	}
	c.Send(a.toolPID, &tool.Approved{Decision: m.Decision})
}

// onCancel acts until the run is concluded (loading or running), and
// concludes it cancelled.
func (a *Actor) onCancel(c actor.Context) {
	if a.phase.concluded() {
		return
	}
	if a.model != nil && a.model.cancel != nil {
		a.model.cancel() // spec: X12 — the HTTP stream is aborted at once
	}
	if a.acp != nil {
		a.onACPCancel(c) // issue 14: session/cancel, then SIGTERM → grace → SIGKILL once done is durable
	}
	a.endToolCall(c, envelope.StatusCancelled, "cancelled")
	a.conclude(c, &ipc.Frame{Type: ipc.TypeCancelled}, ipc.StatusCancelled)
}

// endToolCall stops the tool call in flight, if any, and writes its
// result before the run's end: no tool_call is left without one (X7).
func (a *Actor) endToolCall(c actor.Context, status, content string) {
	if a.toolCall == nil {
		return
	}
	if a.toolPID != nil {
		c.Stop(a.toolPID)
	}
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: a.toolCall.ID, Name: a.toolCall.Name,
		Status: status, Content: content})
	a.toolCall, a.toolPID = nil, nil
}

// conclude emits the one conclusion (if any) and done. Only the host does
// (X7, X8). A run with a workspace first compares it with the snapshot
// taken at its start, off the actor, and warns of what now runs code on
// the host (issue 11); nothing more is recorded meanwhile.
// In phase loading or running: → concluding (the audit) or → concluded.
func (a *Actor) conclude(c actor.Context, f *ipc.Frame, status string) {
	if a.phase.concluded() {
		return
	}
	a.closeACPCalls(c, status) // every recorded call gets its result before the conclusion
	if au := a.audit; au != nil {
		a.enter(phaseConcluding)
		a.audit = nil
		self, root := c.Self(), c.ActorSystem().Root
		go func() {
			changes, incomplete := au.changes()
			root.Send(self, &audited{warnings: changes, incomplete: incomplete, f: f, status: status})
		}()
		return
	}
	a.enter(phaseConcluded)
	a.finish(c, f, status)
}

// onAudited acts in phase concluding: it emits the run's host-code
// warning, then its conclusion (→ concluded). An audit a crashed
// incarnation started is not this run's.
func (a *Actor) onAudited(c actor.Context, m *audited) {
	if a.phase != phaseConcluding {
		return
	}
	a.enter(phaseConcluded)
	if len(m.warnings) > 0 {
		msg := "this run changed what runs code on the host: " + strings.Join(m.warnings, "; ")
		if len(msg) > 8<<10 {
			msg = msg[:8<<10] + " …"
		}
		a.log.Warn("run changed what runs code on the host", "changes", m.warnings)
		a.emit(c, &ipc.Frame{Type: ipc.TypeWarning, Message: msg})
	}
	if len(m.incomplete) > 0 {
		// A cut-short walk is said, or a run could hide a new hook behind
		// enough planted files and be reported as having changed nothing.
		msg := "the end-of-run check of what runs code on the host is incomplete: " + strings.Join(m.incomplete, "; ")
		a.log.Warn("end-of-run check incomplete", "why", m.incomplete)
		a.emit(c, &ipc.Frame{Type: ipc.TypeWarning, Message: msg})
	}
	a.finish(c, m.f, m.status)
}

func (a *Actor) finish(c actor.Context, f *ipc.Frame, status string) {
	if f != nil {
		a.emit(c, f)
	}
	done := &ipc.Frame{Type: ipc.TypeDone, ID: a.spec.ReqID, Status: status}
	if u := a.usage; u != nil {
		done.Usage = &ipc.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
	}
	for m, u := range a.usageBy {
		if done.UsageByModel == nil {
			done.UsageByModel = map[string]*ipc.Usage{}
		}
		done.UsageByModel[m] = &ipc.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
	}
	a.emit(c, done)
}

func (a *Actor) emit(c actor.Context, f *ipc.Frame) {
	if f.Type == ipc.TypeDelta && len(f.Text) > ipc.MaxDeltaText {
		// A longer delta (an ACP chunk, a model event) becomes several,
		// so no frame outgrows what clients read (ipc.MaxFrameLine).
		for text := f.Text; text != ""; {
			piece := cutText(text, ipc.MaxDeltaText)
			text = text[len(piece):]
			a.emit(c, &ipc.Frame{Type: ipc.TypeDelta, Text: piece})
		}
		return
	}
	f.Run = a.spec.RunID
	c.Request(c.Parent(), &Emit{Frame: f}) // Request: the session checks the sender is the active run
}

// onConcluded: the done frame is durable. End every process: SIGTERM, the
// grace period, SIGKILL (X12). Stop once they are gone. From any phase →
// finishing.
func (a *Actor) onConcluded(c actor.Context) {
	a.enter(phaseFinishing)
	if a.toolPID != nil {
		c.Stop(a.toolPID)
	}
	a.endACP()
	for _, p := range a.procs {
		p.Terminate(a.ctx, a.cfg.CancelGrace)
	}
	a.maybeStop(c)
}

func (a *Actor) reap() {
	live := a.procs[:0]
	for _, p := range a.procs {
		select {
		case <-p.Done():
		default:
			live = append(live, p)
		}
	}
	a.procs = live
}

func (a *Actor) maybeStop(c actor.Context) {
	a.reap()
	if a.phase == phaseFinishing && !a.startPending && len(a.procs) == 0 {
		c.Stop(c.Self())
	}
}

func (a *Actor) onStopping() {
	// Daemon shutdown or the session going away: give processes their grace.
	for _, p := range a.procs {
		p.Terminate(context.Background(), a.cfg.CancelGrace)
	}
	if a.stop != nil {
		a.stop()
	}
}

// onStopped: the run is over and its children are stopped. What is still
// in its cgroup after the grace (a tool being terminated, anything that
// escaped its sandbox's teardown) is killed and the cgroup removed, off
// the actor (issue 11 item 7).
func (a *Actor) onStopped() {
	a.closeGroup(a.cfg.CancelGrace)
	a.unwatchDisk()
}

// watchDisk registers the run with the disk reserve watcher: its writable
// host directories are the agent home, the workspace and the rw .d/mount
// sources — the view's writable mounts (the watcher counts those on
// CTX_ROOT's filesystem).
func (a *Actor) watchDisk(c actor.Context) {
	dirs := []string{a.cfg.Layout.AgentHome(a.def.Name)} // spec: B2 — the agent home is always writable
	if a.spec.Workspace != "" {
		dirs = append(dirs, a.spec.Workspace)
	}
	if a.spec.Scope == layout.ScopeShared {
		// A shared session's directory is outside the agent home, and a
		// tsh view writes it (tools.json).
		dirs = append(dirs, a.cfg.Layout.SessionDir(a.def.Name, a.spec.Scope, a.spec.Session))
	}
	for _, m := range a.def.Mounts {
		if m.Write {
			dirs = append(dirs, m.Src)
		}
	}
	self, root := c.Self(), c.ActorSystem().Root
	home := a.cfg.Layout.AgentHome(a.def.Name)
	a.diskOff = a.cfg.Disk.Register(diskreserve.Run{ID: a.spec.RunID, Dirs: dirs, Home: home, HomeLimit: a.def.Limits.Disk,
		Agent: a.def.Name, Procs: a.group.Procs, Stop: func(msg string) { root.Send(self, &diskLow{msg: msg}) }})
}

func (a *Actor) unwatchDisk() {
	if a.diskOff != nil {
		a.diskOff()
		a.diskOff = nil
	}
}

// onDiskLow acts until the run is concluded: the disk holding CTX_ROOT is
// below its reserve and this run's directories grow, or its agent home is
// over its `disk` limit. Its processes are
// killed at once — every moment of the cancel grace would eat the reserve
// the daemon's log appends need — and it concludes resource_exhausted
// with the watcher's message (the reserve, the free space, the fix).
func (a *Actor) onDiskLow(c actor.Context, m *diskLow) {
	if a.phase.concluded() {
		return
	}
	a.log.Warn("run stopped by the disk reserve", "why", m.msg)
	a.closeGroup(0)
	for _, p := range a.procs {
		p.Kill()
	}
	if a.model != nil && a.model.cancel != nil {
		a.model.cancel()
	}
	a.endToolCall(c, envelope.StatusError, "stopped by the daemon's disk watcher (the run's error says why)")
	a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeResourceExhausted, "%s", m.msg)), ipc.StatusError)
}

func (a *Actor) closeGroup(grace time.Duration) {
	g, cfg, log := a.group, a.cfg, a.log
	if g == nil {
		return
	}
	a.group = nil
	cfg.Procs.Add(1)
	go func() {
		defer cfg.Procs.Done()
		if err := g.Close(grace); err != nil {
			log.Warn("run cgroup not fully cleaned up (the next daemon start sweeps it)", "err", err)
		}
	}()
}

func (a *Actor) killAll() {
	for _, p := range a.procs {
		p.Kill()
	}
	if a.stop != nil {
		a.stop()
	}
}
