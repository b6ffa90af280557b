// Package cluster is a ctx-cluster node: membership and ownership in etcd,
// the fence, and the usual daemon serving the usual sockets under the
// node's runtime directory over the shared root (docs/cluster.md). Only
// ctx-cluster links it.
//
// A node joins (mutual TLS to etcd, one version per cluster), reports
// every ownership deadline to its fence parent, serves the sessions etcd
// lets it own (their logs segmented, fenced by epoch, every frame fsynced
// and checked against the deadline), carries requests for the others to
// their owners (frontdoor.go), releases sessions when they passivate,
// adopts the sessions a lost node left with an open run (failover.go),
// and exits 75 the moment its lease is lost.
package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/clusterconf"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/fence"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/ownership"
	"github.com/cortexfs/ctx/supervisor"
)

// TTL is a node's lease (docs/cluster.md "The owner's deadline").
const TTL = 5 * time.Second

// joinTimeout bounds joining: an etcd that does not answer by then is
// unavailable (exit 3), and systemd tries again.
const joinTimeout = 10 * time.Second

// EnvNoFence runs the node without its fence parent (tests of the node
// itself; production always has a fence or systemd's watchdog).
const EnvNoFence = "CTX_CLUSTER_NO_FENCE"

// Daemon runs the node cfg describes until ctx is cancelled (SIGTERM:
// leave the cluster gracefully). cfg has been validated and the node's
// TLS material checked. Started without a fence, it becomes its own
// fence's parent: the node runs as its child.
func Daemon(ctx context.Context, cfg *clusterconf.Config) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", cfg.Node)
	rep, err := fence.FromEnv()
	if err != nil {
		return err
	}
	if rep == nil && os.Getenv(EnvNoFence) == "" {
		cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		code, err := fence.Parent(cmd, log)
		if err != nil {
			return err
		}
		if code != exitcode.OK {
			return exitcode.With(code, fmt.Errorf("node %s ended with status %d", cfg.Node, code))
		}
		return nil
	}
	defer rep.Close()
	return run(ctx, cfg, rep, log)
}

