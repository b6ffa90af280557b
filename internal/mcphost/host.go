// Package mcphost runs MCP servers for agent sessions and calls their
// tools (issue 13). The daemon is the MCP client (the official Go SDK,
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
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/egress"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/netpolicy"
	"github.com/cortexfs/ctx/internal/pathin"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/workspace"
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

// conn is a running server.
type conn struct {
	name  string
	cs    *mcp.ClientSession
	p     *proc.Proc    // nil for a URL server
	group *cgroup.Group // the server's cgroup; nil for a URL server or without a manager
	tools map[string]*mcp.Tool
	names []string
	dead  chan struct{} // closed once the server is gone
	why   string        // why it ended, set before dead closes
	stale atomic.Bool   // the server said its tool list changed
	// changed is signalled by list_changed (buffered, never blocks).
	changed chan struct{}

	vmu   sync.Mutex // guards tools, names, valid
	valid map[string]*Validator
}

// tool returns the named tool of the current list.
func (c *conn) tool(name string) *mcp.Tool {
	c.vmu.Lock()
	defer c.vmu.Unlock()
	return c.tools[name]
}

// list returns the current tools, sorted by name.
func (c *conn) list() []*mcp.Tool {
	c.vmu.Lock()
	defer c.vmu.Unlock()
	out := make([]*mcp.Tool, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.tools[n])
	}
	return out
}

func (c *conn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// stderrTail is the last lines of the server's stderr, for error results.
func (c *conn) stderrTail() string {
	if c.p == nil {
		return ""
	}
	b := c.p.Stderr()
	if len(b) > 1024 {
		b = b[len(b)-1024:]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return ""
	}
	return "; server stderr: " + s
}

// stop ends the server: stdin closed and SIGTERM, SIGKILL after grace
// (graceful), or SIGKILL at once.
func (c *conn) stop(grace time.Duration) {
	if c.p != nil {
		if grace > 0 {
			_ = c.p.Stdin.Close()
			c.p.Terminate(context.Background(), grace)
		} else {
			c.p.Kill()
		}
	}
	go c.cs.Close() // unblocks once the process is gone; never waited on here
}

// validator returns the argument validator of a tool (resolved once).
func (c *conn) validator(tool string) (*Validator, error) {
	c.vmu.Lock()
	defer c.vmu.Unlock()
	if v, ok := c.valid[tool]; ok {
		return v, nil
	}
	t := c.tools[tool]
	if t == nil {
		return nil, fmt.Errorf("tool %s is gone from the server's list", tool)
	}
	v, err := NewValidator(t.InputSchema)
	if err != nil {
		return nil, err
	}
	if c.valid == nil {
		c.valid = map[string]*Validator{}
	}
	c.valid[tool] = v
	return v, nil
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

// client is the SDK client ctx presents: no roots (a server sees only its
// sandbox and its arguments), sampling and elicitation declined.
func (m *Manager) client(c *conn) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "ctx", Version: m.o.Version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.stale.Store(true) // listed again before the next use
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
		// A server may still ask for sampling while the protocol deprecates
		// it; declining it here is what keeps the model out of reach.
		//lint:ignore SA1019 the handler refuses sampling; dropping it would let the SDK advertise nothing and answer for us
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return nil, ErrDeclined
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, ErrDeclined
		},
	})
}

