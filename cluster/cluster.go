// Package cluster is a ctx-cluster node: membership and ownership in etcd,
// routing between nodes, and the usual sockets under the node's runtime
// directory (docs/cluster.md "Design (phase 1 — being built)"). Only
// ctx-cluster links it. Being built: Daemon says so; Status works.
package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/cortexfs/ctx/internal/clusterconf"
)

// ErrNotBuilt is what the entry points return until the node exists.
var ErrNotBuilt = errors.New("cluster mode is not built yet")

// Daemon runs the node cfg describes until ctx is cancelled (SIGTERM:
// leave the cluster gracefully). cfg has been validated and the node's
// TLS material checked.
func Daemon(ctx context.Context, cfg *clusterconf.Config) error {
	return fmt.Errorf("daemon: node %s of cluster %s: %w", cfg.Node, cfg.Cluster, ErrNotBuilt)
}
