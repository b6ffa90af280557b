package run

// acp-v1 runs: the agent process is an Agent Client
// Protocol agent, started once per run in the run's sandbox; the run is its
// ACP client (internal/acpclient over github.com/coder/acp-go-sdk):
// initialize, session/new, one session/prompt with the send's input. Every
// request and wait happens in goroutines that send messages back to the
// actor; Receive never blocks.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/cortexfs/ctx/internal/envelope"

	"github.com/asynkron/protoactor-go/actor"
	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/acpclient"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/viewfs"
	"github.com/cortexfs/ctx/ipc"
)

// errNoAnswer: the agent did not answer initialize or session/new in time.
var errNoAnswer = errors.New("the ACP agent did not answer")

// errIdle: the agent went silent during the prompt for CTX_ACP_IDLE.
var errIdle = errors.New("the ACP agent went idle")

// acpState is the live part of an acp-v1 run, owned by the actor.
type acpState struct {
	p       *proc.Proc
	conn    *acp.ClientSideConnection
	session acp.SessionId
	stop    context.CancelFunc // ends the conversation's requests
	pending map[string]func(decision string)
	open    map[string]string // terminal call id → name, until its result
	backed  map[string]bool   // reported calls a terminal already backs
	order   map[string]int    // reported call id → the order it was recorded in
	terms   int
}

// ACPSecretsFile is where an acp-v1 agent's secret env values live:
// home/<uid>/secrets/agent/<name>.env (owner-only K=V lines); .d/acp.json
// names the keys.
func ACPSecretsFile(l layout.Layout, agent string) string {
	return filepath.Join(l.UserHome(), "secrets", "agent", agent+".env")
}

// startACP starts the agent process and the ACP conversation off the
// actor. It counts as one of the run's process starts (X6).
// In phase running only.
func (a *Actor) startACP(c actor.Context) {
	if a.phase != phaseRunning || !a.takeStart(c) {
		return
	}
	ctx, stop := context.WithCancel(a.ctx)
	a.acp = &acpState{stop: stop, pending: map[string]func(string){}, open: map[string]string{}, backed: map[string]bool{}, order: map[string]int{}}
	env := a.view.AgentEnv(0)
	if a.prep != nil {
		maps.Copy(env, a.prep.Env) // spec: W7
	}
	delete(env, "CTX_STEP") // one process for the whole run: there are no steps
	argv := []string{a.view.AgentPath()}
	var binds, keys []string
	if l := a.def.ACP; l != nil {
		if l.Command != "" {
			argv = []string{l.Command}
			binds = append([]string{l.Command}, l.Binds...)
		} else {
			binds = l.Binds
		}
		argv = append(argv, l.Args...)
		keys = l.Env
	}
	if _, set := env["PATH"]; !set { // .d/env may set PATH; it wins, as for other agents
		env["PATH"] = agentPath(argv[0])
	}
	view, cfg, log, input, idle := a.view, a.cfg, a.log, a.spec.Input, a.cfg.ACPIdle
	timeout := cfg.ACPTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	opts := proc.Options{Bwrap: cfg.Bwrap, Roots: cfg.Roots, Ident: view.Identity(), StdinPipe: true,
		Enter: a.group.EnterFunc(), Place: a.group.PlaceFunc()}
	self, root := c.Self(), c.ActorSystem().Root
	send := func(m any) { root.Send(self, m) }
	terms := &terminals{run: a.spec.RunID, view: view, cfg: cfg, group: a.group, send: send, ctx: ctx, m: map[string]*term{}}
	a.startPending = true
	cfg.Procs.Add(1)
	go func() {
		defer cfg.Procs.Done()
		if len(keys) > 0 {
			vals, err := mcphost.ReadEnvFile(cfg.Layout, ACPSecretsFile(cfg.Layout, view.Def.Name))
			if err != nil {
				send(&acpStarted{err: fmt.Errorf("acp-v1 secrets: %w", err), code: ipc.CodeAgentInvalid})
				return
			}
			for _, k := range keys {
				if v, ok := vals[k]; ok {
					env[k] = v
				}
			}
		}
		spec, held, err := view.Build(argv, env)
		if err != nil {
			send(&acpStarted{err: err, code: ipc.CodeSandboxUnavailable})
			return
		}
		for _, b := range binds {
			if _, err := os.Stat(b); err != nil {
				held.Ended()
				send(&acpStarted{err: fmt.Errorf("the agent's installation %s is gone (%v): install it again and recreate the agent", b, err), code: ipc.CodeAgentFailed})
				return
			}
			if !isSystemPath(b) {
				spec.Mounts = append(spec.Mounts, bwrap.Mount{Src: b, Dst: b}) // read-only
			}
		}
		opts.Spec = spec
		p, err := proc.Start(opts)
		held.Started()
		if err != nil {
			held.Ended()
			send(&acpStarted{err: err, code: ipc.CodeSandboxUnavailable})
			return
		}
		// Every fs/* request resolves in the sandbox's own root, pinned on
		// first use and closed when the run's process ends: the view is the
		// one authority for files touched on the agent's behalf.
		vroot := viewfs.New(p.Pid())
		client := acpclient.New(acpclient.Host{
			View:  vroot,
			Frame: func(f *ipc.Frame) { send(&acpFrame{f: f}) },
			Approve: func(rctx context.Context, callID, name string, args []string) bool {
				return ask(rctx, ctx, send, callID, name, args)
			},
			Terminals: terms,
			Flood:     func() { send(&acpFlood{}) },
		})
		conn := acp.NewClientSideConnection(client, p.Stdin, client.Throttle(p.Stdout))
		conn.SetLogger(log.With("component", "acp-sdk"))
		send(&acpStarted{p: p, conn: conn})
		cfg.Procs.Add(1)
		go func() {
			defer cfg.Procs.Done()
			<-conn.Done()
			_ = p.Wait()
			held.Ended()
			vroot.Close()
			send(&acpExited{code: p.ExitCode(), stderr: p.Stderr()})
		}()
		stopReason, err := converse(ctx, conn, client, send, view.WorkDir(), input, timeout, idle)
		if err != nil && !errors.Is(err, errNoAnswer) && !errors.Is(err, errIdle) {
			// The agent is likely gone: give its stderr a moment to be complete.
			select {
			case <-p.Done():
			case <-time.After(time.Second):
			}
		}
		send(&acpEnded{stop: stopReason, err: err, stderr: p.Stderr()})
	}()
}

