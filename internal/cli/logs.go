package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// LogsCmd is `ctx logs [-f] [-n N]`: the daemon's log.
type LogsCmd struct {
	Follow bool `short:"f" help:"Keep printing what is appended."`
	Lines  int  `short:"n" default:"100" help:"Print the last N lines first (0: the whole log)."`
	File   bool `help:"Read the log file even when the systemd unit is active."`
}

// Help is the long help of `ctx logs --help`.
func (c *LogsCmd) Help() string {
	return `When the systemd user unit ctx.service is active (systemctl --user
is-active), its log is in the journal: ctx runs
journalctl --user -u ctx.service. Otherwise it prints $CTX_RUNTIME_DIR/daemon.log,
where a daemon started by a client writes (a "ctx daemon" run by hand logs to
its own stderr). With -f it follows the file across truncation and
replacement; Ctrl+C ends it.

Examples:
  ctx logs -n 20
  ctx logs -f`
}

// journalUnit is the unit whose journal holds the daemon's log.
const journalUnit = "ctx.service"

func (c *LogsCmd) Run(env *Env) error {
	if c.Lines < 0 {
		return Exit(ExitUsage, fmt.Errorf("logs: -n must be 0 or more"))
	}
	if !c.File && unitActive(env.Ctx) {
		return c.journal(env)
	}
	path := env.Layout.DaemonLog()
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !c.Follow {
			return Exit(ExitUnavailable, fmt.Errorf("no daemon log at %s (no daemon was started by a client here, and the systemd unit %s is not active)", path, journalUnit))
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	var off int64
	if f != nil {
		off, err = printTail(env.Stdout, f, c.Lines)
		f.Close()
		if err != nil {
			return err
		}
	}
	if !c.Follow {
		return nil
	}
	ctx, stop := signal.NotifyContext(env.Ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return follow(ctx, env.Stdout, path, off, 200*time.Millisecond)
}

// unitActive says whether systemd runs the daemon (false without systemctl
// or a user manager).
func unitActive(ctx context.Context) bool {
	bin, err := exec.LookPath("systemctl")
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, bin, "--user", "is-active", "--quiet", journalUnit).Run() == nil
}

func (c *LogsCmd) journal(env *Env) error {
	args := []string{"--user", "-u", journalUnit, "--no-pager"}
	if c.Lines > 0 {
		args = append(args, "-n", strconv.Itoa(c.Lines))
	}
	if c.Follow {
		args = append(args, "-f")
	}
	cmd := exec.Command("journalctl", args...)
	cmd.Stdout, cmd.Stderr = env.Stdout, env.Stderr
	signal.Ignore(os.Interrupt) // Ctrl+C ends journalctl; ctx then returns its status
	defer signal.Reset(os.Interrupt)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return Exit(ExitRunError, fmt.Errorf("journalctl %v: %w", args, err))
		}
		return Exit(ExitUnavailable, fmt.Errorf("journalctl: %w", err))
	}
	return nil
}

// printTail writes the last n lines of f (all of it for n == 0), reading
// backwards in blocks so a large log costs only its tail, and returns the
// offset it read up to.
func printTail(w io.Writer, f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	start := int64(0)
	if n > 0 {
		const block = 64 << 10
		seen := 0
		pos := size
		buf := make([]byte, block)
		for pos > 0 && start == 0 {
			step := min(int64(block), pos)
			pos -= step
			if _, err := f.ReadAt(buf[:step], pos); err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			chunk := buf[:step]
			for i := len(chunk) - 1; i >= 0; i-- {
				if chunk[i] != '\n' || pos+int64(i) == size-1 {
					continue // the final newline ends the last line; it does not start one
				}
				seen++
				if seen == n {
					start = pos + int64(i) + 1
					break
				}
			}
		}
	}
	if _, err := io.Copy(w, io.NewSectionReader(f, start, size-start)); err != nil {
		return 0, err
	}
	return size, nil
}

// follow prints what is appended to path from off on, polling every tick.
// A file that shrinks (truncated) or is replaced (another inode) is read
// again from its start; a missing file is waited for.
func follow(ctx context.Context, w io.Writer, path string, off int64, tick time.Duration) error {
	var ino uint64
	if st, err := os.Stat(path); err == nil {
		ino = st.Sys().(*syscall.Stat_t).Ino
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if st, err := os.Stat(path); err == nil {
			cur := st.Sys().(*syscall.Stat_t).Ino
			if cur != ino || st.Size() < off {
				ino, off = cur, 0
			}
			if st.Size() > off {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				n, err := io.Copy(w, io.NewSectionReader(f, off, st.Size()-off))
				f.Close()
				off += n
				if err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
