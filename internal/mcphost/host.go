// Package mcphost runs MCP servers for agent sessions and calls their
// tools. The daemon is the MCP client (the official Go SDK,
// github.com/modelcontextprotocol/go-sdk); each stdio server runs inside
// bwrap with its agent's view, plus read-only binds of its own
// installation, and talks over its stdin/stdout.
//
// A Manager is a daemon service like the placeholder registry, not an
// actor: every method may block (a start, a call) and is called from the
// goroutines tool actors run off their Receive, never from a Receive.
// Servers start lazily on a session's first use, are reused by that
// session's later calls, stop after Idle without a call, when the session
// actor stops (StopSession) or at daemon shutdown (Close); a server that
// crashed, hung past Timeout or broke the protocol is stopped and started
// again on the next call. Nothing a server does can take the daemon down:
// its output is read by the SDK with a bounded message size, its process
// is killed with its whole sandbox.
package mcphost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/sandbox"
)

// Defaults of the tunables (CTX_MCP_IDLE, CTX_MCP_TIMEOUT).
const (
	DefaultIdle    = 5 * time.Minute
	DefaultTimeout = 60 * time.Second
	// MaxMessage bounds one JSON-RPC message from a server: a larger one
	// (a 10 MiB result) ends the connection with an error result, and
	// the server is restarted on the next call.
	MaxMessage = 4 << 20
	// ListSettle is how long a start waits for a tools/list_changed right
	// after initialize (servers that register tools once initialized).
	ListSettle = 100 * time.Millisecond
)

// ErrDeclined is what a server asking for sampling or elicitation gets.
var ErrDeclined = errors.New("ctx declines sampling and elicitation requests from MCP servers: the agent's model and its person are reached only through ctx's own run, not by a tool server")

// ErrClosed is returned once the manager is closed (daemon shutdown).
var ErrClosed = errors.New("mcp: the daemon is shutting down")

// Options configure a Manager.
type Options struct {
	Layout  layout.Layout
	Bwrap   string
	Version string // reported to servers as the client version
	// Idle stops a server after this long without a call (0: DefaultIdle).
	Idle time.Duration
	// Timeout bounds a start (initialize and tools/list) and each call (0: DefaultTimeout).
	Timeout time.Duration
	// Grace is SIGTERM→SIGKILL when a server is stopped.
	Grace time.Duration
	Log   *slog.Logger
	// Cgroups gives each server instance a cgroup bounded by its agent's
	// .d/limits, like a run's (nil: none, as in `ctx mcp tools`, a
	// one-shot probe the user runs). README "Limits".
	Cgroups *cgroup.Manager
}

// Key names one server process: a session's instance of a declared server.
type Key struct{ Agent, Scope, Session, Server string }

// Target is what a start needs: the session's view of the agent and the
// server's declaration.
type Target struct {
	View sandbox.View
	Name string
	Decl *mcpconf.Server
}

func (t Target) key() Key {
	scope := t.View.Scope
	if scope == "" {
		scope = layout.ScopePrivate
	}
	return Key{Agent: t.View.Def.Name, Scope: scope, Session: t.View.Session, Server: t.Name}
}

// fingerprint changes when the server must be restarted for a call: its
// declaration, the workspace and cwd of the view it runs in, or the
// agent's limits (its cgroup's: a server keeps the walls of its agent).
func (t Target) fingerprint() string {
	var lim limits.Limits
	if t.View.Def != nil {
		lim = t.View.Def.Limits
	}
	data, _ := json.Marshal(struct {
		D      *mcpconf.Server
		W, C   string
		N      bool
		Policy string
		L      limits.Limits
	}{t.Decl, t.View.Workspace, t.View.WorkDir(), t.View.Def.Network, t.View.Def.Control, lim})
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:8])
}

// Manager owns every running server of the daemon.
type Manager struct {
	o       Options
	mu      sync.Mutex
	servers map[Key]*server
	closed  bool
	wg      sync.WaitGroup // watchers of running servers
}

