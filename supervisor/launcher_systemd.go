package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortexfs/ctx/internal/holdfifo"

	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/procstat"
)

// SystemdLauncher runs each terminal generation as a transient unit of the
// user's systemd manager (T1: the equivalent of `systemd-run --user`):
// KillMode=control-group, SendSIGHUP=yes (an interactive shell ignores
// SIGTERM), unit and invocation id recorded; stop goes through the manager.
// The unit's main process is ctxterm (on the host), the parent of the
// terminal's bwrap, which keeps --die-with-parent; the unit outlives the
// daemon.
//
// The manager is reached through a UnitManager. The default one drives
// systemd-run and systemctl, which speak D-Bus to the manager: go-systemd's
// dbus package cannot be built in this module today (its dependency
// github.com/godbus/dbus/v5 has no go.sum entry).
type SystemdLauncher struct {
	m     UnitManager
	roots *launchroot.Registry
	log   *slog.Logger

	mu       sync.Mutex
	releases map[int]func() // launch-root releases, called when the unit's process ends
}

var _ terminal.Launcher = (*SystemdLauncher)(nil)

// UnitManager is the part of the systemd user manager the launcher uses.
type UnitManager interface {
	// Ping succeeds when a user manager answers.
	Ping(ctx context.Context) error
	// StartTransient starts argv as the transient service unit name with
	// the given properties and waits for the start job.
	StartTransient(ctx context.Context, name string, props []string, argv []string) error
	// Show returns the unit's properties (MainPID, InvocationID, ActiveState, ...).
	Show(ctx context.Context, name string) (map[string]string, error)
	// Stop queues a stop job for the unit.
	Stop(ctx context.Context, name string) error
}

// NewSystemdLauncher returns the systemd launcher if a user manager answers.
func NewSystemdLauncher(ctx context.Context, roots *launchroot.Registry, log *slog.Logger) (*SystemdLauncher, error) {
	// go-systemd over D-Bus first; systemd-run/systemctl where the bus
	// library cannot connect (e.g. only a private socket is reachable).
	if m, err := NewDBusManager(ctx); err == nil {
		l, err := NewSystemdLauncherWith(ctx, m, roots, log)
		if err == nil {
			return l, nil
		}
		m.Close()
	}
	m, err := NewSystemctl()
	if err != nil {
		return nil, err
	}
	return NewSystemdLauncherWith(ctx, m, roots, log)
}

// NewSystemdLauncherWith is NewSystemdLauncher with an explicit manager.
func NewSystemdLauncherWith(ctx context.Context, m UnitManager, roots *launchroot.Registry, log *slog.Logger) (*SystemdLauncher, error) {
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := m.Ping(pctx); err != nil {
		return nil, fmt.Errorf("systemd user manager: %w", err)
	}
	return &SystemdLauncher{m: m, roots: roots, log: log, releases: map[int]func(){}}, nil
}

// Name is "systemd".
func (s *SystemdLauncher) Name() string { return LauncherSystemd }

