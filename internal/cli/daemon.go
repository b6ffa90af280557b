package cli

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"strings"

	"github.com/coreos/go-systemd/v22/activation"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/fdhygiene"
	"github.com/cortexfs/ctx/internal/toolset"
	"github.com/cortexfs/ctx/supervisor"
)

// DaemonCmd is `ctx daemon`.
type DaemonCmd struct{}

func (c *DaemonCmd) Run(env *Env) error {
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// issue 11 item 1: nothing the daemon inherited (a client's terminal or
	// files, handed on by auto-start or a shell) reaches a sandbox; only
	// systemd's socket-activation descriptors are kept (NOTIFY_SOCKET is a
	// path, not a descriptor).
	closed, err := fdhygiene.CloseInherited(fdhygiene.KeepListenFDs())
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if len(closed) > 0 {
		log.Info("closed inherited descriptors", "fds", closed)
	}
	cfg, err := config.FromEnv(env.Layout, log)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	cfg.Fault = faultHook()
	d := &supervisor.Daemon{Cfg: cfg, BinDir: selfDir()}
	// Socket activation (LISTEN_FDS): the first unix listener is the system socket.
	if ls, err := activation.Listeners(); err == nil {
		for _, l := range ls {
			if ul, ok := l.(*net.UnixListener); ok {
				d.Listener = ul
				break
			}
		}
	}
	if err := d.Run(env.Ctx); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return nil
}

func selfDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(exe)
}

// InitCmd is `ctx init`.
type InitCmd struct{}

func (c *InitCmd) Run(env *Env) error {
	if err := env.Layout.EnsureRoot(); err != nil {
		return err
	}
	if err := supervisor.Install(selfDir(), env.Layout.BinDir()); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "CTX_ROOT %s ready\n", env.Layout.Root)
	// issue 12: the standard toolset, from the ctxtools binary beside ctx.
	rep, err := toolset.Install(filepath.Join(selfDir(), toolset.Binary), env.Layout.ToolDir())
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "tools %s in %s\n", strings.Join(rep.Installed, " "), env.Layout.ToolDir())
	if len(rep.Kept) > 0 {
		fmt.Fprintf(env.Stdout, "kept your own %s (not installed by ctx; the standard one of that name is not installed)\n", strings.Join(rep.Kept, " "))
	}
	return nil
}
