package acpbridge

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/netpolicy"
	"github.com/cortexfs/ctx/internal/pathin"
)

// MCPRules are what an editor's mcpServers are judged by: the same
// resolution as `ctx mcp add` for a stdio command, and the agent's
// network grants for an http server.
type MCPRules struct {
	// Resolve is mcpinstall's Resolver.Resolve: an absolute path, an npm
	// bin as node + script + its node_modules, `npx` refused with the fix.
	Resolve func(command string, args []string) (*mcpconf.Server, error)
	// Net is the agent's .d/mount network grant (`net`, `net local`).
	Net netpolicy.Policy
	// Cwd is the session's workspace (the editor's cwd, judged): a
	// relative command path is taken from there, as the editor meant it.
	Cwd string
	// Writable are the host directories the agent can write (the
	// workspace, its home, `rw` .d/mount sources): a server installed
	// there is refused now, as internal/mcphost would at its start — code
	// the agent can change never runs as a server.
	Writable []string
}

// EditorServers are a session's MCP servers as its editor declared them,
// in ctx's declaration form, with the env values kept apart (they go to
// owner-only files, never into the declaration or a command line).
type EditorServers struct {
	Servers map[string]*mcpconf.Server
	Env     map[string]map[string]string
}

// MCPError is the JSON-RPC error session/new or session/load answers for a
// server ctx cannot honour: it names the server and why, so an editor's
// server is never silently dropped.
func MCPError(name, why string) error {
	return &acp.RequestError{Code: -32602, Message: fmt.Sprintf("Invalid params: mcpServers: %q: %s", name, why),
		Data: map[string]any{"mcpServer": name, "error": why}}
}

// ConvertMCP turns an editor's mcpServers into session-scoped declarations,
// or refuses the first one ctx cannot run inside the walls.
func ConvertMCP(list []acp.McpServer, r MCPRules) (*EditorServers, error) {
	es := &EditorServers{Servers: map[string]*mcpconf.Server{}, Env: map[string]map[string]string{}}
	if len(list) > mcpconf.MaxServers {
		return nil, MCPError("*", fmt.Sprintf("%d servers, at most %d", len(list), mcpconf.MaxServers))
	}
	for _, m := range list {
		var (
			name = serverName(m)
			s    *mcpconf.Server
			env  map[string]string
			err  error
		)
		switch {
		case m.Stdio != nil:
			s, env, err = stdioServer(m.Stdio, r)
		case m.Http != nil:
			s, err = httpServer(m.Http.Url, len(m.Http.Headers), r)
		case m.Sse != nil:
			err = errors.New("the SSE transport is not supported (initialize advertises mcpCapabilities.sse false): give the server's streamable HTTP endpoint as type http")
		case m.Acp != nil:
			err = errors.New("MCP over ACP is not supported (mcpCapabilities.acp is false)")
		default:
			err = errors.New("unknown transport")
		}
		if err == nil {
			err = mcpconf.CheckName(name)
		}
		if err == nil && es.Servers[name] != nil {
			err = errors.New("declared twice")
		}
		if err == nil {
			err = s.Validate(name)
		}
		if err != nil {
			return nil, MCPError(name, err.Error())
		}
		es.Servers[name] = s
		if len(env) > 0 {
			es.Env[name] = env
		}
	}
	return es, nil
}

