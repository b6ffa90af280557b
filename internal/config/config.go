// Package config holds the daemon's settings and shared services, handed to
// every actor through its props (never a package variable).
package config

import (
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/version"
	"github.com/cortexfs/ctx/internal/workspace"
)

// Version of ctx, reported by ping.
const Version = version.Version

// Config is built once by the daemon.
type Config struct {
	Layout          layout.Layout
	Bwrap           string        // bwrap binary; from CTX_BWRAP in the daemon's environment or bwrap.DefaultPath
	CancelGrace     time.Duration // SIGTERM→SIGKILL (CTX_CANCEL_GRACE)
	ApprovalTimeout time.Duration // CTX_APPROVAL_TIMEOUT
	// SessionIdle: a session actor with nothing to do for this long stops
	// and frees its files and memory; the next request re-creates it from
	// its log (CTX_SESSION_IDLE, default 5m, 0 never; issue 15 item 1).
	SessionIdle time.Duration
	Log         *slog.Logger
	// Procs counts live sandboxes so shutdown can wait for their grace period.
	Procs *sync.WaitGroup
	// Running counts runs whose done is not yet committed, so a shutdown
	// can wait for the runs it cancelled to conclude (issue 16 item 11).
	Running *atomic.Int64
	// passivated counts sessions passivated since the daemon last gave
	// freed memory back to the system (Passivated, TakePassivated).
	passivated atomic.Int64
	// Roots is the launch-root registry every bwrap start registers with (U2).
	Roots *launchroot.Registry
	// Updates maps each active run to the session that asks its person
	// to approve a control-socket update (ask mode, A2). Never nil after
	// FromEnv.
	Updates *ctlsock.Approvers
	// Cgroups gives each run its cgroup (issue 11 "Limits per run"); nil
	// only in tests that start no daemon.
	Cgroups *cgroup.Manager
	// Placeholders holds the placeholders of absent protected names in
	// workspaces, shared by every sandbox of the daemon (issue 11).
	Placeholders *workspace.Registry
	// MCP runs the MCP servers of every session (issue 13); built by the
	// daemon once Bwrap is known. MCPIdle and MCPTimeout are its tunables
	// (CTX_MCP_IDLE, default 5m; CTX_MCP_TIMEOUT, default 60s).
	MCP        *mcphost.Manager
	MCPIdle    time.Duration
	MCPTimeout time.Duration
	// ACPTimeout bounds an acp-v1 agent's answers to initialize and
	// session/new (CTX_ACP_TIMEOUT, default 60s; issue 14).
	ACPTimeout time.Duration
	// ACPIdle ends an acp-v1 prompt during which the agent sent no
	// session/update and had no request of its own in flight for this long
	// (CTX_ACP_IDLE, default 5m; 0: no idle bound).
	ACPIdle time.Duration
	// DiskReserve is the free space kept on CTX_ROOT's filesystem for the
	// daemon's logs (CTX_DISK_RESERVE, a size; negative: the default,
	// 0: none). Disk watches it while runs are active; nil in tests that
	// start no daemon.
	DiskReserve int64
	Disk        *diskreserve.Watcher
	// Fault is a test-only fault hook (built with -tags ctxfault); nil otherwise.
	Fault func(point string)

	// warm is closed when the daemon's start-up work that may wait (binary
	// and toolset installs) is done; nil means nothing to wait for.
	warm chan struct{}
}

// FromEnv reads the daemon's tunables (interfaces.md "Daemon").
func FromEnv(l layout.Layout, log *slog.Logger) (*Config, error) {
	c := &Config{Layout: l, Bwrap: os.Getenv("CTX_BWRAP"), CancelGrace: 2 * time.Second,
		ApprovalTimeout: 60 * time.Second, SessionIdle: 5 * time.Minute, Log: log, Procs: &sync.WaitGroup{}, Running: &atomic.Int64{},
		Placeholders: workspace.NewRegistry(), Updates: &ctlsock.Approvers{}, MCPIdle: mcphost.DefaultIdle, MCPTimeout: mcphost.DefaultTimeout, ACPTimeout: 60 * time.Second, ACPIdle: 5 * time.Minute}
	for name, dst := range map[string]*time.Duration{"CTX_CANCEL_GRACE": &c.CancelGrace, "CTX_APPROVAL_TIMEOUT": &c.ApprovalTimeout, "CTX_SESSION_IDLE": &c.SessionIdle,
		"CTX_MCP_IDLE": &c.MCPIdle, "CTX_MCP_TIMEOUT": &c.MCPTimeout, "CTX_ACP_TIMEOUT": &c.ACPTimeout, "CTX_ACP_IDLE": &c.ACPIdle} {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nil, &BadTunable{Name: name, Value: v}
			}
			*dst = d
		}
	}
	c.DiskReserve = -1
	if v := os.Getenv("CTX_DISK_RESERVE"); v != "" {
		n, err := diskreserve.ParseReserve(v)
		if err != nil {
			return nil, &BadTunable{Name: "CTX_DISK_RESERVE", Value: v, Want: err.Error()}
		}
		c.DiskReserve = n
	}
	return c, nil
}

// StartMCP builds the MCP server manager once Bwrap is final (the daemon).
func (c *Config) StartMCP() {
	c.MCP = mcphost.New(mcphost.Options{Layout: c.Layout, Bwrap: c.Bwrap, Version: Version, Idle: c.MCPIdle,
		Timeout: c.MCPTimeout, Grace: c.CancelGrace, Log: c.Log.With("component", "mcp"), Cgroups: c.Cgroups})
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

// Passivated notes that a session actor was passivated (issue 15 item 1).
func (c *Config) Passivated() { c.passivated.Add(1) }

// TakePassivated returns the passivations noted since it last returned
// them, once they are at least min (else 0, and they keep counting).
func (c *Config) TakePassivated(min int64) int64 {
	if n := c.passivated.Load(); n >= min {
		c.passivated.Add(-n)
		return n
	}
	return 0
}

// Hit runs the fault hook at a named point (no-op in normal builds).
func (c *Config) Hit(point string) {
	if c.Fault != nil {
		c.Fault(point)
	}
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// StartWarmup marks the daemon's deferred start-up work as begun; the
// returned function marks it done. Requests that may start a sandbox wait
// for it (Warmed); ping does not. issue 15 item 4
func (c *Config) StartWarmup() (done func()) {
	c.warm = make(chan struct{})
	var once sync.Once
	return func() { once.Do(func() { close(c.warm) }) }
}

// Warmed is closed once the deferred start-up work is done (at once when
// there was none).
func (c *Config) Warmed() <-chan struct{} {
	if c.warm == nil {
		return closed
	}
	return c.warm
}
