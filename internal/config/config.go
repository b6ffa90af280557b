// Package config holds the daemon's settings and shared services, handed to
// every actor through its props (never a package variable).
//
// Settings are parsed once (FromEnv) and never change. The services are
// built by the daemon in order (supervisor.Daemon.Run) and handed to New,
// which returns the one Config every actor receives: complete, then never
// written.
package config

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/version"
	"github.com/cortexfs/ctx/internal/workspace"
	"github.com/cortexfs/ctx/ipc"
)

// Version of ctx, reported by ping.
const Version = version.Version

// Config is what every actor receives: the settings and the services,
// built once by New and never written after. Tests that start no daemon
// build one by hand with the fields they need.
type Config struct {
	Layout          layout.Layout
	Bwrap           string        // the bwrap binary the daemon found (Settings.Bwrap resolved)
	CancelGrace     time.Duration // SIGTERM→SIGKILL (CTX_CANCEL_GRACE)
	ApprovalTimeout time.Duration // CTX_APPROVAL_TIMEOUT
	// SessionIdle: a session actor with nothing to do for this long stops
	// and frees its files and memory; the next request re-creates it from
	// its log (CTX_SESSION_IDLE, default 5m, 0 never).
	SessionIdle time.Duration
	Log         *slog.Logger
	// Procs counts live sandboxes so shutdown can wait for their grace period.
	Procs *sync.WaitGroup
	// Running counts runs whose done is not yet committed, so a shutdown
	// waits (Running.Idle) for the runs it cancelled to conclude.
	Running *RunCount
	// passivated counts sessions passivated since the daemon last gave
	// freed memory back to the system (Passivated, TakePassivated).
	passivated atomic.Int64
	// Roots is the launch-root registry every bwrap start registers with (U2).
	Roots *launchroot.Registry
	// Updates maps each active run to the session that asks its person
	// to approve a control-socket update (ask mode, A2). Never nil after New.
	Updates *ctlsock.Approvers
	// Cgroups gives each run its cgroup (README "Limits per run"); nil
	// only in tests that start no daemon.
	Cgroups *cgroup.Manager
	// Placeholders holds the placeholders of absent protected names in
	// workspaces, shared by every sandbox of the daemon. Never nil after New.
	Placeholders *workspace.Registry
	// MCP runs the MCP servers of every session. MCPIdle and MCPTimeout
	// are its tunables (CTX_MCP_IDLE, default 5m; CTX_MCP_TIMEOUT, default 60s).
	MCP        *mcphost.Manager
	MCPIdle    time.Duration
	MCPTimeout time.Duration
	// ACPTimeout bounds an acp-v1 agent's answers to initialize and
	// session/new (CTX_ACP_TIMEOUT, default 60s).
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
	// Cluster is a cluster node's part (ctx-cluster); nil in the single
	// daemon, whose behaviour it never changes.
	Cluster Cluster
	// Dispatcher runs every actor's mailbox (Props); nil: protoactor's
	// default, a new goroutine each time a mailbox gets work. The daemon
	// sets a workers.Pool.
	Dispatcher actor.Dispatcher

	// warm is closed when the daemon's start-up work that may wait (binary
	// and toolset installs) is done; nil means nothing to wait for.
	warm <-chan struct{}
}

// Cluster is what a cluster node adds to the daemon. The interface keeps
// the single daemon free of the cluster's code: ctxd never sets it, and
// only ctx-cluster links an implementation (docs/cluster.md).
type Cluster interface {
	// WorkspaceShared says whether a resolved workspace lies under one of
	// the cluster's shared prefixes (interfaces.md "Cluster (phase 1)").
	WorkspaceShared(path string) bool
	// Own settles who serves a session (docs/cluster.md "The front
	// door"). here says the request came from this node itself (another
	// node's front door handing it over, or failover): the node then
	// takes the session if no node holds it. Otherwise a session no node
	// holds goes to the live node ownership.Pick chooses. It returns the
	// epoch of this node's ownership (0 when owner, another node, serves
	// it) and this node's id. It blocks on etcd: never call it inside
	// Receive.
	Own(ctx context.Context, agent, scope, session string, here bool) (epoch int64, node, owner string, err error)
	// Release ends this node's ownership of a passivated session, only if
	// it is still the ownership of epoch. It blocks on etcd.
	Release(ctx context.Context, agent, scope, session string, epoch int64)
	// Forward is the front door: it carries req, for a session owner
	// serves, to that node and passes the frames it answers to c until
	// the request is answered, c closes or ctx ends — following the
	// session to its next owner when owner is lost. It blocks.
	Forward(ctx context.Context, owner, agent string, req *ipc.Request, c *ipc.Conn)
	// Owning reports an error once this node's ownership deadline has
	// passed: from then on it releases no frame (docs/cluster.md "The
	// owner's deadline").
	Owning() error
}