// converse is the client side of one run: initialize and session/new
// (bounded by timeout), then the prompt (bounded by the run: cancel, and
// by idle: an agent silent that long ends it with errIdle).
func converse(ctx context.Context, conn *acp.ClientSideConnection, client *acpclient.Client, send func(any), cwd, input string, timeout, idle time.Duration) (acp.StopReason, error) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	noAnswer := func(what string, err error) error {
		if errors.Is(hctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w to %s within %s (CTX_ACP_TIMEOUT)", errNoAnswer, what, timeout)
		}
		return fmt.Errorf("acp %s: %w", what, err)
	}
	if _, err := conn.Initialize(hctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientInfo:         &acp.Implementation{Name: "ctx", Version: "1"},
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true}}); err != nil {
		return "", noAnswer("initialize", err)
	}
	s, err := conn.NewSession(hctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		return "", noAnswer("session/new", err)
	}
	send(&acpSession{id: s.SessionId})
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	var idled atomic.Bool
	if idle > 0 {
		go func() {
			t := time.NewTicker(min(idle/4, time.Second))
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
					if client.Idle() >= idle {
						idled.Store(true)
						pcancel()
						return
					}
				}
			}
		}()
	}
	r, err := conn.Prompt(pctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(input)}})
	pcancel()
	client.Flush() // a call announced and never said more is recorded all the same
	if idled.Load() {
		return "", fmt.Errorf("%w: no session/update and no request from the agent for %s during the prompt (CTX_ACP_IDLE)", errIdle, idle)
	}
	if err != nil {
		return "", fmt.Errorf("acp session/prompt: %w", err)
	}
	return r.StopReason, nil
}

// agentPath is an acp-v1 agent's PATH when .d/env sets none: the one its
// terminals get (agents spawn shells and tools by name), with the
// directory of the agent's node first when that node is installed outside
// /usr — its launcher may re-exec `node` by name.
func agentPath(cmd string) string {
	if filepath.Base(cmd) == "node" && !isSystemPath(cmd) && filepath.IsAbs(cmd) {
		return filepath.Dir(cmd) + ":" + terminalPath
	}
	return terminalPath
}

// ask hands a permission request to the actor and waits for its answer
// (on the SDK's goroutine, never the actor's).
func ask(rctx, run context.Context, send func(any), callID, name string, args []string) bool {
	reply := make(chan bool, 1)
	send(&acpPermission{callID: callID, name: name, args: args, reply: reply})
	select {
	case ok := <-reply:
		return ok
	case <-rctx.Done():
	case <-run.Done():
	}
	return false
}

func isSystemPath(p string) bool {
	for _, d := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/"} {
		if len(p) >= len(d) && p[:len(d)] == d {
			return true
		}
	}
	return false
}

