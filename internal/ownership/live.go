package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Live reads the live nodes of cluster from etcd, in node order. It
// needs no membership (ctx-cluster status uses it).
func Live(ctx context.Context, cli *clientv3.Client, cluster string) ([]NodeInfo, error) {
	k, err := keysFor(cluster)
	if err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	return readLive(ctx, cli, k)
}

func readLive(ctx context.Context, cli *clientv3.Client, k keys) ([]NodeInfo, error) {
	r, err := cli.Get(ctx, k.nodes(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("read live nodes: %w", err)
	}
	out := make([]NodeInfo, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		n, err := decodeNode(k, string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// decodeNode reads a nodes/<node> value; the key names the node, whatever
// the value says.
func decodeNode(k keys, key string, value []byte) (NodeInfo, error) {
	var n NodeInfo
	if err := json.Unmarshal(value, &n); err != nil {
		return NodeInfo{}, fmt.Errorf("live node %s: %w", key, err)
	}
	n.Node = strings.TrimPrefix(key, k.nodes())
	return n, nil
}

// LiveSet is a watch-fed view of the live nodes: reads are local and
// trail etcd by the watch's delay.
type LiveSet struct {
	keys keys
	c    *cache
	log  *slog.Logger
}

// WatchLive starts a LiveSet of cluster; Close stops it.
func WatchLive(ctx context.Context, cli *clientv3.Client, cluster string) (*LiveSet, error) {
	k, err := keysFor(cluster)
	if err != nil {
		return nil, fmt.Errorf("watch live: %w", err)
	}
	log := slog.Default().With("cluster", cluster)
	c, err := newCache(ctx, cli, k.nodes(), log, nil)
	if err != nil {
		return nil, fmt.Errorf("watch live: %w", err)
	}
	return &LiveSet{keys: k, c: c, log: log}, nil
}

// WatchLive starts a LiveSet of the member's cluster.
func (m *Member) WatchLive(ctx context.Context) (*LiveSet, error) {
	c, err := newCache(ctx, m.cli, m.keys.nodes(), m.log, nil)
	if err != nil {
		return nil, fmt.Errorf("watch live: %w", err)
	}
	return &LiveSet{keys: m.keys, c: c, log: m.log}, nil
}

// Nodes returns the live nodes in node order. A value that does not
// decode is left out and logged (only this package writes them).
func (l *LiveSet) Nodes() []NodeInfo {
	keys, entries, _ := l.c.snapshot()
	out := make([]NodeInfo, 0, len(keys))
	for i, key := range keys {
		n, err := decodeNode(l.keys, key, entries[i].value)
		if err != nil {
			l.log.Warn("skipping a node", "err", err)
			continue
		}
		out = append(out, n)
	}
	return out
}

// Changed returns a channel closed at the next change of the live set.
func (l *LiveSet) Changed() <-chan struct{} { return l.c.changes() }

// Close stops the watch.
func (l *LiveSet) Close() { l.c.close() }
