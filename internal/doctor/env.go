package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// Info is what the directory checks need of a path (from lstat).
type Info struct {
	Mode fs.FileMode // type and permission bits
	UID  int
}

// Env is where Run gets its observations; System fills it from the machine.
// Tests replace single fields.
type Env struct {
	Layout layout.Layout
	// Getenv reads this process's environment: CTX_BWRAP, CTX_LAUNCHER,
	// CTX_NO_AUTOSTART and the provider keys are the daemon's settings, and
	// doctor assumes the daemon gets the same environment as the shell.
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	Stat     func(string) (Info, error)
	// FindBwrap is bwrap.Find: the configured path or /usr/bin/bwrap, never PATH.
	FindBwrap func(configured string) (string, error)
	// Probe runs bwrap with args and returns its stderr and exit code; err
	// only when it could not be run at all.
	Probe func(ctx context.Context, bwrap string, args []string) (stderr string, code int, err error)
	// ProbeSeccomp starts one sandbox with the seccomp filter and checks
	// the filter refuses what it must (nil: ok).
	ProbeSeccomp func(ctx context.Context, bwrap string) error
	// ProbeNested starts one sandbox and tries to create a user namespace
	// inside it (unshare -U, bwrap), as an agent's own sandbox would.
	ProbeNested func(ctx context.Context, bwrap string) (NestedProbe, error)
	// Ping asks the daemon's system socket and returns the pong's version.
	Ping func(ctx context.Context) (version string, err error)
	// SystemdPing succeeds when a systemd user manager answers.
	SystemdPing func(ctx context.Context) error
	// Cgroups chooses the run cgroup mode the way the daemon does
	// (cgroup.New) and says where runs go and why no better mode applies.
	Cgroups func(ctx context.Context) (mode cgroup.Mode, where, why string)
	// Version is this ctx's version (compared with the daemon's).
	Version string
}

// System is the Env of this machine for layout l. SystemdPing is left to
// the caller (the launcher that talks to the manager lives in supervisor).
func System(l layout.Layout, version string) *Env {
	return &Env{
		Layout:       l,
		Getenv:       os.Getenv,
		ReadFile:     os.ReadFile,
		Stat:         lstat,
		FindBwrap:    bwrap.Find,
		Probe:        runProbe,
		ProbeSeccomp: probeSeccomp,
		ProbeNested:  probeNested,
		Ping:         func(ctx context.Context) (string, error) { return PingVersion(ctx, l.SystemSocket()) },
		SystemdPing: func(context.Context) error {
			return errors.New("not checked")
		},
		Cgroups: func(ctx context.Context) (cgroup.Mode, string, string) {
			m := cgroup.New(ctx, l.UID, l.Root, nil)
			defer m.Release() // only an empty base goes; a daemon makes it again
			return m.Mode(), m.Describe(), m.Why()
		},
		Version: version,
	}
}

func lstat(p string) (Info, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return Info{}, err
	}
	in := Info{Mode: st.Mode(), UID: -1}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		in.UID = int(sys.Uid)
	}
	return in, nil
}

// runProbe runs bwrap once, bounded: 10 s, its own process group, stderr
// capped at 8 KiB.
func runProbe(ctx context.Context, bw string, args []string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bw, args...)
	var stderr capped
	cmd.Stderr = &stderr
	cmd.Env = []string{} // the probe needs nothing of ours
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { killtree.Kill(cmd.Process.Pid); return nil }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0, nil
	case ctx.Err() != nil:
		return stderr.String(), -1, fmt.Errorf("bwrap did not finish within 10s")
	case errors.As(err, &ee):
		return stderr.String(), ee.ExitCode(), nil
	}
	return stderr.String(), -1, err
}

// capped keeps the first 8 KiB written to it.
type capped struct{ b bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 8<<10 - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.b.String() }

// PingVersion sends {"op":"ping"} to the system socket and returns the
// pong's version. It never starts a daemon.
func PingVersion(ctx context.Context, socket string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := ipc.Dial(ctx, socket)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(`{"op":"ping"}` + "\n")); err != nil {
		return "", err
	}
	line, err := ipc.NewLineReader(c).Next()
	if err != nil {
		return "", err
	}
	var f struct {
		Type    string `json:"type"`
		Version string `json:"version"`
	}
	if json.Unmarshal(line, &f) != nil || f.Type != ipc.TypePong {
		return "", fmt.Errorf("unexpected answer to ping: %.200s", line)
	}
	return f.Version, nil
}
