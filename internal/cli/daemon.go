package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cortexfs/ctx/internal/binstall"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/toolset"
)

// DaemonCmd is `ctx daemon`: it execs ctxd, the daemon binary beside ctx.
// The process keeps its pid, environment and descriptors,
// so systemd's socket activation (LISTEN_PID, LISTEN_FDS), NOTIFY_SOCKET and
// signals reach the daemon as before.
type DaemonCmd struct{}

func (c *DaemonCmd) Run(env *Env) error {
	return execDaemon("daemon")
}

// ExecDaemon is `ctx daemon` without the CLI's parse: ctx's main calls it
// first thing. It returns only when the exec failed, with the exit code.
func ExecDaemon() int {
	err := execDaemon("daemon")
	fmt.Fprintln(os.Stderr, "ctx:", err)
	return CodeOf(err)
}

// execDaemon replaces this process with `ctxd ARGS...`; it returns only
// when that fails.
func execDaemon(args ...string) error {
	bin, err := client.DaemonBinary()
	if err != nil {
		return Exit(ExitUnavailable, err)
	}
	err = syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	return Exit(ExitUnavailable, fmt.Errorf("exec %s: %w", bin, err))
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
	if err := binstall.Install(selfDir(), env.Layout.BinDir()); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "CTX_ROOT %s ready\n", env.Layout.Root)
	// The standard toolset, from the ctxtools binary beside ctx.
	bin := filepath.Join(selfDir(), toolset.Binary)
	if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
		// ctx alone (go install ./cmd/ctx): everything else still works.
		fmt.Fprintf(env.Stderr, "ctx: no %s beside ctx: the standard toolset is not installed (make install puts it there)\n", toolset.Binary)
		return nil
	}
	rep, err := toolset.Install(bin, env.Layout.ToolDir())
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "tools %s in %s\n", strings.Join(rep.Installed, " "), env.Layout.ToolDir())
	if len(rep.Kept) > 0 {
		fmt.Fprintf(env.Stdout, "kept your own %s (not installed by ctx; the standard one of that name is not installed)\n", strings.Join(rep.Kept, " "))
	}
	return nil
}
