package supervisor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// DBusManager is the UnitManager that talks to the user manager over D-Bus
// with go-systemd (StartTransientUnit, GetUnitProperties, StopUnit) — the
// equivalent of `systemd-run --user` without a helper process.
type DBusManager struct {
	conn *sddbus.Conn
}

var _ UnitManager = (*DBusManager)(nil)

// NewDBusManager connects to the user manager's bus.
func NewDBusManager(ctx context.Context) (*DBusManager, error) {
	c, err := sddbus.NewUserConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("systemd user manager: %w", err)
	}
	return &DBusManager{conn: c}, nil
}

// Close closes the bus connection.
func (m *DBusManager) Close() { m.conn.Close() }

// Ping asks the manager for its version.
func (m *DBusManager) Ping(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { // GetManagerProperty takes no context: bound it here
		_, err := m.conn.GetManagerProperty("Version")
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// envFile is one entry of a unit's EnvironmentFiles property, a(sb):
// the path, and whether a missing file is ignored.
type envFile struct {
	Path   string
	Ignore bool
}

// StartTransient starts argv as a transient service and waits for the job.
// props use systemd-run's NAME=VALUE spelling; the ones the launcher sets
// are translated here.
func (m *DBusManager) StartTransient(ctx context.Context, name string, props []string, argv []string) error {
	ps := []sddbus.Property{
		sddbus.PropExecStart(argv, false),
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
	}
	for _, p := range props {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "KillMode":
			ps = append(ps, sddbus.Property{Name: "KillMode", Value: godbus.MakeVariant(v)})
		case "SendSIGHUP":
			ps = append(ps, sddbus.Property{Name: "SendSIGHUP", Value: godbus.MakeVariant(v == "yes")})
		case "EnvironmentFile":
			ps = append(ps, sddbus.Property{Name: "EnvironmentFiles", Value: godbus.MakeVariant([]envFile{{Path: v}})})
		case "Description":
			ps = append(ps, sddbus.PropDescription(v))
		case "TimeoutStopSec":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("TimeoutStopSec %q: %w", v, err)
			}
			ps = append(ps, sddbus.Property{Name: "TimeoutStopUSec", Value: godbus.MakeVariant(uint64(d.Microseconds()))})
		default:
			return fmt.Errorf("transient unit property %q is not supported over D-Bus", k)
		}
	}
	done := make(chan string, 1)
	if _, err := m.conn.StartTransientUnitContext(ctx, name, "fail", ps, done); err != nil {
		return err
	}
	select {
	case res := <-done:
		if res != "done" {
			return fmt.Errorf("start job for %s: %s", name, res)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Show returns the unit's properties the launcher reads, as strings.
func (m *DBusManager) Show(ctx context.Context, name string) (map[string]string, error) {
	info := map[string]string{}
	u, err := m.conn.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"ActiveState", "SubState", "LoadState", "Result"} {
		if v, ok := u[k].(string); ok {
			info[k] = v
		}
	}
	if id, ok := u["InvocationID"].([]byte); ok {
		info["InvocationID"] = fmt.Sprintf("%x", id)
	}
	s, err := m.conn.GetUnitTypePropertiesContext(ctx, name, "Service")
	if err == nil {
		if v, ok := s["MainPID"].(uint32); ok {
			info["MainPID"] = strconv.FormatUint(uint64(v), 10)
		}
		if v, ok := s["ExecMainStatus"].(int32); ok {
			info["ExecMainStatus"] = strconv.Itoa(int(v))
		}
		if v, ok := s["ExecMainCode"].(int32); ok {
			info["ExecMainCode"] = strconv.Itoa(int(v))
		}
		if v, ok := s["Result"].(string); ok {
			info["Result"] = v
		}
	}
	if info["LoadState"] == "not-found" {
		return info, fmt.Errorf("unit %s not found", name)
	}
	return info, nil
}

// Stop queues a stop job for the unit.
func (m *DBusManager) Stop(ctx context.Context, name string) error {
	_, err := m.conn.StopUnitContext(ctx, name, "replace", nil)
	return err
}

// Via names how the launcher reaches the manager: "dbus" (go-systemd) or
// "systemctl" (systemd-run/systemctl).
func (s *SystemdLauncher) Via() string {
	if _, ok := s.m.(*DBusManager); ok {
		return "dbus"
	}
	return "systemctl"
}