// start runs t's server and initializes the session, within Timeout.
func (m *Manager) start(ctx context.Context, t Target) (*conn, error) {
	sctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
	defer cancel()
	c := &conn{name: t.Name, dead: make(chan struct{}), changed: make(chan struct{}, 1)}
	var transport mcp.Transport
	var held *sandbox.Held
	if t.Decl.URL != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: t.Decl.URL, MaxRetries: -1,
			HTTPClient: urlClient(t)}
	} else {
		p, h, g, err := m.spawn(t)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: %w", t.Name, err)
		}
		c.p, held, c.group = p, h, g
		transport = &mcp.IOTransport{Reader: p.Stdout, Writer: p.Stdin, MaxLineLength: MaxMessage}
	}
	cleanup := func() {
		if c.p != nil {
			c.p.Kill()
			go func() { _ = c.p.Wait(); held.Ended(); m.closeGroup(c) }()
		}
	}
	began := time.Now()
	cs, err := m.client(c).Connect(sctx, transport, nil)
	if err != nil {
		why := err.Error()
		if sctx.Err() != nil && ctx.Err() == nil {
			why = fmt.Sprintf("no answer to initialize within %s", m.o.Timeout)
		}
		if c.p != nil {
			// Give an exiting server a moment so its stderr is in the error.
			select {
			case <-exited(c.p):
			case <-time.After(200 * time.Millisecond):
			}
		}
		cleanup()
		return nil, fmt.Errorf("MCP server %s did not start: %s%s", t.Name, why, c.stderrTail())
	}
	c.cs = cs
	if err := m.listTools(sctx, c); err != nil {
		cleanup()
		_ = cs.Close()
		return nil, err
	}
	// Servers often register more tools once initialized (the everything
	// server's sampling tool) and say so at once: wait briefly for that.
	select {
	case <-c.changed:
		if err := m.listTools(sctx, c); err != nil {
			cleanup()
			_ = cs.Close()
			return nil, err
		}
	case <-time.After(ListSettle):
	}
	m.o.Log.Info("mcp server started", "server", t.Name, "session", t.View.Session,
		"tools", len(c.names), "took", time.Since(began).Round(time.Millisecond))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := cs.Wait()
		if c.p != nil {
			c.p.Kill() // whatever is left of its sandbox
			_ = c.p.Wait()
			held.Ended()
			m.closeGroup(c)
			if c.p.ExitCode() != 0 {
				c.why = fmt.Sprintf("the server exited (status %d)", c.p.ExitCode())
			}
		}
		if c.why == "" && err != nil {
			c.why = "connection closed: " + err.Error()
		}
		close(c.dead)
		m.o.Log.Info("mcp server gone", "server", t.Name, "session", t.View.Session, "why", c.why)
	}()
	return c, nil
}

// listTools (re)reads the server's tools (tools/list).
func (m *Manager) listTools(ctx context.Context, c *conn) error {
	c.stale.Store(false)
	tools := map[string]*mcp.Tool{}
	var names []string
	for tool, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("MCP server %s: tools/list: %v%s", c.name, err, c.stderrTail())
		}
		if !toolNameOK(tool.Name) {
			m.o.Log.Warn("mcp tool left out: its name cannot be addressed as SERVER.TOOL", "server", c.name, "tool", tool.Name)
			continue
		}
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	c.vmu.Lock()
	c.tools, c.names, c.valid = tools, names, nil
	c.vmu.Unlock()
	return nil
}