// Services are what the daemon builds, in order, before its actors start.
// A nil counter or registry is made fresh by New.
type Services struct {
	Log          *slog.Logger
	Procs        *sync.WaitGroup
	Running      *RunCount
	Roots        *launchroot.Registry
	Updates      *ctlsock.Approvers
	Cgroups      *cgroup.Manager
	Placeholders *workspace.Registry
	MCP          *mcphost.Manager
	Disk         *diskreserve.Watcher
	Fault        func(point string)
	Dispatcher   actor.Dispatcher
	// Warm is closed when the start-up installs are done (Config.Warmed);
	// nil: nothing to wait for.
	Warm <-chan struct{}
}

// New returns the Config of settings s and services sv: complete, and
// never written after.
func New(s Settings, sv Services) *Config {
	c := &Config{Layout: s.Layout, Bwrap: s.Bwrap, CancelGrace: s.CancelGrace, ApprovalTimeout: s.ApprovalTimeout,
		SessionIdle: s.SessionIdle, MCPIdle: s.MCPIdle, MCPTimeout: s.MCPTimeout, ACPTimeout: s.ACPTimeout,
		ACPIdle: s.ACPIdle, DiskReserve: s.DiskReserve,
		Log: sv.Log, Procs: sv.Procs, Running: sv.Running, Roots: sv.Roots, Updates: sv.Updates, Cgroups: sv.Cgroups,
		Placeholders: sv.Placeholders, MCP: sv.MCP, Disk: sv.Disk, Fault: sv.Fault, Dispatcher: sv.Dispatcher, warm: sv.Warm}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Procs == nil {
		c.Procs = &sync.WaitGroup{}
	}
	if c.Running == nil {
		c.Running = &RunCount{}
	}
	if c.Updates == nil {
		c.Updates = &ctlsock.Approvers{}
	}
	if c.Placeholders == nil {
		c.Placeholders = workspace.NewRegistry()
	}
	return c
}

// MCPOptions are the MCP server manager's options for these settings,
// with the cgroups its servers are placed in (README "Limits").
func (s Settings) MCPOptions(log *slog.Logger, cg *cgroup.Manager) mcphost.Options {
	return mcphost.Options{Layout: s.Layout, Bwrap: s.Bwrap, Version: Version, Idle: s.MCPIdle,
		Timeout: s.MCPTimeout, Grace: s.CancelGrace, Log: log.With("component", "mcp"), Cgroups: cg}
}

// Passivated notes that a session actor was passivated (CTX_SESSION_IDLE).
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

// Props is actor.PropsFromProducer with the daemon's dispatcher: every
// actor of the daemon is built through it.
func (c *Config) Props(p actor.Producer, opts ...actor.PropsOption) *actor.Props {
	if c.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(c.Dispatcher))
	}
	return actor.PropsFromProducer(p, opts...)
}

// Hit runs the fault hook at a named point (no-op in normal builds).
func (c *Config) Hit(point string) {
	if c.Fault != nil {
		c.Fault(point)
	}
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Warmed is closed once the daemon's deferred start-up work (binary and
// toolset installs) is done, at once when there was none. Requests that
// may start a sandbox wait for it; ping does not: the sockets answer
// before the installs end.
func (c *Config) Warmed() <-chan struct{} {
	if c.warm == nil {
		return closed
	}
	return c.warm
}
