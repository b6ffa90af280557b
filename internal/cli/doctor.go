package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/doctor"
	"github.com/cortexfs/ctx/supervisor"
)

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

func (c *DoctorCmd) Run(env *Env) error {
	e := doctor.System(env.Layout, config.Version)
	e.SystemdPing = systemdPing
	r := doctor.Run(env.Ctx, e)
	var err error
	if c.JSON {
		err = r.WriteJSON(env.Stdout)
	} else {
		err = r.WriteText(env.Stdout)
	}
	if err != nil {
		return err
	}
	if n := r.Count(doctor.Fail); n > 0 {
		// Not Exit(code, nil): kong joins Run's error with its hooks', so
		// main's silent-exit test misses it and would print "exit 1".
		return Exit(ExitRunError, fmt.Errorf("doctor: %d check(s) failed", n))
	}
	return nil
}

// systemdPing asks the user manager the way the daemon's launcher picks
// it (supervisor.NewSystemdLauncher): go-systemd over D-Bus
// (NewUserConnectionContext) first, then systemctl --user.
func systemdPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	m, err := supervisor.NewDBusManager(ctx)
	if err == nil {
		defer m.Close()
		if err = m.Ping(ctx); err == nil {
			return nil
		}
	}
	sc, serr := supervisor.NewSystemctl()
	if serr != nil {
		return err
	}
	return sc.Ping(ctx)
}
