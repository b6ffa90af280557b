package config

import (
	"os"
	"time"

	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcphost"
)

// Settings are the daemon's tunables (interfaces.md "Daemon"), parsed
// once from its environment by FromEnv and never changed after.
type Settings struct {
	Layout layout.Layout
	// Bwrap is the bwrap binary asked for (CTX_BWRAP); "" for
	// bwrap.DefaultPath. The daemon resolves it (bwrap.Find) before it
	// builds anything that starts a sandbox.
	Bwrap           string
	CancelGrace     time.Duration // SIGTERM→SIGKILL (CTX_CANCEL_GRACE, default 2s)
	ApprovalTimeout time.Duration // CTX_APPROVAL_TIMEOUT, default 60s
	SessionIdle     time.Duration // CTX_SESSION_IDLE, default 5m, 0 never
	MCPIdle         time.Duration // CTX_MCP_IDLE, default 5m
	MCPTimeout      time.Duration // CTX_MCP_TIMEOUT, default 60s
	ACPTimeout      time.Duration // CTX_ACP_TIMEOUT, default 60s
	ACPIdle         time.Duration // CTX_ACP_IDLE, default 5m, 0: no idle bound
	DiskReserve     int64         // CTX_DISK_RESERVE, a size; negative: the default, 0: none
	// PlaceholderLinger: how long a cluster node keeps a shared
	// workspace directory's placeholders after its last use there
	// (CTX_CLUSTER_PLACEHOLDER_LINGER, default 30s; docs/cluster.md).
	PlaceholderLinger time.Duration
}

// FromEnv reads the daemon's tunables (interfaces.md "Daemon"); an
// unparsable one is a *BadTunable.
func FromEnv(l layout.Layout) (Settings, error) {
	s := Settings{Layout: l, Bwrap: os.Getenv("CTX_BWRAP"), CancelGrace: 2 * time.Second,
		ApprovalTimeout: 60 * time.Second, SessionIdle: 5 * time.Minute, MCPIdle: mcphost.DefaultIdle,
		MCPTimeout: mcphost.DefaultTimeout, ACPTimeout: 60 * time.Second, ACPIdle: 5 * time.Minute, DiskReserve: -1,
		PlaceholderLinger: 30 * time.Second}
	for _, t := range []struct {
		name string
		dst  *time.Duration
	}{{"CTX_CANCEL_GRACE", &s.CancelGrace}, {"CTX_APPROVAL_TIMEOUT", &s.ApprovalTimeout}, {"CTX_SESSION_IDLE", &s.SessionIdle},
		{"CTX_MCP_IDLE", &s.MCPIdle}, {"CTX_MCP_TIMEOUT", &s.MCPTimeout}, {"CTX_ACP_TIMEOUT", &s.ACPTimeout}, {"CTX_ACP_IDLE", &s.ACPIdle},
		{"CTX_CLUSTER_PLACEHOLDER_LINGER", &s.PlaceholderLinger}} {
		if v := os.Getenv(t.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return Settings{}, &BadTunable{Name: t.name, Value: v}
			}
			*t.dst = d
		}
	}
	if v := os.Getenv("CTX_DISK_RESERVE"); v != "" {
		n, err := diskreserve.ParseReserve(v)
		if err != nil {
			return Settings{}, &BadTunable{Name: "CTX_DISK_RESERVE", Value: v, Want: err.Error()}
		}
		s.DiskReserve = n
	}
	return s, nil
}

// BadTunable reports an unparsable tunable.
type BadTunable struct {
	Name, Value string
	Want        string // what is wanted; "": a Go duration
}

func (e *BadTunable) Error() string {
	if e.Want != "" {
		return e.Name + "=" + e.Value + ": " + e.Want
	}
	return e.Name + "=" + e.Value + ": want a Go duration such as 2s"
}
