package acpbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// Options are what an Agent needs from its host.
type Options struct {
	// Agent is the ctx agent's name.
	Agent string
	// Dial opens a fresh connection to the agent socket (one per prompt,
	// load and cancel), starting the daemon when needed.
	Dial func(ctx context.Context) (*client.Conn, error)
	// Redial opens one again after a drop, without starting a daemon (one
	// that went away is reported, not replaced); nil: a drop ends the prompt.
	Redial func(ctx context.Context) (*client.Conn, error)
	// CheckCwd judges an editor's cwd as a workspace (an existing directory
	// the owner can write, not the home or CTX_ROOT …) and returns its real
	// path, or an error saying why not.
	CheckCwd func(cwd string) (string, error)
	// SessionExists reports whether a private ctx session of the agent has
	// a directory (session/load of anything else is refused).
	SessionExists func(session string) bool
	// MCPRules judges an editor's mcpServers (session/new, session/load);
	// nil refuses any server.
	MCPRules func(workspace string) (MCPRules, error)
	// SaveMCP makes the judged servers those of the session (SaveMCP with
	// the layout); nil refuses any server.
	SaveMCP func(session string, es *EditorServers) error
	// Version is ctx's version for initialize's agentInfo.
	Version string
	Log     *slog.Logger
}

// Agent is ctx as an ACP agent. Its methods are called by the SDK's
// connection goroutines; its state is guarded by mu.
type Agent struct {
	opt  Options
	conn *acp.AgentSideConnection

	mu       sync.Mutex
	sessions map[string]*session
	prompts  sync.WaitGroup
}

// session is what this process knows of one ACP session.
type session struct {
	name      string // the ctx session (= the ACP sessionId)
	workspace string // the editor's cwd, judged
	turns     int    // user frames seen (history and live)
	lastID    string // the id and text of the last user frame
	lastText  string
	loaded    bool // session/load ran and no prompt yet: a retry may follow
	busy      bool
}

var (
	_ acp.Agent       = (*Agent)(nil)
	_ acp.AgentLoader = (*Agent)(nil)
)

// NewAgent makes the bridge; SetConnection must follow before serving.
func NewAgent(opt Options) *Agent {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	return &Agent{opt: opt, sessions: map[string]*session{}}
}

// SetConnection binds the SDK connection the bridge sends updates and
// permission requests on.
func (a *Agent) SetConnection(c *acp.AgentSideConnection) { a.conn = c }

