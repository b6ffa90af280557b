package mcphost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/egress"
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

// The sandbox a server runs in: its view (an agent's, or bare for ctx mcp
// tools without one), its network, its empty home, its secrets and its
// cgroup. A server is never given more than the agent it serves.

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
func (m *Manager) spawn(ctx context.Context, t Target) (*proc.Proc, *sandbox.Held, *cgroup.Group, error) {
	if t.View.Def == nil {
		return m.spawnBare(t)
	}
	v := t.View
	v.Run, v.Pin, v.Tsh, v.Tools = "", "", false, sandbox.ToolView(0)
	env := v.ToolEnv()
	delete(env, "CTX_RUN")
	delete(env, "CTX_CONTROL_SOCKET")
	if err := m.addSecrets(env, t); err != nil {
		return nil, nil, nil, err
	}
	argv := append([]string{t.Decl.Command}, t.Decl.Args...)
	var mounts []bwrap.Mount
	for _, b := range append([]string{t.Decl.Command}, t.Decl.Binds...) {
		if isSystem(b) {
			continue
		}
		if _, err := os.Stat(b); err != nil {
			return nil, nil, nil, fmt.Errorf("its installation %s is gone (%v): install it again or run ctx mcp add again", b, err)
		}
		if dir, ok := agentWritable(t.View, b); ok {
			return nil, nil, nil, fmt.Errorf("its installation %s is inside %s, which the agent can write: the server would run code the agent can change; install it elsewhere (e.g. npm install --prefix /var/cache/ctx/npm) and run ctx mcp add again", b, dir)
		}
		mounts = append(mounts, bwrap.Mount{Src: b, Dst: b})
	}
	var g *cgroup.Group
	p, held, err := sandbox.Start(ctx, v, argv, env, func(spec bwrap.Spec) (*proc.Proc, error) {
		serverNetwork(&spec, t.Decl.Net, t.View.Def.NetLocal)
		harden(&spec)
		spec.Mounts = append(spec.Mounts, mounts...)
		g = m.group(t, t.View.Def.Limits)
		p, err := proc.Start(proc.Options{Bwrap: m.o.Bwrap, Spec: spec, StdinPipe: true,
			Enter: g.EnterFunc(), Place: g.PlaceFunc()}) // born in its cgroup (v1), else placed while held
		if err != nil {
			_ = g.Close(0)
		}
		return p, err
	})
	if err != nil {
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
	env := sandbox.IdentityEnv("dumb")
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
		if err := sandbox.Hide(&spec, d, layout.SandboxWorkspace); err != nil {
			return nil, nil, nil, fmt.Errorf("workspace: %w", err)
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

func isSystem(p string) bool { return mcpinstall.IsSystem(p) }

// EnvFile is mcpinstall.EnvFile.
func EnvFile(l layout.Layout, name string) string { return mcpinstall.EnvFile(l, name) }

// ReadEnv reads a server's env file: a regular file (not followed if a
// symlink) owned by the user, mode 0600 or 0400 — anything else refused.
func ReadEnv(l layout.Layout, name string) (map[string]string, error) {
	return ReadEnvFile(l, EnvFile(l, name))
}

// ReadEnvFile reads an owner-only K=V secrets file at path with ReadEnv's
// rules (an acp-v1 agent's secrets too).
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