func stdioServer(m *acp.McpServerStdio, r MCPRules) (*mcpconf.Server, map[string]string, error) {
	if m.Command == "" {
		return nil, nil, errors.New("no command")
	}
	if len(m.Args) > mcpconf.MaxArgs {
		return nil, nil, fmt.Errorf("%d args, at most %d", len(m.Args), mcpconf.MaxArgs)
	}
	command := m.Command
	if strings.Contains(command, "/") && !filepath.IsAbs(command) && r.Cwd != "" {
		command = filepath.Join(r.Cwd, command)
	}
	s, err := r.Resolve(command, m.Args)
	if errors.Is(err, mcpinstall.ErrDownload) {
		return nil, nil, fmt.Errorf("%w (in the editor's mcpServers, give the installed command instead of npx)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, p := range append([]string{s.Command}, s.Binds...) {
		if dir, ok := inside(p, r.Writable); ok { // spec: V3 — the agent's view decides, never code it can change
			return nil, nil, fmt.Errorf("its installation %s is inside %s, which the agent can write: the server would run code the agent can change; install it elsewhere (e.g. npm install --prefix /var/cache/ctx/npm) and give that command", p, dir)
		}
	}
	env := map[string]string{}
	for _, e := range m.Env {
		if err := mcpconf.CheckEnvName(e.Name); err != nil {
			return nil, nil, err
		}
		if _, dup := env[e.Name]; !dup {
			s.Env = append(s.Env, e.Name)
		}
		env[e.Name] = e.Value
	}
	if len(env) > 0 {
		if _, err := mcpconf.FormatEnv(env); err != nil {
			return nil, nil, err
		}
	}
	// A stdio server gets no network: an editor's declaration is not the
	// person's `ctx mcp add --net`, and a server on the network would be a
	// way out for an agent that has none. spec: V3
	s.Net = false
	return s, env, nil
}

// inside reports the directory of dirs that holds p, symlinks resolved on
// both sides (internal/mcphost's rule at a server's start).
func inside(p string, dirs []string) (string, bool) {
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	rp := real(p)
	for _, d := range dirs {
		if d != "" && (pathin.Inside(rp, real(d)) || pathin.Inside(filepath.Clean(p), filepath.Clean(d))) {
			return d, true
		}
	}
	return "", false
}

// httpServer allows a streamable HTTP server only where the agent's own
// network grants reach it: a loopback or private address needs the exact
// `net local HOST:PORT` line, a public one `net`. Headers are refused: a
// URL server gets none yet, and dropping them would be a silent change.
func httpServer(raw string, headers int, r MCPRules) (*mcpconf.Server, error) {
	if headers > 0 {
		return nil, errors.New("HTTP headers are not supported for MCP servers yet; declare it without headers or run it as a stdio server")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("url %q: want http(s)://HOST[:PORT]/PATH", raw)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	a, perr := netip.ParseAddr(host)
	switch { // spec: V3 — the agent's own network grants, nothing wider
	case perr == nil:
		target := net.JoinHostPort(host, port)
		ap, err := netpolicy.ParseLocal(target)
		if err != nil {
			return nil, fmt.Errorf("url %q: %v", raw, err)
		}
		if err := r.Net.Check(target, netip.AddrPortFrom(a.Unmap(), ap.Port())); err != nil {
			return nil, fmt.Errorf("url %q: not reachable with the agent's network grants: %v", raw, err)
		}
	case strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost"):
		return nil, fmt.Errorf("url %q: name the loopback address (http://127.0.0.1:%s/…) and grant it with `net local 127.0.0.1:%s` in the agent's .d/mount", raw, port, port)
	case !r.Net.Public:
		return nil, fmt.Errorf("url %q: the agent's .d/mount does not grant net (add a line `net`)", raw)
	}
	return &mcpconf.Server{URL: raw, Net: true}, nil
}

// SaveMCP makes es the servers of the session: its declaration file and
// one owner-only env file per server with env values, under
// mcpinstall.SessionDir (outside every sandbox, keyed by session). An
// empty es removes them. What an earlier declaration left is replaced.
func SaveMCP(l layout.Layout, agent, session string, es *EditorServers) error {
	dir := mcpinstall.SessionDir(l, agent, session)
	if es == nil || len(es.Servers) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("session %s: MCP servers: %w", session, err)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session %s: MCP servers: %w", session, err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.env"))
	for _, p := range old {
		if _, keep := es.Env[strings.TrimSuffix(filepath.Base(p), ".env")]; !keep {
			_ = os.Remove(p)
		}
	}
	names := make([]string, 0, len(es.Env))
	for n := range es.Env {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := mcpconf.FormatEnv(es.Env[n])
		if err != nil {
			return fmt.Errorf("session %s: MCP server %s: %w", session, n, err)
		}
		if err := atomicfile.WriteFile(mcpinstall.SessionEnvFile(l, agent, session, n), data, 0o600); err != nil {
			return fmt.Errorf("session %s: MCP server %s: env file: %w", session, n, err)
		}
	}
	if err := mcpconf.Save(mcpinstall.SessionFile(l, agent, session), &mcpconf.File{Version: mcpconf.Version, Servers: es.Servers}); err != nil {
		return fmt.Errorf("session %s: %w", session, err)
	}
	return nil
}

// serverName is the name an editor gave a server, whatever its transport.
func serverName(m acp.McpServer) string {
	switch {
	case m.Stdio != nil:
		return m.Stdio.Name
	case m.Http != nil:
		return m.Http.Name
	case m.Sse != nil:
		return m.Sse.Name
	case m.Acp != nil:
		return m.Acp.Name
	}
	return "?"
}
