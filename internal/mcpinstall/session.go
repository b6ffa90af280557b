package mcpinstall

import (
	"path/filepath"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
)

// SessionDir holds the MCP servers one private session was given by its
// editor over ACP (`session/new`/`session/load` mcpServers):
// home/<uid>/secrets/mcp-session/<agent>/<session>/ (0700), with the
// declaration file mcp.json and one NAME.env per server with env values.
// It lies outside every sandbox (the session's own directory is under the
// agent home, which the agent writes), so no agent can declare a server;
// and it is keyed by session, so no other session sees them. It is removed
// with the session (sessions.Remove).
func SessionDir(l layout.Layout, agent, session string) string {
	return filepath.Join(l.UserHome(), "secrets", "mcp-session", agent, session)
}

// SessionFile is the declaration file of a session's own servers.
func SessionFile(l layout.Layout, agent, session string) string {
	return filepath.Join(SessionDir(l, agent, session), mcpconf.FileName)
}

// SessionEnvFile holds the env values of one of a session's servers.
func SessionEnvFile(l layout.Layout, agent, session, name string) string {
	return filepath.Join(SessionDir(l, agent, session), name+".env")
}
