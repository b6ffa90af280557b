package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// McpCmd groups the MCP server commands. Declarations live in
// CTX_ROOT/home/<uid>/mcp.json, or with --agent in agent/<name>.d/mcp.json;
// the daemon reads them at every call (no restart needed).
type McpCmd struct {
	Add    McpAddCmd    `cmd:"" help:"Declare an MCP server. Example: ctx mcp add fs -- mcp-server-filesystem /workspace"`
	Import McpImportCmd `cmd:"" help:"Declare the servers of Claude Code's .mcp.json or Codex's config.toml as ctx mcp add would. Example: ctx mcp import .mcp.json --dry-run"`
	List   McpListCmd   `cmd:"" help:"List declared MCP servers. Example: ctx mcp list"`
	Remove McpRemoveCmd `cmd:"" aliases:"rm" help:"Remove an MCP server declaration and its env file. Example: ctx mcp remove fs"`
	Tools  McpToolsCmd  `cmd:"" help:"Start a server once in the sandbox and list its tools. Example: ctx mcp tools fs"`
}

// mcpFile is the declaration file of the user, or of --agent.
func mcpFile(l layout.Layout, agent string) (string, error) {
	if agent == "" {
		return filepath.Join(l.UserHome(), mcpconf.FileName), nil
	}
	if err := layout.CheckName("agent", agent); err != nil {
		return "", Exit(ExitUsage, err)
	}
	if _, err := agentdef.Load(l, agent); err != nil && errors.Is(err, agentdef.ErrNoSuchAgent) {
		return "", Exit(ExitUsage, fmt.Errorf("no such agent: %s", agent))
	}
	return filepath.Join(l.AgentControl(agent), mcpconf.FileName), nil
}

// McpAddCmd is `ctx mcp add NAME [--env K[=V]]… [--net] [--agent A] -- COMMAND ARGS…`
// or `ctx mcp add NAME --net --url URL`.
type McpAddCmd struct {
	Name    string   `arg:"" help:"Server name; its tools are NAME.TOOL."`
	Command []string `arg:"" optional:"" passthrough:"" help:"COMMAND ARGS… (after --): run inside the agent's sandbox over stdio."`
	Env     []string `help:"KEY (its value taken from this command's environment, so it is on no command line) or KEY=VALUE, for this server's process only; stored owner-only in home/<uid>/secrets/mcp/NAME.env." placeholder:"K[=V]"`
	Net     bool     `help:"Give the server network access (required with --url)."`
	URL     string   `name:"url" help:"A streamable HTTP server instead of a command (needs --net)."`
	Agent   string   `help:"Declare for this agent only (agent/<name>.d/mcp.json), overriding a user server of the same name."`
	Force   bool     `help:"Replace an existing declaration of NAME."`
}

func (c *McpAddCmd) Run(env *Env) error {
	if err := mcpconf.CheckName(c.Name); err != nil {
		return Exit(ExitUsage, err)
	}
	cmd := c.Command
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	var s *mcpconf.Server
	switch {
	case c.URL != "" && len(cmd) > 0:
		return Exit(ExitUsage, errors.New("give either --url or -- COMMAND, not both"))
	case c.URL != "":
		if len(c.Env) > 0 {
			return Exit(ExitUsage, errors.New("--env is for stdio servers (the values go to the server's process)"))
		}
		s = &mcpconf.Server{URL: c.URL, Net: c.Net}
	case len(cmd) == 0:
		return Exit(ExitUsage, errors.New("missing the server command: ctx mcp add NAME -- COMMAND ARGS…"))
	default:
		var err error
		if s, err = mcpinstall.DefaultResolver().Resolve(cmd[0], cmd[1:]); err != nil {
			return Exit(ExitUsage, err)
		}
		s.Net = c.Net
	}
	vals := map[string]string{}
	for _, kv := range c.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			// A secret typed as KEY=VALUE is on this command's command
			// line, which every local user can read while it runs (ps):
			// KEY alone takes the value from the environment instead.
			if v, ok = os.LookupEnv(k); !ok {
				return Exit(ExitUsage, fmt.Errorf("--env %s: %s is not set in this environment (give KEY=VALUE, or export KEY first)", k, k))
			}
		}
		if err := mcpconf.CheckEnvName(k); err != nil {
			return Exit(ExitUsage, err)
		}
		vals[k] = v
		s.Env = append(s.Env, k)
	}
	if err := s.Validate(c.Name); err != nil {
		return Exit(ExitUsage, err)
	}
	path, err := mcpFile(env.Layout, c.Agent)
	if err != nil {
		return err
	}
	f, err := mcpconf.Load(path)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	if _, ok := f.Servers[c.Name]; ok && !c.Force {
		return Exit(ExitUsage, fmt.Errorf("MCP server %s is already declared in %s (use --force to replace it)", c.Name, path))
	}
	if len(vals) > 0 {
		data, err := mcpconf.FormatEnv(vals)
		if err != nil {
			return Exit(ExitUsage, err)
		}
		ef := mcpinstall.EnvFile(env.Layout, c.Name)
		if err := os.MkdirAll(filepath.Dir(ef), 0o700); err != nil {
			return fmt.Errorf("mcp add: %w", err)
		}
		if err := atomicfile.WriteFile(ef, data, 0o600); err != nil {
			return fmt.Errorf("mcp add: env file: %w", err)
		}
	}
	f.Servers[c.Name] = s
	if err := mcpconf.Save(path, f); err != nil {
		return fmt.Errorf("mcp add: %w", err)
	}
	fmt.Fprintf(env.Stdout, "added MCP server %s to %s\n", c.Name, path)
	if s.URL == "" {
		fmt.Fprintf(env.Stdout, "  runs: %s\n", strings.Join(append([]string{s.Command}, s.Args...), " "))
		if len(s.Binds) > 0 {
			fmt.Fprintf(env.Stdout, "  read-only in its sandbox: %s\n", strings.Join(s.Binds, " "))
		}
	}
	fmt.Fprintf(env.Stdout, "its tools are %s.TOOL; an agent policy may name them (allow tool %s.*)\n", c.Name, c.Name)
	return nil
}

