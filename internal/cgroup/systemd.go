package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/cortexfs/ctx/internal/limits"
)

// unitConn is the part of go-systemd's *dbus.Conn the scope backend uses.
type unitConn interface {
	StartTransientUnitContext(ctx context.Context, name, mode string, props []sddbus.Property, ch chan<- string) (int, error)
	AttachProcessesToUnit(ctx context.Context, unit, subcgroup string, pids []uint32) error
	KillUnitWithTarget(ctx context.Context, name string, target sddbus.Who, signal int32) error
	StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	ListUnitsByPatternsContext(ctx context.Context, states, patterns []string) ([]sddbus.UnitStatus, error)
	GetUnitTypePropertyContext(ctx context.Context, unit, unitType, name string) (*sddbus.Property, error)
}

var _ unitConn = (*sddbus.Conn)(nil)

// scopes confines each run in a transient scope of the systemd user
// manager (ctx-<uid>-<hash>-run-<id>.scope) with TasksMax, MemoryMax,
// MemorySwapMax=0 and CPUWeight; the manager creates, kills and collects it.
type scopes struct {
	c      unitConn
	prefix string // ctx-<uid>-<hash>-
	mount  string // the unified hierarchy, to list a scope's processes
}

// newScopes connects to the user manager; it is used only on a pure
// cgroup v2 host, where a user manager can apply the limits.
func newScopes(ctx context.Context, base, mount string) (*scopes, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := sddbus.NewUserConnectionContext(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.GetManagerProperty("Version"); err != nil {
		c.Close()
		return nil, err
	}
	return &scopes{c: c, prefix: base + "-", mount: mount}, nil
}

func (s *scopes) unit(name string) string { return s.prefix + name + ".scope" }

func (s *scopes) mode() Mode { return ModeSystemd }

func (s *scopes) describe() string {
	return "systemd user manager: one transient scope per run, " + s.prefix + "run-….scope (TasksMax, MemoryMax, MemorySwapMax=0, CPUWeight)"
}

// scopeProps are the transient scope's properties: its first process and the limits.
func scopeProps(name string, l limits.Limits, pid int) []sddbus.Property {
	return []sddbus.Property{
		sddbus.PropDescription("ctx " + name),
		sddbus.PropPids(uint32(pid)),
		{Name: "TasksMax", Value: godbus.MakeVariant(uint64(l.Tasks))},
		{Name: "MemoryMax", Value: godbus.MakeVariant(uint64(l.Memory))},
		{Name: "MemorySwapMax", Value: godbus.MakeVariant(uint64(0))},
		{Name: "CPUWeight", Value: godbus.MakeVariant(uint64(l.CPUWeight))},
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
	}
}

// place joins the run's scope, or starts it with pid as its first process
// (a scope ends when its last process does: a later step starts it again).
func (s *scopes) place(name string, l limits.Limits, pid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.c.AttachProcessesToUnit(ctx, s.unit(name), "", []uint32{uint32(pid)}); err == nil {
		return nil
	}
	done := make(chan string, 1)
	if _, err := s.c.StartTransientUnitContext(ctx, s.unit(name), "fail", scopeProps(name, l, pid), done); err != nil {
		return fmt.Errorf("start %s: %w", s.unit(name), err)
	}
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("start %s: job %s", s.unit(name), r)
		}
	case <-ctx.Done():
		return fmt.Errorf("start %s: %w", s.unit(name), ctx.Err())
	}
	return nil
}

func (s *scopes) procs(name string) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := s.c.GetUnitTypePropertyContext(ctx, s.unit(name), "Scope", "ControlGroup")
	if err != nil {
		return nil, nil // no such unit: nothing inside
	}
	cg, _ := p.Value.Value().(string)
	if cg == "" {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(s.mount, cg, "cgroup.procs"))
	if err != nil {
		return nil, nil
	}
	return parsePids(b), nil
}

func (s *scopes) kill(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ps, _ := s.procs(name); len(ps) == 0 {
		return nil
	}
	if err := s.c.KillUnitWithTarget(ctx, s.unit(name), sddbus.All, int32(syscall.SIGKILL)); err != nil && !noSuchUnit(err) {
		return fmt.Errorf("kill %s: %w", s.unit(name), err)
	}
	return killLoop(func() ([]int, error) { return s.procs(name) }, nil, nil, 10*time.Second)
}

func (s *scopes) remove(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.c.StopUnitContext(ctx, s.unit(name), "replace", nil); err != nil && !noSuchUnit(err) {
		return fmt.Errorf("stop %s: %w", s.unit(name), err)
	}
	return nil
}

func (s *scopes) leftovers() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	us, err := s.c.ListUnitsByPatternsContext(ctx, nil, []string{s.prefix + "run-*.scope"})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range us {
		n, ok := strings.CutPrefix(u.Name, s.prefix)
		if n, ok2 := strings.CutSuffix(n, ".scope"); ok && ok2 && strings.HasPrefix(n, "run-") {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *scopes) release() {}

func noSuchUnit(err error) bool {
	var de godbus.Error
	if errors.As(err, &de) {
		return de.Name == "org.freedesktop.systemd1.NoSuchUnit" || de.Name == "org.freedesktop.systemd1.LoadFailed"
	}
	var dp *godbus.Error
	return errors.As(err, &dp) && (dp.Name == "org.freedesktop.systemd1.NoSuchUnit" || dp.Name == "org.freedesktop.systemd1.LoadFailed")
}
