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
)

// MCPTools is `ctx mcp tools NAME [--agent A]` (issue 13): the server
// started once in a sandbox (the agent's view with agent, else a bare
// one), its tools listed, the server stopped. It runs here, not in ctx,
// because it starts a sandbox (issue 15 item 4: the client links none of
// that).
func MCPTools(ctx context.Context, l layout.Layout, name, agent string, stdout io.Writer) error {
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
		view = sandbox.View{Layout: l, Def: def, Session: "mcp-tools"}
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
