package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// mcpFiles validates every MCP declaration file — the user's and each
// agent's .d/mcp.json — as a call reads it: an invalid file fails every
// tsh call of the servers it declares (README "MCP servers as tsh tools").
func (e *Env) mcpFiles() []Check {
	var out []Check
	user := filepath.Join(e.Layout.UserHome(), mcpconf.FileName)
	if _, err := os.Lstat(user); err == nil {
		out = append(out, CheckMCPFile(e.Layout, user, ""))
	}
	names, _ := agentdef.List(e.Layout)
	for _, n := range names {
		p := filepath.Join(e.Layout.AgentControl(n), mcpconf.FileName)
		if _, err := os.Lstat(p); err == nil {
			out = append(out, CheckMCPFile(e.Layout, p, n))
		}
	}
	return out
}

// CheckMCPFile judges one declaration file (agent "" is the user's): it
// fails when the file does not parse — naming `ctx mcp import` when it is
// Claude Code's .mcp.json copied in — and warns when a declared command
// or bind is gone or a server's secrets file is missing.
func CheckMCPFile(l layout.Layout, path, agent string) Check {
	c := Check{Name: "mcp " + path, Status: OK}
	flag := ""
	if agent != "" {
		flag = " --agent " + agent
	}
	f, err := mcpconf.Load(path)
	if err != nil {
		c.Status, c.Message = Fail, err.Error()+" (every call of its servers is denied)"
		c.Fix = "fix the file, or remove it (ctx mcp add" + flag + " writes a valid one)"
		if strings.Contains(err.Error(), "mcpServers") {
			c.Fix = fmt.Sprintf("ctx mcp import %s%s (it rewrites the file in ctx's format; --dry-run shows what it would do)", path, flag)
		}
		return c
	}
	var warns []string
	for _, n := range mcpconf.Names(f.Servers) {
		s := f.Servers[n]
		if s.URL != "" {
			continue
		}
		for _, p := range append([]string{s.Command}, s.Binds...) {
			if _, err := os.Stat(p); err != nil {
				warns = append(warns, fmt.Sprintf("server %s: %s is gone (install it again, then ctx mcp add%s --force %s -- COMMAND …)", n, p, flag, n))
			}
		}
		if len(s.Env) > 0 {
			if _, err := os.Lstat(mcpinstall.EnvFile(l, n)); err != nil {
				warns = append(warns, fmt.Sprintf("server %s: its env values file %s is missing (ctx mcp add%s --force %s --env K=V … again)", n, mcpinstall.EnvFile(l, n), flag, n))
			}
		}
	}
	c.Message = fmt.Sprintf("valid: %d servers", len(f.Servers))
	if len(f.Servers) > 0 {
		c.Message += " (" + strings.Join(mcpconf.Names(f.Servers), ", ") + ")"
	}
	if len(warns) > 0 {
		c.Status = Warn
		c.Message += "; " + strings.Join(warns, "; ")
		c.Fix = "ctx mcp list" + flag + " shows the declarations"
	}
	return c
}