// Wait waits for the prompts in flight to finish (each answers cancelled
// once its context is gone) or for d to pass.
func (a *Agent) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { a.prompts.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Initialize answers honestly: sessions can be loaded; prompts take text
// and resource links (every agent must), not images, audio or embedded
// context beyond text; no authentication.
func (a *Agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{Image: false, Audio: false, EmbeddedContext: false},
			// stdio servers always; http where the agent's network grants
			// reach the URL (else session/new says why); no SSE.
			McpCapabilities: acp.McpCapabilities{Http: true, Sse: false},
		},
		AgentInfo:   &acp.Implementation{Name: "ctx", Title: acp.Ptr("ctx agent " + a.opt.Agent), Version: a.opt.Version},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

// Authenticate is never needed: the agent socket authenticates by uid.
func (a *Agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// NewSession makes a fresh ctx session named "acp-" and 16 random hex
// digits; the ACP sessionId is that name. The editor's cwd becomes the
// workspace of every prompt, judged now like any workspace. The session is
// durable when this answers: the pinned resume op makes the daemon's
// session store create its directory and log, so a session/load from
// another process finds it before any prompt. The editor's mcpServers
// become the session's own MCP servers, or the answer is an error naming
// the one ctx cannot honour (nothing is made then).
func (a *Agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	ws, err := a.workspace(p.Cwd)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	es, err := a.editorServers(ws, p.McpServers)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "acp-" + hex.EncodeToString(b[:])
	if _, err := a.resume(ctx, name, nil); err != nil { // spec: L4 — the session exists apart from this process
		return acp.NewSessionResponse{}, err
	}
	if err := a.saveServers(name, es); err != nil {
		return acp.NewSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[name] = &session{name: name, workspace: ws}
	a.mu.Unlock()
	a.opt.Log.Info("acp session/new", "session", name, "workspace", ws, "mcp_servers", len(es.Servers))
	return acp.NewSessionResponse{SessionId: acp.SessionId(name)}, nil
}

// editorServers judges the editor's mcpServers.
func (a *Agent) editorServers(ws string, list []acp.McpServer) (*EditorServers, error) {
	if len(list) == 0 {
		return &EditorServers{}, nil
	}
	if a.opt.MCPRules == nil || a.opt.SaveMCP == nil {
		return nil, MCPError(serverName(list[0]), "this ctx acp takes no MCP servers")
	}
	r, err := a.opt.MCPRules(ws)
	if err != nil {
		return nil, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("mcpServers: %v", err)})
	}
	return ConvertMCP(list, r)
}

// saveServers makes es the session's servers (none: any earlier removed).
func (a *Agent) saveServers(name string, es *EditorServers) error {
	if a.opt.SaveMCP == nil {
		return nil
	}
	if err := a.opt.SaveMCP(name, es); err != nil {
		return acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return nil
}

// resume sends the pinned resume op for the private session name and
// hands each stored frame to each (nil: drops them) until caught_up. For
// a session with no directory yet the daemon's store creates it (the
// directory, an empty events.jsonl), which is what makes session/new
// durable.
func (a *Agent) resume(ctx context.Context, name string, each func(*ipc.Frame) error) (int, error) {
	c, err := a.opt.Dial(ctx)
	if err != nil {
		return 0, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("agent %s: %v", a.opt.Agent, err)})
	}
	defer c.Close()
	if err := c.Send(client.Resume(name, "private")); err != nil {
		return 0, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("resume %s: %v", name, err)})
	}
	n := 0
	for {
		f, _, err := c.Next()
		if err != nil {
			return n, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("resume %s: %v", name, err)})
		}
		if f.Type == ipc.TypeCaughtUp {
			return n, nil
		}
		if f.Type == ipc.TypeError && f.Run == "" {
			return n, RequestError(f.Code, f.Message)
		}
		n++
		if each != nil {
			if err := each(f); err != nil {
				return n, err
			}
		}
	}
}

func (a *Agent) workspace(cwd string) (string, error) {
	ws, err := a.opt.CheckCwd(cwd)
	if err != nil {
		return "", acp.NewInvalidParams(map[string]any{"cwd": cwd, "error": err.Error()})
	}
	return ws, nil
}