func (a *Actor) onACPStarted(c actor.Context, m *acpStarted) {
	a.startPending = false
	if m.err != nil {
		a.conclude(c, ipc.ErrorFrame("", ipc.WithCode(m.code, m.err)), ipc.StatusError)
		a.maybeStop(c)
		return
	}
	a.acp.p, a.acp.conn = m.p, m.conn
	a.procs = append(a.procs, m.p)
	if a.phase.concluded() {
		a.endACP()
	}
}

func (a *Actor) onACPSession(m *acpSession) {
	if a.acp != nil {
		a.acp.session = m.id
	}
}

// onACPFrame records what the agent reported. A tool call counts toward
// the 8-call bound (X6): the 9th is not recorded; the session is
// cancelled and the run concludes limit_exceeded.
func (a *Actor) onACPFrame(c actor.Context, m *acpFrame) {
	if a.phase.concluded() {
		// spec: X12 — nothing more is recorded. A terminal's result comes
		// once its process is gone: the run may now be able to stop.
		a.maybeStop(c)
		return
	}
	f := m.f
	switch f.Type {
	case ipc.TypeDelta:
		a.deltas.WriteString(f.Text)
	case ipc.TypeToolCall:
		if f.Name == "acp" && !a.countCall(c) {
			return
		}
		a.acp.open[f.CallID] = f.Name // until its result; closeACPCalls ends what is left
		a.acp.order[f.CallID] = len(a.acp.order)
	case ipc.TypeToolResult:
		delete(a.acp.open, f.CallID)
	}
	a.emit(c, f)
}

// countCall takes one of the run's tool calls; false (and the run
// concluded) past the run's call bound (callBound).
func (a *Actor) countCall(c actor.Context) bool {
	return a.takeCall(c)
}

// onACPPermission: auto mode allows once; ask mode goes through the
// session's approval path (A2) with the agent's tool call id.
func (a *Actor) onACPPermission(c actor.Context, m *acpPermission) {
	if a.phase.concluded() || a.acp == nil {
		m.reply <- false
		return
	}
	if a.def.Approval != "ask" {
		m.reply <- true
		return
	}
	if ipc.CheckID("tool call id", m.callID) != nil || a.acp.pending[m.callID] != nil {
		m.reply <- false // an id the approve line cannot name, or one already asked
		return
	}
	a.acp.pending[m.callID] = func(d string) { m.reply <- d == "allow_once" }
	c.Request(c.Parent(), &ApprovalNeeded{Run: a.spec.RunID, CallID: m.callID, Name: m.name, Args: nonNil(m.args)})
}

func (a *Actor) onACPApprovalAnswer(m *ApprovalAnswer) {
	if f := a.acp.pending[m.CallID]; f != nil {
		delete(a.acp.pending, m.CallID)
		f(m.Decision)
	}
}

// onACPTerminal grants or refuses a terminal: a tool-like call, counted,
// recorded as a tool_call named "terminal", approved in ask mode.
func (a *Actor) onACPTerminal(c actor.Context, m *acpTerminal) {
	if a.phase.concluded() || a.acp == nil {
		m.reply <- ""
		return
	}
	// A terminal while a reported call is open (announced, not ended, not
	// yet backed by a terminal) is that call's terminal: the call was
	// counted when reported, so the command is not counted again. Each
	// reported call backs at most one terminal, so terminals never
	// outnumber counted calls. spec: X6 (the bound counts calls once)
	if backs := a.openReported(); backs != "" {
		a.acp.backed[backs] = true
	} else if !a.countCall(c) {
		m.reply <- ""
		return
	}
	a.acp.terms++
	id := fmt.Sprintf("term-%d", a.acp.terms)
	a.acp.open[id] = "terminal"
	a.emit(c, &ipc.Frame{Type: ipc.TypeToolCall, CallID: id, Name: "terminal", Args: nonNil(m.argv)})
	if a.def.Approval != "ask" {
		m.reply <- id
		return
	}
	a.acp.pending[id] = func(d string) {
		if d == "allow_once" {
			m.reply <- id
			return
		}
		delete(a.acp.open, id)
		a.emitLater(c, &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: "terminal", Status: "denied", Content: "denied: " + d})
		m.reply <- ""
	}
	c.Request(c.Parent(), &ApprovalNeeded{Run: a.spec.RunID, CallID: id, Name: "terminal", Args: nonNil(m.argv)})
}