func exited(p *proc.Proc) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		// Done closes only after Wait; poll the process state instead.
		for i := 0; i < 20; i++ {
			if len(killtree.Descendants(p.Pid())) == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

func toolNameOK(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// ServerHome is a server's HOME and working directory: an empty tmpfs of
// its own sandbox. Nothing the agent wrote is there, so no interpreter
// finds a module, a node_modules, a .pth or a dotfile (~/.gitconfig,
// ~/.node_modules) the agent planted; the agent home stays mounted at
// /home/agent for servers given paths there.
const ServerHome = "/run/mcp-home"

// serverEnv closes the interpreters' implicit search paths: no cwd or
// script directory on Python's sys.path, no user site (usercustomize.py,
// .pth), no bytecode written. They are set last, so neither the view nor
// an env value overrides them. README "MCP servers as tsh tools".
var serverEnv = map[string]string{
	"HOME":                    ServerHome,
	"PYTHONSAFEPATH":          "1",
	"PYTHONNOUSERSITE":        "1",
	"PYTHONDONTWRITEBYTECODE": "1",
}

// harden gives spec the server's empty home, as working directory too
// (never /workspace: python3 -m MODULE would import the agent's MODULE.py),
// and env its fixed variables.
// serverNetwork gives a server the network its declaration asks for and
// never the host's: with net, the daemon's proxy (public addresses, and the
// agent's own `net local` grants, which the agent reaches itself anyway);
// without net, none, whatever the agent's own grant. A server is driven by
// the agent, so the host's loopback, its abstract sockets and its private
// networks stay as far from it as from the agent. spec: V3
func serverNetwork(spec *bwrap.Spec, net bool, local []netip.AddrPort) {
	if spec.Egress != nil {
		for k := range spec.Egress.Env() {
			delete(spec.Env, k)
		}
	}
	spec.Network, spec.Egress = false, nil
	if !net {
		return
	}
	pol := netpolicy.Policy{Public: true, Local: local}
	spec.Egress = &pol
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	maps.Copy(spec.Env, pol.Env())
}

// urlClient is the HTTP client the daemon reaches a URL server with: every
// connection (redirects included) goes through the same policy as a
// sandbox's egress — public addresses with the declaration's net, and only
// the agent's own `net local` grants besides — so a name that resolves to
// the host's loopback or a private network is refused, not dialled. The
// daemon's own proxy settings are not used. spec: V3
func urlClient(t Target) *http.Client {
	var local []netip.AddrPort
	if t.View.Def != nil {
		local = t.View.Def.NetLocal
	}
	p := egress.ForDaemon(netpolicy.Policy{Public: t.Decl.Net, Local: local})
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr}
}

func harden(spec *bwrap.Spec) {
	spec.TmpfsAfter = append(spec.TmpfsAfter, ServerHome) // over any .d/mount there
	spec.Chdir = ServerHome
	for k, v := range serverEnv {
		spec.Env[k] = v
	}
}

// spawn starts t's stdio server in bwrap: the agent's view (its home,
// the workspace, .d/mount; no tool files, no tsh, no launch root — a
// server has no capability on the control socket), network only with
// net, plus its installation read-only, and the env file's values; born
// in a cgroup of its own bounded by the agent's limits.
func (m *Manager) spawn(t Target) (*proc.Proc, *sandbox.Held, *cgroup.Group, error) {
	if t.View.Def == nil {
		return m.spawnBare(t)
	}
	v := t.View
	v.Run, v.Tsh, v.Tools = "", false, sandbox.ToolView(0)
	env := v.ToolEnv()
	delete(env, "CTX_RUN")
	delete(env, "CTX_CONTROL_SOCKET")
	if err := m.addSecrets(env, t); err != nil {
		return nil, nil, nil, err
	}
	argv := append([]string{t.Decl.Command}, t.Decl.Args...)
	spec, held, err := v.Build(argv, env)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	serverNetwork(&spec, t.Decl.Net, t.View.Def.NetLocal)
	harden(&spec)
	binds := append([]string{t.Decl.Command}, t.Decl.Binds...)
	for _, b := range binds {
		if isSystem(b) {
			continue
		}
		if _, err := os.Stat(b); err != nil {
			held.Ended()
			return nil, nil, nil, fmt.Errorf("its installation %s is gone (%v): install it again or run ctx mcp add again", b, err)
		}
		if dir, ok := agentWritable(t.View, b); ok {
			held.Ended()
			return nil, nil, nil, fmt.Errorf("its installation %s is inside %s, which the agent can write: the server would run code the agent can change; install it elsewhere (e.g. npm install --prefix /var/cache/ctx/npm) and run ctx mcp add again", b, dir)
		}
		spec.Mounts = append(spec.Mounts, bwrap.Mount{Src: b, Dst: b})
	}
	g := m.group(t, t.View.Def.Limits)
	p, err := proc.Start(proc.Options{Bwrap: m.o.Bwrap, Spec: spec, StdinPipe: true,
		Enter: g.EnterFunc(), Place: g.PlaceFunc()}) // born in its cgroup (v1), else placed while held
	held.Started()
	if err != nil {
		held.Ended()
		_ = g.Close(0)
		return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	return p, held, g, nil
}

// agentWritable reports the directory of v's writable view — the
// workspace, the agent home, an rw .d/mount source — that holds host path
// p (symlinks resolved on both sides). The view is the one authority: an
// installation there is code the agent wrote or can change.
func agentWritable(v sandbox.View, p string) (string, bool) {
	dirs := []string{v.Workspace, v.Layout.AgentHome(v.Def.Name)}
	for _, m := range v.Def.Mounts {
		if m.Write {
			dirs = append(dirs, m.Src)
		}
	}
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	rp := real(p)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if pathin.Inside(rp, real(d)) || pathin.Inside(filepath.Clean(p), filepath.Clean(d)) {
			return d, true
		}
	}
	return "", false
}

// group is a new cgroup for one instance of t's server, bounded by lim:
// the walls of the runs that use it (an agent's calls cannot fork or map
// past its limits through a server). A run-… name, so a daemon start
// sweeps what a crashed daemon left like a run's group.
func (m *Manager) group(t Target, lim limits.Limits) *cgroup.Group {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return m.o.Cgroups.Group("run-mcp-"+t.Name+"-"+hex.EncodeToString(b[:]), lim)
}

// closeGroup kills what is left in c's cgroup and removes it, once the
// server's sandbox is gone.
func (m *Manager) closeGroup(c *conn) {
	if err := c.group.Close(0); err != nil {
		m.o.Log.Warn("mcp server cgroup not fully cleaned up (the next daemon start sweeps it)", "server", c.name, "err", err)
	}
}

// addSecrets adds the values of the keys t's declaration names from its
// owner-only env file to env (only that server's process gets them).
func (m *Manager) addSecrets(env map[string]string, t Target) error {
	if len(t.Decl.Env) == 0 {
		return nil
	}
	path := t.Decl.EnvPath
	if path == "" {
		path = EnvFile(m.o.Layout, t.Name)
	}
	vals, err := ReadEnvFile(m.o.Layout, path)
	if err != nil {
		return err
	}
	for _, k := range t.Decl.Env {
		if val, ok := vals[k]; ok {
			env[k] = val
		}
	}
	return nil
}

// spawnBare starts a server outside any agent's view (ctx mcp tools
// without --agent): the system directories, an empty home and /tmp, its
// installation read-only, network only with net, default limits.
func (m *Manager) spawnBare(t Target) (*proc.Proc, *sandbox.Held, *cgroup.Group, error) {
	env := sandbox.Identity("dumb")
	if err := m.addSecrets(env, t); err != nil {
		return nil, nil, nil, err
	}
	spec := bwrap.Spec{System: true, Env: env,
		Argv: append([]string{t.Decl.Command}, t.Decl.Args...)}
	serverNetwork(&spec, t.Decl.Net, nil)
	harden(&spec)
	for _, b := range append([]string{t.Decl.Command}, t.Decl.Binds...) {
		if !isSystem(b) {
			spec.Mounts = append(spec.Mounts, bwrap.Mount{Src: b, Dst: b})
		}
	}
	if t.View.Workspace != "" {
		// ctx mcp tools without an agent: the caller's workspace, read-only
		// (no agent's view decides what it may change), bound through the
		// descriptor that was checked (README "What the workspace may change").
		g, _ := workspace.ParseGrants(nil)
		d, err := workspace.Open(t.View.Workspace, workspace.Options{Layout: m.o.Layout, Grants: g})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("workspace: %w", err)
		}
		defer d.Close() // bwrap has its own copy once started
		spec.Mounts = append(spec.Mounts, bwrap.Mount{Src: d.Path, Dst: layout.SandboxWorkspace, FD: spec.Pass(d.File)})
		for _, rel := range d.Hide {
			spec.TmpfsAfter = append(spec.TmpfsAfter, filepath.Join(layout.SandboxWorkspace, rel))
		}
	}
	g := m.group(t, limits.Default)
	p, err := proc.Start(proc.Options{Bwrap: m.o.Bwrap, Spec: spec, StdinPipe: true,
		Enter: g.EnterFunc(), Place: g.PlaceFunc()})
	if err != nil {
		_ = g.Close(0)
		return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	return p, &sandbox.Held{}, g, nil
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

func isSystem(p string) bool { return mcpinstall.IsSystem(p) }

// EnvFile is mcpinstall.EnvFile.
func EnvFile(l layout.Layout, name string) string { return mcpinstall.EnvFile(l, name) }

// ReadEnv reads a server's env file: a regular file (not followed if a
// symlink) owned by the user, mode 0600 or 0400 — anything else refused.
func ReadEnv(l layout.Layout, name string) (map[string]string, error) {
	return ReadEnvFile(l, EnvFile(l, name))
}

// ReadEnvFile reads an owner-only K=V secrets file at path with ReadEnv's
// rules (an acp-v1 agent's secrets too, issue 14).
func ReadEnvFile(l layout.Layout, path string) (map[string]string, error) {
	f, st, err := safefs.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("env file: %w", err)
	}
	defer f.Close()
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("env file %s: mode %o, want 0600 (owner only)", path, perm)
	}
	if uid, ok := ownerOf(st); ok && uid != l.UID {
		return nil, fmt.Errorf("env file %s: owned by uid %d, not %d", path, uid, l.UID)
	}
	data := make([]byte, mcpconf.MaxEnvSize+1)
	n, _ := f.Read(data)
	return mcpconf.ParseEnv(data[:n])
}
