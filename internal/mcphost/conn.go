package mcphost

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One server's connection: starting it (spawn, the MCP client, the
// first tools/list), asking after it and stopping it.

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
		p, h, g, err := m.spawn(sctx, t)
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
		if c.p != nil {
			// Its stderr is whole only once it is waited for (cleanup
			// waits for it): the copy of the pipe may still be behind.
			select {
			case <-c.p.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
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
