package run

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/acpclient"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/ipc"
)

// Terminal bounds: the output an agent may read back, and how
// many terminals one run may hold (each is also one of its 8 calls).
const (
	MaxTerminalOutput = 1 << 20
	// terminalPath is the PATH of a terminal command: the system
	// directories the sandbox shows (no host PATH, no tool directories).
	terminalPath = "/usr/local/bin:/usr/bin:/bin"
)

// terminals runs an ACP agent's terminal/* as sandboxed processes in the
// run's view (its own view: workspace, home, .d/mount; no tool files),
// in the run's cgroup, each a launch root like a tool call. Each command
// is granted by the actor first (the 8-call bound, approval in ask mode).
// Safe for the SDK's concurrent handlers.
type terminals struct {
	run   string
	view  sandbox.View
	cfg   *config.Config
	group *cgroup.Group
	send  func(any)
	ctx   context.Context // the run's conversation: cancelled when it ends
	start startFunc

	mu sync.Mutex
	m  map[string]*term
}

var _ acpclient.Terminals = (*terminals)(nil)

type term struct {
	id    string
	p     *proc.Proc
	limit int
	done  chan struct{}

	mu        sync.Mutex
	out       []byte
	truncated bool
	exit      *acp.TerminalExitStatus
}

func (t *term) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out = append(t.out, b...)
	if len(t.out) > t.limit {
		// ACP: truncated from the beginning, on a character boundary.
		cut := len(t.out) - t.limit
		for cut < len(t.out) && t.out[cut]&0xC0 == 0x80 {
			cut++
		}
		t.out = append([]byte(nil), t.out[cut:]...)
		t.truncated = true
	}
	return len(b), nil
}

func (ts *terminals) get(id string) (*term, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil {
		return nil, acp.NewInvalidParams(map[string]any{"terminalId": id, "error": "no such terminal"})
	}
	return t, nil
}

// Create asks the actor for the call, then starts the command.
func (ts *terminals) Create(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	argv := append([]string{p.Command}, p.Args...)
	if len(p.Args) == 0 && strings.ContainsAny(p.Command, " \t;|&$<>") {
		argv = []string{"/bin/sh", "-c", p.Command} // a command line, as agents often send it
	}
	reply := make(chan string, 1)
	ts.send(&acpTerminal{argv: argv, reply: reply})
	var id string
	select {
	case id = <-reply:
	case <-ctx.Done():
		return acp.CreateTerminalResponse{}, ctx.Err()
	case <-ts.ctx.Done():
		return acp.CreateTerminalResponse{}, acp.NewInternalError(map[string]any{"error": "the run is over"})
	}
	if id == "" {
		return acp.CreateTerminalResponse{}, acp.NewInvalidRequest(map[string]any{"error": "terminal refused: denied, the run's tool-call bound reached, or the run is over"})
	}
	fail := func(err error) (acp.CreateTerminalResponse, error) {
		ts.send(&acpFrame{f: &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: "terminal", Status: envelope.StatusError, Content: err.Error()}})
		return acp.CreateTerminalResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	v := ts.view
	if p.Cwd != nil && *p.Cwd != "" {
		if !path.IsAbs(*p.Cwd) {
			return fail(fmt.Errorf("cwd %q: not absolute", *p.Cwd))
		}
		v.Cwd = path.Clean(*p.Cwd)
	}
	env := v.ToolEnv()
	env["PATH"] = terminalPath
	for _, e := range p.Env {
		if envKeyOK(e.Name) {
			env[e.Name] = e.Value
		}
	}
	limit := MaxTerminalOutput
	if p.OutputByteLimit != nil && *p.OutputByteLimit >= 0 && *p.OutputByteLimit < limit {
		limit = *p.OutputByteLimit
	}
	pr, held, err := sandbox.Start(ts.ctx, v, argv, env, func(spec bwrap.Spec) (*proc.Proc, error) {
		return ts.start(proc.Options{Bwrap: ts.cfg.Bwrap, Spec: spec, Roots: ts.cfg.Roots, Ident: v.Identity(),
			Enter: ts.group.EnterFunc(), Place: ts.group.PlaceFunc()})
	})
	if err != nil {
		return fail(fmt.Errorf("sandbox: %w", err))
	}
	if ts.ctx.Err() != nil {
		pr.Kill() // the run ended while it started: the actor may be gone
	}
	t := &term{id: id, p: pr, limit: limit, done: make(chan struct{})}
	ts.mu.Lock()
	ts.m[id] = t
	ts.mu.Unlock()
	ts.send(&acpProc{p: pr})
	ts.cfg.Procs.Add(1)
	go func() {
		defer ts.cfg.Procs.Done()
		_, _ = io.Copy(t, pr.Stdout)
		werr := pr.Wait()
		held.Ended()
		code := pr.ExitCode()
		st := &acp.TerminalExitStatus{}
		if code >= 0 {
			st.ExitCode = &code
		} else {
			sig := "SIGKILL"
			st.Signal = &sig
		}
		var stdout []byte
		t.mu.Lock()
		t.exit = st
		stdout = append(stdout, t.out...)
		t.mu.Unlock()
		close(t.done)
		// The host-written result: stdout, then stderr on failure (interfaces.md).
		status, content, truncated := envelope.Normalize(stdout, pr.Stderr(), code == 0 && werr == nil)
		ts.send(&acpFrame{f: &ipc.Frame{Type: ipc.TypeToolResult, CallID: id, Name: "terminal", Status: status, Content: content, Truncated: truncated}})
	}()
	return acp.CreateTerminalResponse{TerminalId: id}, nil
}

// Output is the output so far (bounded, cut from the beginning) and the
// exit status once the command ended.
func (ts *terminals) Output(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	t, err := ts.get(p.TerminalId)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return acp.TerminalOutputResponse{Output: strings.ToValidUTF8(string(t.out), "\uFFFD"), Truncated: t.truncated, ExitStatus: t.exit}, nil
}

// Wait waits for the command's end (or the request's, or the run's).
func (ts *terminals) Wait(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	t, err := ts.get(p.TerminalId)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return acp.WaitForTerminalExitResponse{}, ctx.Err()
	case <-ts.ctx.Done():
		return acp.WaitForTerminalExitResponse{}, acp.NewInternalError(map[string]any{"error": "the run is over"})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return acp.WaitForTerminalExitResponse{ExitCode: t.exit.ExitCode, Signal: t.exit.Signal}, nil
}

// Kill kills the command's whole sandbox; the terminal stays readable.
func (ts *terminals) Kill(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	t, err := ts.get(p.TerminalId)
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	t.p.Kill()
	return acp.KillTerminalResponse{}, nil
}

// Release kills the command if it still runs and forgets the terminal.
func (ts *terminals) Release(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	t, err := ts.get(p.TerminalId)
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	t.p.Kill()
	ts.mu.Lock()
	delete(ts.m, p.TerminalId)
	ts.mu.Unlock()
	return acp.ReleaseTerminalResponse{}, nil
}

// envKeyOK accepts an agent-given variable name: [A-Z_][A-Z0-9_]*, not
// CTX_* (runtime-held) and not PATH.
func envKeyOK(k string) bool {
	if k == "" || k == "PATH" || strings.HasPrefix(k, "CTX_") {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
