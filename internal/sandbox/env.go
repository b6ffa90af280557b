package sandbox

import (
	"strconv"

	"github.com/cortexfs/ctx/internal/layout"
)

// The environment of every process in a view (B3: exactly the allowlist;
// X11: CTX_* held by the runtime).

// BaseEnv is the runtime-held environment every sandboxed process of the
// view gets (B3 names; CTX_* are runtime-held, X11).
func (v View) BaseEnv() map[string]string {
	uid := strconv.Itoa(v.Layout.UID)
	return map[string]string{
		"CTX_ROOT":          layout.SandboxRoot,
		"CTX_HOME":          layout.SandboxRoot + "/home/" + uid,
		"CTX_AGENT":         v.Def.Name,
		"CTX_AGENT_SUBJECT": v.Subject(),
		"CTX_PATH":          v.Def.CTXPath,
		"HOME":              layout.SandboxHome,
	}
}

// IdentityEnv is the part of the B3 allowlist that names the user, the
// terminal type and the locale: every sandboxed process gets it, in a view
// or not (an MCP server started outside any agent's view). The one builder
// of the agent environment's fixed names. spec: B3
func IdentityEnv(term string) map[string]string {
	return map[string]string{"USER": "agent", "LOGNAME": "agent", "TERM": term, "LANG": "C.UTF-8"}
}

// Shell is the SHELL of every process in a view: tsh.
const Shell = layout.SandboxRoot + "/bin/tsh"

// ShellEnv is exactly the B3 allowlist of a process in the view (a tool,
// the terminal's shell): BaseEnv, IdentityEnv and SHELL. spec: B3
func (v View) ShellEnv(term string) map[string]string {
	env := v.BaseEnv()
	for k, val := range IdentityEnv(term) {
		env[k] = val
	}
	env["SHELL"] = Shell
	return env
}

// ToolEnv is the environment of a tool process: exactly the B3 allowlist
// plus the run id and control socket the agent.update tool needs.
func (v View) ToolEnv() map[string]string {
	env := v.ShellEnv("dumb")
	env["CTX_RUN"] = v.Run
	env["CTX_CONTROL_SOCKET"] = layout.SandboxControlSocket
	return env
}

// AgentEnv is an executable agent's environment: .d/env, then the
// runtime-held variables (which .d/env cannot override), nothing of the
// daemon's own environment (X11, B4).
func (v View) AgentEnv(step int) map[string]string {
	env := map[string]string{}
	for _, kv := range v.Def.Env {
		env[kv.Key] = kv.Value
	}
	for k, val := range v.BaseEnv() {
		env[k] = val
	}
	env["CTX_SESSION"] = v.Session
	env["CTX_RUN"] = v.Run
	env["CTX_STEP"] = strconv.Itoa(step)
	return env
}
