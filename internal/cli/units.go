package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/contrib/systemd"
	"github.com/cortexfs/ctx/internal/atomicfile"
)

// UnitsCmd is `ctx install-units [--dir DIR] [--bin PATH]`: it
// writes contrib/systemd's ctx.socket and ctx.service, with ExecStart naming
// this ctx, into the user unit directory. (A top-level command, not
// `ctx daemon install-units`: `ctx daemon` is a leaf that runs the daemon.)
type UnitsCmd struct {
	Dir string `help:"Unit directory (default: $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user)." type:"path" placeholder:"DIR"`
	Bin string `help:"The ctx binary ExecStart runs (default: this ctx)." type:"path" placeholder:"PATH"`
}

// Help is the long help of `ctx install-units --help`.
func (c *UnitsCmd) Help() string {
	return `ctx.socket listens on $XDG_RUNTIME_DIR/cortexfs/system.sock (mode 0600 in a
0700 directory); ctx.service (Type=notify, WatchdogSec=30s) runs "ctx daemon"
when the first client connects. CTX_ROOT, when set, is written into
ctx.service. Each file is replaced atomically.

Examples:
  ctx install-units
  systemctl --user daemon-reload && systemctl --user enable --now ctx.socket
  ctx install-units --dir ~/.local/share/systemd/user --bin /usr/local/bin/ctx`
}

func (c *UnitsCmd) Run(env *Env) error {
	dir := c.Dir
	if dir == "" {
		cfg := os.Getenv("XDG_CONFIG_HOME")
		if cfg == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return Exit(ExitUsage, fmt.Errorf("install-units: no home directory; give --dir: %w", err))
			}
			cfg = filepath.Join(home, ".config")
		}
		dir = filepath.Join(cfg, "systemd", "user")
	}
	bin := c.Bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return Exit(ExitUsage, fmt.Errorf("install-units: cannot find this ctx; give --bin: %w", err))
		}
		if bin, err = filepath.EvalSymlinks(exe); err != nil {
			bin = exe
		}
	}
	var extra []string
	if r := os.Getenv("CTX_ROOT"); r != "" {
		extra = append(extra, "CTX_ROOT="+env.Layout.Root)
	}
	if rt := os.Getenv("CTX_RUNTIME_DIR"); rt != "" {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x == "" || filepath.Clean(rt) != filepath.Join(x, "cortexfs") {
			fmt.Fprintf(env.Stderr, "ctx: warning: CTX_RUNTIME_DIR=%s, but ctx.socket listens in $XDG_RUNTIME_DIR/cortexfs: clients with this setting will not reach the socket-activated daemon\n", rt)
		}
	}
	// Render every unit before writing any: a refused ctx.service must not
	// leave a new ctx.socket beside a missing or older service.
	rendered := make([][]byte, len(systemd.Names))
	for i, name := range systemd.Names {
		b, err := systemd.Render(name, bin, extra)
		if err != nil {
			return Exit(ExitUsage, err)
		}
		rendered[i] = b
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install-units: %w", err)
	}
	for i, name := range systemd.Names {
		p := filepath.Join(dir, name)
		if err := atomicfile.WriteFile(p, rendered[i], 0o644); err != nil {
			return fmt.Errorf("install-units: %w", err)
		}
		fmt.Fprintf(env.Stdout, "wrote %s\n", p)
	}
	fmt.Fprintf(env.Stdout, "ExecStart=%s daemon\nnext: systemctl --user daemon-reload && systemctl --user enable --now ctx.socket\n", bin)
	return nil
}
