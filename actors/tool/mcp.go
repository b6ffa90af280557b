package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/ipc"
)

// LayerMCP names refusals of the MCP layer: an invalid declaration file.
const LayerMCP = "mcp"

// mcpPrepared is an MCP tool call that passed every check.
type mcpPrepared struct {
	target mcphost.Target
	tool   *mcphost.Tool
}

// Decls are the MCP servers a session of the agent sees: the user's
// mcp.json, with the agent's own .d/mcp.json replacing servers of the same
// name, and for a private session the servers its editor declared over ACP
// (mcpinstall.SessionFile) replacing both.
func Decls(l layout.Layout, def *agentdef.Def, scope, session string) (map[string]*mcpconf.Server, error) {
	user, err := mcpconf.Load(filepath.Join(l.UserHome(), mcpconf.FileName))
	if err != nil {
		return nil, err
	}
	agent, err := mcpconf.Load(filepath.Join(def.Control, mcpconf.FileName))
	if err != nil {
		return nil, err
	}
	out := mcpconf.Merge(user, agent)
	if (scope == "" || scope == layout.ScopePrivate) && layout.CheckName("session", session) == nil {
		own, err := mcpconf.Load(mcpinstall.SessionFile(l, def.Name, session))
		if err != nil {
			return nil, err
		}
		for n, s := range own.Servers {
			c := *s
			c.EnvPath = mcpinstall.SessionEnvFile(l, def.Name, session, n)
			out[n] = &c
		}
	}
	return out, nil
}

// decideMCP is the policy verdict on SERVER.TOOL: the agent policy alone
// (an MCP tool has no tool object, so no tool policy file).
func decideMCP(def *agentdef.Def, name string) policy.Decision {
	return policy.DecideFiles(filepath.Join(def.Control, "policy"), "", name, def.Label)
}

// checkMCP is check for `tsh call SERVER.TOOL ARGS…` when SERVER is a
// declared MCP server: the agent policy on SERVER.TOOL (deny wins; a
// denied call never starts or reaches the server), then the server's
// tool list and the arguments validated against the tool's input schema
// (a mismatch is an error result, never a tools/call).
func checkMCP(ctx context.Context, cfg *config.Config, call Call, target string, decl *mcpconf.Server, words []string) (*prepared, *Result) {
	server, toolName, _ := mcphost.SplitName(target)
	deny := func(layer, why string) (*prepared, *Result) {
		return nil, &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusDenied,
			Content: fmt.Sprintf("denied by %s: %s: %s", layer, target, why), Layer: layer}
	}
	if d := decideMCP(call.View.Def, target); !d.Allowed { // spec: V3 — policy before anything runs
		return deny(d.Layer, d.Reason)
	}
	if cfg.MCP == nil {
		return deny(LayerMCP, "no MCP host in this daemon")
	}
	t := mcphost.Target{View: call.View, Name: server, Decl: decl}
	mt, err := cfg.MCP.Prepare(ctx, t, toolName, words)
	if err != nil {
		return nil, &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusError, Content: err.Error()}
	}
	return &prepared{mcp: &mcpPrepared{target: t, tool: mt}}, nil
}

// mcpTarget says whether `tsh call TARGET` names a tool of a declared MCP
// server; an unreadable declaration file is reported (fail closed).
func mcpTarget(cfg *config.Config, v sandbox.View, target string) (*mcpconf.Server, error) {
	server, tool, ok := mcphost.SplitName(target)
	if !ok || mcpconf.CheckName(server) != nil || tool == "" {
		return nil, nil
	}
	decls, err := Decls(cfg.Layout, v.Def, scopeOf(v), v.Session)
	if err != nil {
		return nil, err
	}
	return decls[server], nil
}

// approvalOf is what the approval request shows for an MCP call.
func (p *mcpPrepared) approvalOf() *ipc.MCPCall {
	args, _ := json.Marshal(p.tool.Args)
	c := &ipc.MCPCall{Server: p.target.Name, Tool: p.tool.Name, Arguments: args}
	if a := p.tool.Annotations; a != nil {
		c.ReadOnly, c.Destructive = a.ReadOnlyHint, a.DestructiveHint
	}
	return c
}

// listingCommands are tsh's commands that read the MCP listing.
var listingCommands = map[string]bool{"list": true, "load": true, "pin": true, "which": true}

// refreshListing writes the session's MCP listing (mcpconf.Listing) before
// tsh lists or loads: every declared server's tools the agent policy
// allows, each server started if it was not (the session's first use). A
// server that cannot start is named in the listing's errors. No
// declaration and no listing yet: nothing is written.
func refreshListing(ctx context.Context, cfg *config.Config, v sandbox.View) {
	path := filepath.Join(v.Layout.SessionDir(v.Def.Name, scopeOf(v), v.Session), mcpconf.ListingFileName)
	decls, err := Decls(cfg.Layout, v.Def, scopeOf(v), v.Session)
	l := &mcpconf.Listing{}
	if err != nil {
		l.Errors = append(l.Errors, mcpconf.ServerError{Server: "*", Error: err.Error()})
	} else if len(decls) == 0 {
		if old, err := mcpconf.ReadListing(path); err == nil && len(old.Tools)+len(old.Errors) == 0 {
			return
		}
	}
	if cfg.MCP != nil {
		for _, name := range mcpconf.Names(decls) {
			tools, err := cfg.MCP.Tools(ctx, mcphost.Target{View: v, Name: name, Decl: decls[name]})
			if err != nil {
				l.Errors = append(l.Errors, mcpconf.ServerError{Server: name, Error: err.Error()})
				continue
			}
			for _, t := range tools {
				full := name + "." + t.Name
				if !decideMCP(v.Def, full).Allowed {
					continue // only what this session could call is listed
				}
				l.Tools = append(l.Tools, mcpconf.ListedTool{Name: full, Description: t.Description,
					Schema: mcphost.CompactSchema(t.InputSchema), Hints: hints(t.Annotations)})
			}
		}
	}
	if err := mcpconf.WriteListing(path, l); err != nil {
		cfg.Log.Warn("mcp listing", "err", err)
	}
}

func scopeOf(v sandbox.View) string {
	if v.Scope == "" {
		return layout.ScopePrivate
	}
	return v.Scope
}

// hints renders a tool's annotations for people: shown, granting nothing.
func hints(a *mcp.ToolAnnotations) string {
	if a == nil {
		return ""
	}
	var h []string
	if a.ReadOnlyHint {
		h = append(h, "read-only")
	}
	if a.DestructiveHint != nil {
		h = append(h, fmt.Sprintf("destructive=%v", *a.DestructiveHint))
	}
	return strings.Join(h, ", ")
}

// mcpResult runs a prepared MCP call (off the actor).
func mcpResult(ctx context.Context, cfg *config.Config, call Call, p *mcpPrepared) *Result {
	out := cfg.MCP.Call(ctx, p.target, p.tool.Name, p.tool.Args)
	return &Result{CallID: call.CallID, Name: call.Name, Status: out.Status, Content: out.Content, Truncated: out.Truncated}
}