// New builds a Manager.
func New(o Options) *Manager {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return &Manager{o: o, servers: map[Key]*server{}}
}

// Timeout is the per-call bound.
func (m *Manager) Timeout() time.Duration { return m.o.Timeout }

// server is one declared server of one session; conn is its running
// instance, nil when stopped.
type server struct {
	key  Key
	mu   sync.Mutex // held across a start: one start at a time
	conn *conn
	fp   string
	busy int
	idle *time.Timer
}

func (m *Manager) server(k Key) (*server, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s := m.servers[k]
	if s == nil {
		s = &server{key: k}
		m.servers[k] = s
	}
	return s, nil
}

// acquire returns the running server of t, starting (or restarting) it
// when needed, and marks it busy until release.
func (m *Manager) acquire(ctx context.Context, t Target) (*server, *conn, error) {
	s, err := m.server(t.key())
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fp := t.fingerprint()
	if s.conn != nil && (!s.conn.alive() || s.fp != fp) {
		if s.conn.alive() {
			m.o.Log.Info("mcp server restarts: its declaration or view changed", "server", t.Name, "agent", t.View.Def.Name, "session", t.View.Session)
			s.conn.stop(m.o.Grace)
		}
		s.conn = nil
	}
	if s.conn == nil {
		c, err := m.start(ctx, t)
		if err != nil {
			return nil, nil, err
		}
		s.conn, s.fp = c, fp
	} else if s.conn.stale.Load() {
		lctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
		err := m.listTools(lctx, s.conn)
		cancel()
		if err != nil {
			return nil, nil, err
		}
	}
	s.busy++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	return s, s.conn, nil
}

func (m *Manager) release(s *server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	if s.busy > 0 || s.conn == nil {
		return
	}
	c := s.conn
	s.idle = time.AfterFunc(m.o.Idle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conn == c && s.busy == 0 {
			m.o.Log.Info("mcp server idle: stopped", "server", c.name, "session", s.key.Session, "idle", m.o.Idle)
			c.stop(m.o.Grace)
			s.conn = nil
		}
	})
}

// kill stops c (if still the server's instance) at once: hung or broken.
func (m *Manager) kill(s *server, c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.stop(0)
	if s.conn == c {
		s.conn = nil
	}
}

// Tools lists the tools of t's server (starting it if needed), sorted by name.
func (m *Manager) Tools(ctx context.Context, t Target) ([]*mcp.Tool, error) {
	s, c, err := m.acquire(ctx, t)
	if err != nil {
		return nil, err
	}
	defer m.release(s)
	return c.list(), nil
}

// Tool is one tool of a running server, with what an approval shows.
type Tool struct {
	*mcp.Tool
	Args map[string]any
}

// Prepare starts t's server if needed, finds tool and turns words (tsh
// call words after SERVER.TOOL) into validated arguments. An unknown tool
// or bad arguments is an error matching ErrBadArgs: nothing is sent to the
// server (no tools/call).
func (m *Manager) Prepare(ctx context.Context, t Target, tool string, words []string) (*Tool, error) {
	s, c, err := m.acquire(ctx, t)
	if err != nil {
		return nil, err
	}
	defer m.release(s)
	mt := c.tool(tool)
	if mt == nil {
		// A server may register tools just after initialize (and say so
		// with list_changed, which may not have arrived yet): list again once.
		lctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
		if m.listTools(lctx, c) == nil {
			mt = c.tool(tool)
		}
		cancel()
	}
	if mt == nil {
		return nil, fmt.Errorf("MCP server %s has no tool %q (tsh list shows %s.*): %w", t.Name, tool, t.Name, ErrBadArgs)
	}
	args, err := ParseArgs(words, mt.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", t.Name, tool, err)
	}
	v, err := c.validator(tool)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: the server's %w; refusing the call: %w", t.Name, tool, err, ErrBadArgs)
	}
	if err := v.Validate(args); err != nil {
		return nil, fmt.Errorf("%s.%s: arguments do not match the input schema %s: %w", t.Name, tool, CompactSchema(mt.InputSchema), err)
	}
	return &Tool{Tool: mt, Args: args}, nil
}

