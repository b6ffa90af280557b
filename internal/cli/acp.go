package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cortexfs/ctx/internal/acpbridge"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/version"
	"github.com/cortexfs/ctx/internal/workspace"
)

// AcpCmd is `ctx acp AGENT`: ctx as an Agent Client Protocol
// agent on stdin/stdout for an editor. Diagnostics go to stderr.
type AcpCmd struct {
	Name  string        `arg:"" help:"Agent name."`
	Grace time.Duration `default:"10s" help:"How long, once the editor is gone, prompts in flight get to cancel their runs and answer."`
}

// Run serves ACP until the editor closes stdin.
func (c *AcpCmd) Run(env *Env) error {
	// Check the agent (and start the daemon) before the first message, so
	// a bad name fails at once with the usual exit code.
	conn, err := connect(env, c.Name)
	if err != nil {
		return err
	}
	conn.Close()
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("agent", c.Name)
	a := acpbridge.NewAgent(acpbridge.Options{
		Agent: c.Name,
		Dial: func(ctx context.Context) (*client.Conn, error) {
			return connect(env, c.Name)
		},
		Redial: redialer(env, c.Name),
		CheckCwd: func(cwd string) (string, error) {
			g, err := agentdef.ReadProtect(env.Layout.AgentControl(c.Name))
			if err != nil {
				g, _ = workspace.ParseGrants(nil)
			}
			d, err := workspace.Open(cwd, workspace.Options{Layout: env.Layout, Grants: g, Write: true, Resolve: true, What: "workspace"})
			if err != nil {
				return "", err
			}
			defer d.Close()
			return d.Path, nil
		},
		SessionExists: func(session string) bool {
			_, err := os.Stat(env.Layout.SessionDir(c.Name, "private", session))
			return err == nil
		},
		MCPRules: func(ws string) (acpbridge.MCPRules, error) {
			def, err := agentdef.Load(env.Layout, c.Name)
			if err != nil {
				// An invalid definition refuses every server (fail closed).
				return acpbridge.MCPRules{}, err
			}
			writable := []string{ws, env.Layout.AgentHome(c.Name)}
			for _, m := range def.Mounts {
				if m.Write {
					writable = append(writable, m.Src)
				}
			}
			return acpbridge.MCPRules{Resolve: mcpinstall.DefaultResolver().Resolve, Net: def.Net(), Cwd: ws, Writable: writable}, nil
		},
		SaveMCP: func(session string, es *acpbridge.EditorServers) error {
			return acpbridge.SaveMCP(env.Layout, c.Name, session, es)
		},
		Version: version.Version,
		Log:     log,
	})
	if err := acpbridge.Serve(env.Ctx, a, env.Stdin, env.Stdout, c.Grace); err != nil {
		return Exit(ExitRunError, fmt.Errorf("acp %s: %w", c.Name, err))
	}
	return nil
}