// Start starts the unit, reads its main pid and invocation id, registers
// the launch root, and only then releases the unit: its first process,
// ctxterm, waits on a FIFO in the runtime directory (--hold) before it
// starts anything, and the daemon writes to that FIFO after the
// registration. The manager cannot hand the unit a descriptor, hence the
// FIFO instead of the built-in launcher's pipe. spec: T1 L2 U2
func (s *SystemdLauncher) Start(ctx context.Context, ls terminal.LaunchSpec) (terminal.Receipt, error) {
	if ls.HoldFIFO == "" {
		return terminal.Receipt{}, errors.New("systemd launcher: no hold FIFO")
	}
	if err := holdfifo.Make(ls.HoldFIFO); err != nil {
		return terminal.Receipt{}, fmt.Errorf("systemd launcher: %w", err)
	}
	defer os.Remove(ls.HoldFIFO)
	argv, err := ls.Command(terminal.Hold{FIFO: ls.HoldFIFO})
	if err != nil {
		return terminal.Receipt{}, fmt.Errorf("systemd launcher: %w", err)
	}
	// The unit's environment (ctxterm's, which it hands the sandbox by
	// descriptor) comes from a file beside the FIFO, read by the manager
	// when it starts ExecStart; nothing of it is on a command line. A
	// unit's environment is shown to its user alone. spec: B3
	envFile := ls.HoldFIFO + ".env"
	if err := writeEnvFile(envFile, ls.Env); err != nil {
		return terminal.Receipt{}, fmt.Errorf("systemd launcher: %w", err)
	}
	defer os.Remove(envFile)
	props := []string{
		"KillMode=control-group",
		"EnvironmentFile=" + envFile,
		"SendSIGHUP=yes",
		"TimeoutStopSec=" + strconv.Itoa(int(stopGrace(0).Seconds())+2) + "s",
		"Description=ctx terminal " + ls.Receipt.Agent + "/" + ls.Receipt.Session,
	}
	if err := s.m.StartTransient(ctx, ls.Unit, props, argv); err != nil {
		return terminal.Receipt{}, fmt.Errorf("systemd launcher: start %s: %w", ls.Unit, err)
	}
	fail := func(err error) (terminal.Receipt, error) {
		_ = s.m.Stop(context.Background(), ls.Unit)
		return terminal.Receipt{}, fmt.Errorf("systemd launcher: %s: %w", ls.Unit, err)
	}
	info, err := s.m.Show(ctx, ls.Unit)
	if err != nil {
		return fail(err)
	}
	pid, _ := strconv.Atoi(info["MainPID"])
	st, err := procstat.Read(pid)
	if err != nil || pid <= 0 {
		return fail(fmt.Errorf("main pid %q: exited at once (see journalctl --user -u %s)", info["MainPID"], ls.Unit))
	}
	boot, err := procstat.BootID()
	if err != nil {
		return fail(err)
	}
	r := ls.Receipt
	r.Launcher, r.Unit, r.Invocation = LauncherSystemd, ls.Unit, info["InvocationID"]
	r.PID, r.StartTime, r.BootID = pid, st.StartTime, boot
	release := func() {}
	if s.roots != nil {
		// spec: U2 — recorded first (pid and start time, pinned), then released.
		if release, err = s.roots.Register(pid, ls.Ident); err != nil {
			return fail(err)
		}
	}
	if err := holdfifo.Release(ls.HoldFIFO, func() bool { return terminal.Alive(r) }, holdTimeout); err != nil {
		release()
		return fail(err)
	}
	s.keep(pid, release)
	return r, nil
}

func (s *SystemdLauncher) keep(pid int, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.releases[pid]; ok {
		old()
	}
	s.releases[pid] = release
}

// Adopt checks that the unit still runs the recorded invocation and main pid.
func (s *SystemdLauncher) Adopt(ctx context.Context, r terminal.Receipt) error {
	if r.Launcher != LauncherSystemd {
		return fmt.Errorf("systemd launcher: receipt of the %q launcher: %w", r.Launcher, terminal.ErrGone)
	}
	info, err := s.m.Show(ctx, r.Unit)
	if err != nil {
		return fmt.Errorf("systemd launcher: %s: %v: %w", r.Unit, err, terminal.ErrGone)
	}
	if info["ActiveState"] != "active" || info["InvocationID"] != r.Invocation || info["MainPID"] != strconv.Itoa(r.PID) || !terminal.Alive(r) {
		return fmt.Errorf("systemd launcher: %s is %s (invocation %s, pid %s): %w", r.Unit, info["ActiveState"], info["InvocationID"], info["MainPID"], terminal.ErrGone)
	}
	if s.roots != nil {
		release, err := s.roots.Register(r.PID, launchroot.Identity{UID: r.UID, Agent: r.Agent, Session: r.Session, Run: r.Terminal})
		if err != nil {
			s.log.Warn("adopted terminal: launch root not registered", "unit", r.Unit, "err", err)
		} else {
			s.keep(r.PID, release)
		}
	}
	return nil
}

