package ctxd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/version"
	"github.com/cortexfs/ctx/internal/workspace"
)

// MCPTools is `ctx mcp tools NAME [--agent A]`: the server started once
// in a sandbox (the agent's view with agent, else a bare one) with the
// caller's cwd as its workspace, its tools listed, the server stopped. It
// runs here, not in ctx, because it starts a sandbox (the client links
// none of that).
func MCPTools(ctx context.Context, l layout.Layout, name, agent string, stdout, stderr io.Writer) error {
	user, err := mcpconf.Load(filepath.Join(l.UserHome(), mcpconf.FileName))
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	var agentFile *mcpconf.File
	var view sandbox.View
	if agent != "" {
		def, err := agentdef.Load(l, agent)
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if agentFile, err = mcpconf.Load(filepath.Join(def.Control, mcpconf.FileName)); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		view = sandbox.View{Layout: l, Def: def, Session: "mcp-tools", Placeholders: workspace.NewRegistry()}
	}
	// The caller's cwd is its workspace, judged as a request's workspace is
	// (agentdef.OpenWorkspace): a server given /workspace can then be
	// listed. A directory that would be refused is not bound, and says so.
	if wd, err := os.Getwd(); err == nil {
		ws, err := judgeWorkspace(l, agent, wd)
		if err != nil {
			fmt.Fprintf(stderr, "ctx: no workspace bound (a server given /workspace will not find it): %v\n", err)
		} else {
			view.Workspace = ws
		}
	}
	decl := mcpconf.Merge(user, agentFile)[name]
	if decl == nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("no MCP server %s (ctx mcp list)", name)}
	}
	bw, err := bwrap.Find(os.Getenv("CTX_BWRAP"))
	if err != nil {
		return fmt.Errorf("mcp tools: %w", err)
	}
	if view.Def != nil {
		if err := sandbox.EnsureEtc(l); err != nil {
			return fmt.Errorf("mcp tools: %w", err)
		}
	}
	m := mcphost.New(mcphost.Options{Layout: l, Bwrap: bw, Version: version.Version})
	tools, err := m.Probe(ctx, mcphost.Target{View: view, Name: name, Decl: decl})
	if err != nil {
		return err
	}
	for _, t := range tools {
		first, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
		fmt.Fprintf(stdout, "%s.%s\t%s\n", name, t.Name, first)
		fmt.Fprintf(stdout, "  args: %s\n", mcphost.CompactSchema(t.InputSchema))
	}
	return nil
}

// judgeWorkspace is the real path of dir when it may be a workspace of
// agent (of any agent, with no .d/protect grants, when agent is "").
func judgeWorkspace(l layout.Layout, agent, dir string) (string, error) {
	var d *workspace.Dir
	var err error
	if agent != "" {
		d, err = agentdef.OpenWorkspace(l, agent, dir, nil)
	} else {
		g, _ := workspace.ParseGrants(nil)
		d, err = workspace.Open(dir, workspace.Options{Layout: l, Grants: g, Write: true, Resolve: true})
	}
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Path, nil
}