// McpListCmd is `ctx mcp list [--agent A]`.
type McpListCmd struct {
	Agent string `help:"Also show this agent's own servers, as the agent sees them."`
}

func (c *McpListCmd) Run(env *Env) error {
	user, err := mcpconf.Load(filepath.Join(env.Layout.UserHome(), mcpconf.FileName))
	if err != nil {
		return Exit(ExitUsage, err)
	}
	var agent *mcpconf.File
	if c.Agent != "" {
		path, err := mcpFile(env.Layout, c.Agent)
		if err != nil {
			return err
		}
		if agent, err = mcpconf.Load(path); err != nil {
			return Exit(ExitUsage, err)
		}
	}
	all := mcpconf.Merge(user, agent)
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWHERE\tNET\tCOMMAND")
	for _, n := range mcpconf.Names(all) {
		s := all[n]
		where := "user"
		if agent != nil && agent.Servers[n] != nil {
			where = "agent " + c.Agent
		}
		what := s.URL
		if what == "" {
			what = strings.Join(append([]string{s.Command}, s.Args...), " ")
		}
		if len(s.Env) > 0 {
			what += "  (env: " + strings.Join(s.Env, ",") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", n, where, s.Net, what)
	}
	return tw.Flush()
}

// McpRemoveCmd is `ctx mcp remove NAME [--agent A]`.
type McpRemoveCmd struct {
	Name  string `arg:"" help:"Server name."`
	Agent string `help:"Remove from this agent's declarations."`
}

func (c *McpRemoveCmd) Run(env *Env) error {
	if err := mcpconf.CheckName(c.Name); err != nil {
		return Exit(ExitUsage, err)
	}
	path, err := mcpFile(env.Layout, c.Agent)
	if err != nil {
		return err
	}
	f, err := mcpconf.Load(path)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	if _, ok := f.Servers[c.Name]; !ok {
		return Exit(ExitUsage, fmt.Errorf("no MCP server %s in %s", c.Name, path))
	}
	delete(f.Servers, c.Name)
	if err := mcpconf.Save(path, f); err != nil {
		return fmt.Errorf("mcp remove: %w", err)
	}
	if err := os.Remove(mcpinstall.EnvFile(env.Layout, c.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mcp remove: env file: %w", err)
	}
	fmt.Fprintf(env.Stdout, "removed MCP server %s from %s\n", c.Name, path)
	return nil
}

// McpToolsCmd is `ctx mcp tools NAME [--agent A]`: the server started once
// in a sandbox (the agent's view with --agent, else a bare one), its tools
// listed, the server stopped.
type McpToolsCmd struct {
	Name  string `arg:"" help:"Server name."`
	Agent string `help:"Run it in this agent's view (and see this agent's declarations)."`
}

func (c *McpToolsCmd) Run(env *Env) error {
	// It starts a sandbox: ctxd does it (the client links no runtime).
	args := []string{"mcp-tools", c.Name}
	if c.Agent != "" {
		args = append(args, "--agent", c.Agent)
	}
	return execDaemon(args...)
}