// LoadSession resumes the ctx session named by the sessionId: its stored
// frames are replayed as session/update notifications before the answer.
// The live rest of a run still active is not followed (its outcome shows
// at the next load).
func (a *Agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	name := string(p.SessionId)
	if err := layout.CheckName("session", name); err != nil {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"sessionId": name, "error": err.Error()})
	}
	if a.opt.SessionExists != nil && !a.opt.SessionExists(name) {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"sessionId": name, "error": "no such session"})
	}
	ws, err := a.workspace(p.Cwd)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	es, err := a.editorServers(ws, p.McpServers)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s := &session{name: name, workspace: ws, loaded: true}
	_, err = a.resume(ctx, name, func(f *ipc.Frame) error {
		if f.Type == ipc.TypeUser {
			s.turns++
			s.lastID, s.lastText = f.ID, f.Text
		}
		for _, u := range Updates(f, true) {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
				return fmt.Errorf("session/load %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	// The servers the editor sends now are the session's from now on.
	if err := a.saveServers(name, es); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[name] = s
	a.mu.Unlock()
	a.opt.Log.Info("acp session/load", "session", name, "turns", s.turns)
	return acp.LoadSessionResponse{}, nil
}

// Cancel needs nothing more: the SDK cancels the prompt's context, and the
// prompt sends the pinned cancel op and answers cancelled after done.
func (a *Agent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

// Prompt sends the prompt as one `send` and streams its frames as updates
// until done. The request id comes from RequestID (see PromptKey); right
// after a session/load, a prompt equal to the session's last one, whose id
// it would have had, reuses that id: an editor retrying after a lost
// connection gets the stored answer replayed, and nothing runs twice.
func (a *Agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.prompts.Add(1)
	defer a.prompts.Done()
	name := string(p.SessionId)
	text, err := PromptText(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	a.mu.Lock()
	s := a.sessions[name]
	if s == nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"sessionId": name, "error": "unknown session: session/new or session/load first"})
	}
	if s.busy {
		a.mu.Unlock()
		return acp.PromptResponse{}, acp.NewInvalidRequest(map[string]any{"sessionId": name, "error": "a prompt of this session is still running"})
	}
	s.busy = true
	id := RequestID(name, PromptKey(p, s.turns, text))
	if s.loaded && s.turns > 0 && s.lastText == text && s.lastID == RequestID(name, PromptKey(p, s.turns-1, text)) {
		id = s.lastID // spec: P4 — the retry replays
	}
	s.loaded = false
	ws := s.workspace
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		s.busy = false
		a.mu.Unlock()
	}()
	r := &promptRun{a: a, sid: p.SessionId, s: s, id: id}
	return r.run(ctx, ws, text)
}

// promptRun is one session/prompt in flight.
type promptRun struct {
	a   *Agent
	sid acp.SessionId
	s   *session
	id  string

	fw *client.Follower // the prompt's run, followed across drops
}

func (r *promptRun) run(ctx context.Context, ws, text string) (acp.PromptResponse, error) {
	a := r.a
	c, err := a.opt.Dial(ctx)
	if err != nil {
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("agent %s: %v", a.opt.Agent, err)})
	}
	// The run is followed across drops (slow_client, a lost connection):
	// the same request again replays what was recorded (P4). Its context is
	// not the prompt's: a cancel still wants the run's last frames.
	fw, err := client.Follow(context.WithoutCancel(ctx), c, client.Send(r.id, r.s.name, "private", ws, text), a.opt.Redial)
	if err != nil {
		c.Close()
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("send: %v", err)})
	}
	r.fw = fw
	defer fw.Close()
	// Updates keep flowing after a cancel (the run's last frames), so they
	// are sent on a context the cancel does not end.
	out := context.WithoutCancel(ctx)
	var run string
	var errFrame *ipc.Frame
	cancelWanted, cancelSent := false, false
	asks := map[string]context.CancelFunc{}
	defer func() {
		for _, cancel := range asks {
			cancel()
		}
	}()
	done := ctx.Done()
	printed := false
	for {
		var it client.Item
		select {
		case <-done:
			done = nil // once
			cancelWanted = true
			if run != "" && !cancelSent {
				cancelSent = true
				_ = r.fw.Cancel(run)
			}
			continue
		case it = <-fw.Items():
		}
		if it.Err != nil {
			return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": it.Err.Error()})
		}
		f := it.Frame
		if f.Run != "" && run == "" && (f.Type == ipc.TypeUser || f.Type == ipc.TypeStart) {
			run = f.Run
			if cancelWanted && !cancelSent {
				cancelSent = true
				_ = r.fw.Cancel(run)
			}
		}
		if f.Type == ipc.TypeUser && !f.Replay {
			a.mu.Lock()
			r.s.turns++
			r.s.lastID, r.s.lastText = f.ID, f.Text
			a.mu.Unlock()
		}
		switch f.Type {
		case ipc.TypeApprovalRequest:
			if f.Replay {
				continue
			}
			actx, cancel := context.WithCancel(out)
			if f.TimeoutMS > 0 {
				// The daemon's own timeout settles first (its approval frame
				// withdraws the question); this one only bounds a lost answer.
				actx, cancel = context.WithTimeout(out, time.Duration(f.TimeoutMS)*time.Millisecond+5*time.Second)
			}
			if prev := asks[f.ID]; prev != nil {
				prev()
			}
			asks[f.ID] = cancel
			go r.ask(actx, f)
			continue
		case ipc.TypeApproval:
			if cancel := asks[f.ID]; cancel != nil {
				cancel() // answered, timed out or refused: the editor's question is moot
				delete(asks, f.ID)
			}
		case ipc.TypeDelta:
			printed = printed || f.Text != ""
		case ipc.TypeAssistant:
			if !printed && f.Text != "" {
				// An agent that streamed nothing still has its conclusion shown.
				f = &ipc.Frame{Type: ipc.TypeDelta, Run: f.Run, Text: f.Text}
			}
		case ipc.TypeError:
			if f.Run == "" {
				if run != "" {
					// An answer to our cancel or approve line that lost a race
					// with the run (not_found, a settled approval): done follows.
					a.opt.Log.Info("acp: daemon refused a line during the run", "run", run, "code", f.Code, "message", f.Message)
					continue
				}
				return acp.PromptResponse{}, RequestError(f.Code, f.Message)
			}
			errFrame = f
		case ipc.TypeDone:
			if f.Run != run && run != "" {
				continue
			}
			o := Conclude(f.Status, errFrame)
			if cancelWanted && f.Status != "ok" {
				o = Outcome{Stop: acp.StopReasonCancelled} // ACP: a cancelled prompt answers cancelled
			}
			if o.Err != nil {
				return acp.PromptResponse{}, o.Err
			}
			return acp.PromptResponse{StopReason: o.Stop}, nil
		}
		for _, u := range Updates(f, false) {
			if err := a.conn.SessionUpdate(out, acp.SessionNotification{SessionId: r.sid, Update: u}); err != nil {
				a.opt.Log.Warn("acp session/update", "session", r.s.name, "err", err)
			}
		}
	}
}