// Wait waits for the unit's main process to end (pidfd), then asks the
// manager for its result.
func (s *SystemdLauncher) Wait(ctx context.Context, r terminal.Receipt) (terminal.Exit, error) {
	if err := waitPID(ctx, r); err != nil {
		return terminal.Exit{}, err
	}
	s.mu.Lock()
	if release, ok := s.releases[r.PID]; ok {
		release()
		delete(s.releases, r.PID)
	}
	s.mu.Unlock()
	ex := terminal.Exit{At: time.Now(), Reason: "unit main process ended"}
	if info, err := s.m.Show(context.Background(), r.Unit); err == nil && info["InvocationID"] == r.Invocation {
		if code, err := strconv.Atoi(info["ExecMainStatus"]); err == nil {
			ex.Status, ex.Known = code, true
			if info["ExecMainCode"] == "2" { // CLD_KILLED
				ex.Status = 128 + code
			}
		}
		ex.Reason = "unit " + info["ActiveState"] + " (" + info["Result"] + ")"
	}
	return ex, nil
}

// Stop asks the manager to stop the unit (SIGTERM and SIGHUP to the whole
// control group, SIGKILL after TimeoutStopSec).
func (s *SystemdLauncher) Stop(ctx context.Context, r terminal.Receipt, grace time.Duration) error {
	if err := s.m.Stop(ctx, r.Unit); err != nil {
		if !terminal.Alive(r) {
			return nil
		}
		return fmt.Errorf("systemd launcher: stop %s: %w", r.Unit, err)
	}
	return nil
}

// Close closes the manager's bus connection, if it holds one (the D-Bus
// manager; systemctl holds none). The units live on (T1).
func (s *SystemdLauncher) Close(context.Context) error {
	if c, ok := s.m.(interface{ Close() }); ok {
		c.Close()
	}
	return nil
}

// Systemctl is the UnitManager that drives systemd-run and systemctl
// --user (each a D-Bus client of the user manager).
type Systemctl struct{ systemctl, systemdRun string }

var _ UnitManager = (*Systemctl)(nil)

// ErrNoSystemctl: systemctl or systemd-run is not installed.
var ErrNoSystemctl = errors.New("systemctl/systemd-run not installed")

// NewSystemctl finds systemctl and systemd-run.
func NewSystemctl() (*Systemctl, error) {
	sc, err1 := exec.LookPath("systemctl")
	sr, err2 := exec.LookPath("systemd-run")
	if err1 != nil || err2 != nil {
		return nil, ErrNoSystemctl
	}
	return &Systemctl{systemctl: sc, systemdRun: sr}, nil
}

func (m *Systemctl) run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// Ping asks the manager for its version.
func (m *Systemctl) Ping(ctx context.Context) error {
	_, err := m.run(ctx, m.systemctl, "--user", "show", "--property=Version")
	return err
}

// StartTransient runs systemd-run --user --unit=NAME -p ... -- argv.
func (m *Systemctl) StartTransient(ctx context.Context, name string, props []string, argv []string) error {
	args := []string{"--user", "--quiet", "--collect", "--unit=" + name}
	for _, p := range props {
		args = append(args, "--property="+p)
	}
	_, err := m.run(ctx, m.systemdRun, append(append(args, "--"), argv...)...)
	return err
}

// Show runs systemctl --user show NAME.
func (m *Systemctl) Show(ctx context.Context, name string) (map[string]string, error) {
	out, err := m.run(ctx, m.systemctl, "--user", "show", "--property=MainPID,InvocationID,ActiveState,SubState,Result,ExecMainStatus,ExecMainCode,LoadState", "--", name)
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			info[k] = v
		}
	}
	if info["LoadState"] == "not-found" {
		return info, fmt.Errorf("unit %s not found", name)
	}
	return info, nil
}

// Stop runs systemctl --user stop --no-block NAME.
func (m *Systemctl) Stop(ctx context.Context, name string) error {
	_, err := m.run(ctx, m.systemctl, "--user", "stop", "--no-block", "--", name)
	return err
}