// Outcome is a call's tool_result content.
type Outcome struct {
	Status    string // ok | error | cancelled
	Content   string
	Truncated bool
}

// Call calls tool with args on t's server, bounded by Timeout. A cancelled
// ctx (the run was cancelled) makes the SDK send notifications/cancelled
// for the request in flight; the call then ends at once. A server that
// does not answer in time is killed (restarted on the next call); one that
// exits or breaks the protocol gives an error outcome naming why.
func (m *Manager) Call(ctx context.Context, t Target, tool string, args map[string]any) Outcome {
	fail := func(format string, a ...any) Outcome {
		return Outcome{Status: "error", Content: fmt.Sprintf(format, a...)}
	}
	s, c, err := m.acquire(ctx, t)
	if err != nil {
		return fail("MCP server %s: %v", t.Name, err)
	}
	defer m.release(s)
	cctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
	defer cancel()
	res, err := c.cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err == nil:
		st, content, trunc := FormatResult(res)
		return Outcome{Status: st, Content: content, Truncated: trunc}
	case ctx.Err() != nil:
		return Outcome{Status: "cancelled", Content: fmt.Sprintf("%s.%s: cancelled (notifications/cancelled sent to the server)", t.Name, tool)}
	case cctx.Err() != nil:
		m.kill(s, c)
		return fail("MCP server %s did not answer %s within %s: it was stopped and starts again on the next call%s", t.Name, tool, m.o.Timeout, c.stderrTail())
	}
	// The connection broke (the server exited, was killed, or sent
	// something the client refused, e.g. a message over MaxMessage).
	select {
	case <-c.dead:
	case <-time.After(500 * time.Millisecond):
	}
	m.kill(s, c)
	why := c.why
	if why == "" {
		why = err.Error()
	}
	return fail("MCP server %s failed during %s: %s; it starts again on the next call%s", t.Name, tool, why, c.stderrTail())
}

// StopSession stops every server of one session (the session actor
// stopped). It does not wait.
func (m *Manager) StopSession(agent, scope, session string) {
	m.mu.Lock()
	var stop []*server
	for k, s := range m.servers {
		if k.Agent == agent && k.Scope == scope && k.Session == session {
			stop = append(stop, s)
			delete(m.servers, k)
		}
	}
	m.mu.Unlock()
	for _, s := range stop {
		go m.stopServer(s)
	}
}

func (m *Manager) stopServer(s *server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.conn != nil {
		s.conn.stop(m.o.Grace)
		s.conn = nil
	}
}

// Close stops every server and waits (at most ctx) for them to be gone.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	all := m.servers
	m.servers = map[Key]*server{}
	m.mu.Unlock()
	for _, s := range all {
		m.stopServer(s)
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: servers still stopping: %w", ctx.Err())
	}
}

// Running lists the keys of running servers (for tests and logs).
func (m *Manager) Running() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Key
	for k, s := range m.servers {
		if s.mu.TryLock() {
			if s.conn != nil && s.conn.alive() {
				out = append(out, k)
			}
			s.mu.Unlock()
		}
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// Probe starts a server once, lists its tools and stops it (ctx mcp
// tools). A zero view runs it outside any agent's view.
func (m *Manager) Probe(ctx context.Context, t Target) ([]*mcp.Tool, error) {
	c, err := m.start(ctx, t)
	if err != nil {
		return nil, err
	}
	if c.stale.Load() { // tools registered once initialized (e.g. for sampling)
		_ = m.listTools(ctx, c)
	}
	out := c.list()
	c.stop(m.o.Grace)
	<-c.dead
	return out, nil
}