// openReported is the earliest reported call still open that no terminal
// backs yet; "" when there is none.
func (a *Actor) openReported() string {
	var ids []string
	for id, name := range a.acp.open {
		if name == "acp" && !a.acp.backed[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	sort.Slice(ids, func(i, j int) bool { return a.acp.order[ids[i]] < a.acp.order[ids[j]] })
	return ids[0]
}

// emitLater emits unless the run is over (an answer arriving late).
func (a *Actor) emitLater(c actor.Context, f *ipc.Frame) {
	if !a.phase.concluded() {
		a.emit(c, f)
	}
}

func (a *Actor) onACPProc(m *acpProc) {
	a.procs = append(a.procs, m.p)
	if a.phase.concluded() {
		m.p.Terminate(a.ctx, a.cfg.CancelGrace)
	}
}

func (a *Actor) onACPFlood(c actor.Context) {
	if a.phase.concluded() {
		return
	}
	a.cancelACPSession()
	a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeLimitExceeded,
		"the ACP agent sent more than %d session updates in one run", acpclient.MaxUpdates)), ipc.StatusError)
	a.endACP()
}

// onACPEnded concludes from the prompt's answer: end_turn (and the other
// normal stops) → assistant with the streamed text; refusal → denied; an
// error → a clear error with the agent's stderr tail.
func (a *Actor) onACPEnded(c actor.Context, m *acpEnded) {
	if a.phase.concluded() {
		return
	}
	if m.err != nil {
		code := ipc.CodeInvalidAgentOutput
		if errors.Is(m.err, errNoAnswer) || errors.Is(m.err, errIdle) {
			code = ipc.CodeAgentTimeout
		}
		if errors.Is(m.err, errIdle) {
			a.cancelACPSession() // session/cancel, then the usual ending
		}
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(code, "%v%s", m.err, stderrTail(m.stderr))), ipc.StatusError)
		a.endACP()
		return
	}
	switch m.stop {
	case acp.StopReasonEndTurn:
	case acp.StopReasonRefusal:
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeDenied, "the ACP agent refused the prompt (stop reason refusal)")), ipc.StatusError)
		return
	case acp.StopReasonCancelled:
		a.conclude(c, &ipc.Frame{Type: ipc.TypeCancelled}, ipc.StatusCancelled)
		return
	default:
		a.warn(c, []string{fmt.Sprintf("the ACP agent stopped with reason %q", m.stop)})
	}
	a.concludeReply(c, a.deltas.b.String(), a.deltas.total)
}

func (a *Actor) onACPExited(c actor.Context, m *acpExited) {
	a.reap()
	if !a.phase.concluded() {
		a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeInvalidAgentOutput,
			"the ACP agent exited with status %d before answering the prompt%s", m.code, stderrTail(m.stderr))), ipc.StatusError)
	}
	a.maybeStop(c)
}

// cancelACPSession sends session/cancel (off the actor, bounded).
func (a *Actor) cancelACPSession() {
	st := a.acp
	if st == nil || st.conn == nil || st.session == "" {
		return
	}
	conn, id := st.conn, st.session
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Cancel(ctx, acp.CancelNotification{SessionId: id})
	}()
}

// endACP fails every pending question and starts ending the agent and its
// terminals: SIGTERM, grace, SIGKILL (X12).
func (a *Actor) endACP() {
	st := a.acp
	if st == nil {
		return
	}
	for id, f := range st.pending {
		delete(st.pending, id)
		f("eof")
	}
	st.stop() // the conversation's requests end
	for _, p := range a.procs {
		p.Terminate(a.ctx, a.cfg.CancelGrace)
	}
}

// onACPCancel: session/cancel first, then the in-flight terminal calls get
// their cancelled results, before the run's cancelled conclusion.
func (a *Actor) onACPCancel(c actor.Context) {
	a.cancelACPSession()
	a.closeACPCalls(c, ipc.StatusCancelled)
}

// closeACPCalls gives every call still open — a terminal in flight, or a
// tool call the agent reported and never finished — its result, so no
// tool_call in the log is left without one: cancelled when the run was
// cancelled, an error otherwise.
func (a *Actor) closeACPCalls(c actor.Context, runStatus string) {
	if a.acp == nil || len(a.acp.open) == 0 {
		return
	}
	ids := make([]string, 0, len(a.acp.open))
	for id := range a.acp.open {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		name := a.acp.open[id]
		delete(a.acp.open, id)
		f := &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: name, Status: envelope.StatusCancelled, Content: "cancelled"}
		if runStatus != ipc.StatusCancelled {
			f.Status, f.Content = envelope.StatusError, "the run ended before the agent finished this call"
		}
		a.emit(c, f)
	}
}
