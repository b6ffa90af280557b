package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cortexfs/ctx/actors/tool"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/ipc"
)

// envelopeEngine is the sdk-envelope-v1 engine: one agent process per
// step, one envelope on its stdin, its JSONL lines read back (X2–X9).
type envelopeEngine struct {
	hooks     // halt, concluding, end: the run ends the step's process with its others (end.go)
	r         *Actor
	step      int
	gen       int        // current step generation
	p         *proc.Proc // the step's live agent process, if any
	deltas    reply
	call      *envelope.Line // the step's tool call
	stepBytes int            // stdout bytes of the current step
	obs       *envelope.Observation
}

func (e *envelopeEngine) start(c actor.Context) { e.startStep(c) }

func (e *envelopeEngine) receive(c actor.Context, m any) bool {
	switch m := m.(type) {
	case *stepStarted:
		e.onStepStarted(c, m)
	case *agentLine:
		e.onAgentLine(c, m)
	case *agentExited:
		e.onAgentExited(c, m)
	default:
		return false
	}
	return true
}

// toolResult is the next step's observation.
func (e *envelopeEngine) toolResult(c actor.Context, r *tool.Result) {
	e.obs = &envelope.Observation{ToolCallID: r.CallID, Name: r.Name, Status: r.Status, Content: r.Content, Truncated: r.Truncated}
	e.step++
	e.startStep(c)
}

// startStep starts the next SDK process with the envelope on its stdin.
// In phase running only.
func (e *envelopeEngine) startStep(c actor.Context) {
	a := e.r
	if a.phase != phaseRunning { // spec: X6 — cancellation checked before every process
		return
	}
	if !a.takeStart(c) {
		return
	}
	// Everything that touches files or forks runs off the actor: the tool
	// context (session state tsh may have changed during the run), the
	// envelope, the bwrap start; the outcome comes back as stepStarted,
	// followed by the process's lines and exit.
	agentEnv := a.view.AgentEnv(e.step)
	if a.prep != nil {
		maps.Copy(agentEnv, a.prep.Env) // spec: W7 — exactly when the window is known
	}
	view := a.view
	opts := proc.Options{Bwrap: a.cfg.Bwrap, Roots: a.cfg.Roots, Ident: a.view.Identity(),
		Enter: a.group.EnterFunc(), Place: a.group.PlaceFunc()} // Born in the run's cgroup (v1), else placed while held
	env := envelope.Envelope{Schema: envelope.Schema, Run: a.spec.RunID, Step: e.step, Input: a.spec.Input,
		HistoryMessages: a.spec.History, Observation: e.obs}
	prep := a.prep
	file := filepath.Join(a.cfg.Layout.SessionDir(a.spec.Agent, a.spec.Scope, a.spec.Session), toolctx.StateFileName)
	e.gen++
	a.startPending = true
	e.deltas.Reset()
	e.stepBytes = 0
	e.call = nil
	self, root, gen, cfg, log, start := c.Self(), c.ActorSystem().Root, e.gen, a.cfg, a.log, a.startProc
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
			// and the tool context as rendered for this step.
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
		// The view is built here, off the actor (it walks the
		// workspace); its descriptors close once bwrap has them, its
		// placeholders go once the step ended.
		p, held, err := sandbox.Start(actx, view, []string{view.AgentPath()}, agentEnv, func(spec bwrap.Spec) (*proc.Proc, error) {
			opts.Spec = spec
			return start(opts)
		})
		if err != nil {
			root.Send(self, &stepStarted{gen: gen, err: err, code: ipc.CodeSandboxUnavailable})
			return
		}
		warnings = append(warnings, held.Warnings()...)
		// If this incarnation crashes or stops before it
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
func (e *envelopeEngine) onStepStarted(c actor.Context, m *stepStarted) {
	a := e.r
	if m.gen != e.gen {
		// A start this incarnation did not ask for (its crashed
		// predecessor's): never let it run.
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
	e.p = m.p
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
	r := stepReaders.Get().(*bufio.Reader)
	r.Reset(p.Stdout)
	defer func() { r.Reset(nil); stepReaders.Put(r) }()
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

// stepReaders are the 64 KiB readers of agent steps' output, reused: a
// new one per step was 64 KiB allocated and zeroed a send. readLine
// copies every line out of the buffer, so nothing refers to it after.
var stepReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

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
func (e *envelopeEngine) onAgentLine(c actor.Context, m *agentLine) {
	a := e.r
	if m.gen != e.gen || a.phase != phaseRunning {
		return // spec: X12 — nothing the agent prints after the conclusion is recorded
	}
	if m.err != nil {
		e.invalidOutput(c, m.err.Error())
		return
	}
	e.stepBytes += len(m.line)
	if len(bytes.TrimSpace(m.line)) == 0 {
		return // blank lines carry nothing
	}
	if e.call != nil { // spec: X9 — any frame after a tool_call
		e.invalidOutput(c, "output after the tool_call")
		return
	}
	ln, err := envelope.ParseLine(m.line)
	if err != nil { // spec: X9
		e.invalidOutput(c, err.Error())
		return
	}
	switch ln.Type {
	case "delta":
		e.deltas.WriteString(ln.Text)
		a.emit(c, &ipc.Frame{Type: ipc.TypeDelta, Text: ln.Text})
	case "tool_call":
		if err := ipc.CheckID("tool_call id", ln.ID); err != nil {
			e.invalidOutput(c, err.Error())
			return
		}
		if a.seenCalls[ln.ID] { // spec: X6 — a replayed call id is refused before authorization
			e.invalidOutput(c, fmt.Sprintf("tool_call id %q was already used in this run", ln.ID))
			return
		}
		e.call = ln
	case "usage":
		// An executable agent may report its model use; it is
		// summed into the done frame's usage, and into usage_by_model under
		// the definition's preferred .d/model when it has one.
		u := &provider.Usage{Input: ln.Usage.Input, Output: ln.Usage.Output, CacheRead: ln.Usage.CacheRead, CacheWrite: ln.Usage.CacheWrite}
		model := ""
		if a.def != nil && len(a.def.Models) > 0 {
			model = a.def.Models[0]
		}
		a.addUsage(model, u)
	}
}

// invalidOutput concludes the run: the step broke X9, and with the run
// concluded its remaining output is ignored.
func (e *envelopeEngine) invalidOutput(c actor.Context, why string) {
	if e.p != nil {
		e.p.Kill()
	}
	e.r.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeInvalidAgentOutput, "%s", why)), ipc.StatusError)
}