// Permission option ids offered for an approval_request.
const (
	OptionAllow  = "allow-once"
	OptionReject = "reject-once"
)

// ask puts one approval_request to the editor and answers the daemon with
// the pinned approve line: allow-once → allow_once, reject-once or a
// cancelled outcome → deny, no answer (the editor gone, stdin closed, the
// question timed out or withdrawn) → eof. spec: A2, A3
func (r *promptRun) ask(ctx context.Context, f *ipc.Frame) {
	args := f.Args
	if args == nil {
		args = []string{}
	}
	raw := map[string]any{"name": f.Name, "args": args}
	if f.MCP != nil {
		raw["mcp"] = f.MCP
	}
	resp, err := r.a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: r.sid,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: acp.ToolCallId(f.ID),
			Title:      acp.Ptr(ToolTitle(f.Name, args)),
			Kind:       acp.Ptr(ToolKind(f.Name, args)),
			Status:     acp.Ptr(acp.ToolCallStatusPending),
			RawInput:   raw,
		},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow once", OptionId: OptionAllow},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: OptionReject},
		},
	})
	decision := Decision(resp, err)
	if errors.Is(ctx.Err(), context.Canceled) && err != nil {
		return // the daemon already settled it (approval frame seen)
	}
	if serr := r.fw.Approve(f.Run, f.ID, decision); serr != nil {
		r.a.opt.Log.Warn("acp approve", "run", f.Run, "call", f.ID, "err", serr)
	}
}

// Decision maps a session/request_permission answer to the approve line's
// decision.
func Decision(resp acp.RequestPermissionResponse, err error) string {
	switch {
	case err != nil:
		return "eof"
	case resp.Outcome.Selected != nil && string(resp.Outcome.Selected.OptionId) == OptionAllow:
		return ipc.DecisionAllowOnce
	}
	return ipc.DecisionDeny
}

// The methods below are ACP session features ctx does not offer; the SDK
// answers method-not-found for the unstable ones this type lacks.

// CloseSession forgets the session in this process; its files stay.
func (a *Agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	delete(a.sessions, string(p.SessionId))
	a.mu.Unlock()
	return acp.CloseSessionResponse{}, nil
}

// ListSessions is not offered (no sessionCapabilities.list).
func (a *Agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

// ResumeSession is not offered (session/load is).
func (a *Agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

// SetSessionConfigOption is not offered.
func (a *Agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

// SetSessionMode is not offered (no modes).
func (a *Agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}