func run(ctx context.Context, cfg *clusterconf.Config, rep *fence.Reporter, log *slog.Logger) error {
	cli, err := dialEtcd(cfg)
	if err != nil {
		return exitcode.With(exitcode.Unavailable, err)
	}
	defer cli.Close()
	jctx, cancel := context.WithTimeout(ctx, joinTimeout)
	m, err := ownership.JoinWith(jctx, cli, ownership.Config{Cluster: cfg.Cluster, TTL: TTL, Logger: log,
		Me: ownership.NodeInfo{Node: cfg.Node, Addr: cfg.Listen, Version: config.Version, PID: os.Getpid(), Started: time.Now().UTC()}})
	cancel()
	if err != nil {
		return exitcode.With(exitcode.Unavailable, fmt.Errorf("join cluster %s: %w", cfg.Cluster, err))
	}
	defer m.Close()
	owners, err := m.Owners(ctx)
	if err != nil {
		return exitcode.With(exitcode.Unavailable, err)
	}
	defer owners.Close()
	// The relay and the lost-lease watch live as long as the membership,
	// past a SIGTERM: the drain that follows it still owns sessions, and
	// a fence told nothing new would kill the node mid-drain.
	member, endMember := context.WithCancel(context.Background())
	defer endMember()
	go func() {
		for {
			select {
			case d := <-m.Deadlines():
				if err := rep.Report(d); err != nil {
					log.Error("fence unreachable", "err", err)
				}
			case <-member.Done():
				return
			}
		}
	}()
	go func() {
		select {
		case <-m.Lost():
			// At the deadline the node appends nothing more: it exits at
			// once, and its sandboxes die with it (--die-with-parent,
			// PR_SET_PDEATHSIG). No graceful drain: that would append.
			log.Error("lease lost: leaving at once", "err", m.Err())
			os.Exit(exitcode.LostLease)
		case <-member.Done():
		}
	}()

	l := layout.Layout{Root: cfg.Root, Runtime: cfg.RuntimeDir, UID: os.Getuid()}
	if err := os.MkdirAll(l.Root, 0o755); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	if err := atomicfile.WriteFile(l.ClusterMarker(), []byte(fmt.Sprintf("{\"cluster\":%q}\n", cfg.Cluster)), 0o644); err != nil {
		return fmt.Errorf("cluster marker: %w", err)
	}
	settings, err := config.FromEnv(l)
	if err != nil {
		return exitcode.With(exitcode.Usage, err)
	}
	exe, _ := os.Executable()
	live, err := m.WatchLive(ctx)
	if err != nil {
		return exitcode.With(exitcode.Unavailable, err)
	}
	defer live.Close()
	server, client, err := clustercert.NodeTLS(cfg.TLSDir, cfg.Node)
	if err != nil {
		return exitcode.With(exitcode.Usage, err)
	}
	tcp, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return exitcode.With(exitcode.Unavailable, fmt.Errorf("node %s: listen %s: %w", cfg.Node, cfg.Listen, err))
	}
	n := &node{cfg: cfg, owners: owners, live: live, member: m, layout: l, client: client, log: log}
	// The front door's links and failover end with the node's context;
	// serveLinks waits for its links before returning.
	fctx, stopNode := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() { stopNode(); bg.Wait() }()
	bg.Add(2)
	go func() { defer bg.Done(); n.serveLinks(fctx, tls.NewListener(tcp, server), l, log) }()
	go func() { defer bg.Done(); n.failover(fctx, live, l, log) }()
	d := &supervisor.Daemon{Settings: settings, Log: log, BinDir: filepath.Dir(exe), Cluster: n}
	log.Info("joined", "cluster", cfg.Cluster, "lease_ttl", TTL)
	if err := d.Run(ctx); err != nil {
		return fmt.Errorf("node %s: %w", cfg.Node, err)
	}
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Leave(lctx); err != nil {
		log.Warn("leave", "err", err)
	}
	return nil
}

// node is the node's part in the daemon (config.Cluster).
type node struct {
	cfg    *clusterconf.Config
	owners *ownership.Owners
	live   *ownership.LiveSet
	member *ownership.Member
	layout layout.Layout
	// client is the node's mTLS client configuration (links it dials).
	client *tls.Config
	log    *slog.Logger
}

func (n *node) WorkspaceShared(path string) bool { return n.cfg.Shared(path) }

func (n *node) Own(ctx context.Context, agent, scope, session string, here bool) (int64, string, string, error) {
	id := ownership.SessionID(agent, scope, session)
	if !here {
		// Who serves it now, from the watched cache; a session no node
		// serves goes to the node rendezvous hashing picks, which takes
		// it when the front door hands it over (docs/cluster.md).
		o, ok, err := n.owners.Lookup(ctx, id)
		if err != nil {
			return 0, n.cfg.Node, "", err
		}
		if ok && o.Node != n.cfg.Node {
			return 0, n.cfg.Node, o.Node, nil
		}
		if !ok {
			if p := ownership.Pick(id, n.live.Nodes()); p.Node != "" && p.Node != n.cfg.Node {
				return 0, n.cfg.Node, p.Node, nil
			}
		}
	}
	o, _, err := n.owners.Acquire(ctx, id)
	if err != nil {
		return 0, n.cfg.Node, "", err
	}
	if o.Node != n.cfg.Node {
		return 0, n.cfg.Node, o.Node, nil
	}
	return o.Epoch, n.cfg.Node, o.Node, nil
}

func (n *node) Release(ctx context.Context, agent, scope, session string, epoch int64) {
	_, _ = n.owners.Release(ctx, ownership.SessionID(agent, scope, session), epoch)
}

var _ config.Cluster = (*node)(nil)