func (e *envelopeEngine) onAgentExited(c actor.Context, m *agentExited) {
	a := e.r
	if m.gen == e.gen {
		e.p = nil
	}
	a.reap()
	// A cancelled run (and one whose step broke X9) is concluded: it may
	// now be able to stop.
	if m.gen != e.gen || a.phase != phaseRunning { // spec: X6 — and after every process
		a.maybeStop(c)
		return
	}
	if serr := proc.SandboxFailure(m.code, e.stepBytes, m.stderr); serr != nil && e.call == nil {
		// bwrap could not build the sandbox: fail closed and name the fix.
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(ipc.CodeSandboxUnavailable, serr)), ipc.StatusError)
		return
	}
	if e.call == nil {
		if m.err == nil && m.code == 0 {
			a.concludeReply(c, e.deltas.b.String(), e.deltas.total)
			return
		}
		e.invalidOutput(c, fmt.Sprintf("agent exited with status %d without a tool_call%s", m.code, stderrTail(m.stderr)))
		return
	}
	call := e.call
	a.seenCalls[call.ID] = true
	if !a.takeCall(c) {
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

type stepStarted struct {
	gen      int
	p        *proc.Proc
	err      error
	code     string   // wire code when err is set
	warnings []string // what this step's render left out or cut
}

type agentLine struct {
	gen  int
	line []byte
	err  error // a read error or an over-long line
}

type agentExited struct {
	gen    int
	code   int
	err    error
	stderr []byte
}
