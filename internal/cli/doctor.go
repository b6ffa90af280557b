package cli

// DoctorCmd is `ctx doctor [--json]`: every check with its verdict and,
// when it fails, the fix. It starts no daemon and changes nothing.
type DoctorCmd struct {
	JSON bool `help:"Print one JSON object: {\"ok\":bool,\"checks\":[{\"name\",\"status\":\"ok|warn|fail\",\"message\",\"fix\"}]}."`
}

// Help is the long help of `ctx doctor --help`.
func (c *DoctorCmd) Help() string {
	return `Checks, in order: bwrap (CTX_BWRAP or /usr/bin/bwrap, never PATH); a real
namespace probe (user, PID, network) that names the sysctl or AppArmor fix
when user namespaces are refused; CTX_ROOT and CTX_RUNTIME_DIR ownership and
modes; the daemon's ping and version; the terminal launcher (systemd user
manager or built-in); dev.tty.legacy_tiocsti; every agent definition
(control files, window/model invariant, policy grammar, .d/tools on CTX_PATH,
the prompt a run would build); provider credentials (their source only, never
the key).

Exit status: 0 when every required check passes (warnings allowed), 1 when
one fails.

Examples:
  ctx doctor
  ctx doctor --json | jq '.checks[] | select(.status != "ok")'`
}

// Run execs `ctxd doctor`: the checks probe the systemd user manager over
// D-Bus and the cgroup backends, which only the daemon binary links.
func (c *DoctorCmd) Run(env *Env) error {
	if c.JSON {
		return execDaemon("doctor", "--json")
	}
	return execDaemon("doctor")
}
