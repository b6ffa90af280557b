package config

import (
	"errors"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

// TestFromEnvDefaults: the defaults interfaces.md "Daemon" documents.
func TestFromEnvDefaults(t *testing.T) {
	for _, k := range []string{"CTX_BWRAP", "CTX_CANCEL_GRACE", "CTX_APPROVAL_TIMEOUT", "CTX_SESSION_IDLE", "CTX_MCP_IDLE",
		"CTX_MCP_TIMEOUT", "CTX_ACP_TIMEOUT", "CTX_ACP_IDLE", "CTX_DISK_RESERVE"} {
		t.Setenv(k, "")
	}
	s, err := FromEnv(layout.Layout{Root: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	if s.CancelGrace != 2*time.Second || s.ApprovalTimeout != time.Minute || s.SessionIdle != 5*time.Minute ||
		s.ACPTimeout != time.Minute || s.ACPIdle != 5*time.Minute || s.DiskReserve != -1 || s.Bwrap != "" || s.Layout.Root != "/r" {
		t.Fatalf("defaults: %+v", s)
	}
}

// TestFromEnvTunables: each tunable is read once, and a bad one names itself.
func TestFromEnvTunables(t *testing.T) {
	t.Setenv("CTX_BWRAP", "/opt/bwrap")
	t.Setenv("CTX_CANCEL_GRACE", "300ms")
	t.Setenv("CTX_SESSION_IDLE", "0")
	t.Setenv("CTX_DISK_RESERVE", "0")
	s, err := FromEnv(layout.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Bwrap != "/opt/bwrap" || s.CancelGrace != 300*time.Millisecond || s.SessionIdle != 0 || s.DiskReserve != 0 {
		t.Fatalf("tunables: %+v", s)
	}
	for k, v := range map[string]string{"CTX_APPROVAL_TIMEOUT": "-1s", "CTX_ACP_IDLE": "soon", "CTX_DISK_RESERVE": "lots"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			_, err := FromEnv(layout.Layout{})
			var bt *BadTunable
			if !errors.As(err, &bt) || bt.Name != k || bt.Value != v {
				t.Fatalf("%s=%s: %v, want a BadTunable naming it", k, v, err)
			}
		})
	}
}

// TestNewIsComplete: the Config carries the settings and the services it
// was given, and makes the counters and registries it was not.
func TestNewIsComplete(t *testing.T) {
	warm := make(chan struct{})
	s := Settings{Bwrap: "/usr/bin/bwrap", CancelGrace: time.Second, DiskReserve: 7}
	c := New(s, Services{Warm: warm})
	if c.Bwrap != s.Bwrap || c.CancelGrace != s.CancelGrace || c.DiskReserve != 7 {
		t.Fatalf("settings not carried: %+v", c)
	}
	if c.Log == nil || c.Procs == nil || c.Running == nil || c.Updates == nil || c.Placeholders == nil {
		t.Fatalf("incomplete: %+v", c)
	}
	select {
	case <-c.Warmed():
		t.Fatal("Warmed closed before the installs were done")
	default:
	}
	close(warm)
	<-c.Warmed()
	<-New(s, Services{}).Warmed() // nothing to wait for
}

// TestRunCountIdle: the shutdown's drain is told when the last run ends,
// and a run that starts after renews the wait.
func TestRunCountIdle(t *testing.T) {
	var r RunCount
	<-r.Idle() // none counted
	r.Add(1)
	r.Add(1)
	idle := r.Idle()
	if r.Add(-1) != 1 {
		t.Fatal("count")
	}
	select {
	case <-idle:
		t.Fatal("idle with a run still counted")
	default:
	}
	if r.Add(-1) != 0 || r.Load() != 0 {
		t.Fatal("count")
	}
	select {
	case <-idle:
	case <-time.After(time.Second):
		t.Fatal("not told when the last run ended")
	}
	r.Add(1)
	select {
	case <-r.Idle():
		t.Fatal("idle with a new run counted")
	default:
	}
}
