package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/clusterconf"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/ownership"
	"github.com/cortexfs/ctx/internal/sessions"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// StatusDoc is `ctx-cluster status --json` (interfaces.md "Cluster
// (phase 1)"): the nodes and the owned sessions. scope is added to the
// pinned keys: a session's name is unique only within its agent and scope.
type StatusDoc struct {
	Nodes    []StatusNode    `json:"nodes"`
	Sessions []StatusSession `json:"sessions"`
}

// StatusNode is one node: live (its lease holds) or named by an owner key
// whose lease has not expired yet.
type StatusNode struct {
	Node  string `json:"node"`
	Addr  string `json:"addr"`
	Alive bool   `json:"alive"`
}

// StatusSession is one owned session. ActiveRun is the run its log shows
// without done, read from the shared root; null when none.
type StatusSession struct {
	Session   string  `json:"session"`
	Agent     string  `json:"agent"`
	Scope     string  `json:"scope"`
	Owner     string  `json:"owner"`
	Epoch     int64   `json:"epoch"`
	ActiveRun *string `json:"active_run"`
}

// etcdTimeout bounds status's dial and each of its reads.
const etcdTimeout = 5 * time.Second

// Status writes the cluster's nodes and sessions to w, as JSON when
// asJSON (interfaces.md Cluster: `ctx-cluster status --json`).
func Status(ctx context.Context, cfg *clusterconf.Config, asJSON bool, w io.Writer) error {
	cli, err := dialEtcd(cfg)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer cli.Close()
	l := layout.Layout{Root: cfg.Root, Runtime: cfg.RuntimeDir, UID: os.Getuid()}
	doc, err := ReadStatus(ctx, cli, cfg.Cluster, l)
	if err != nil {
		// etcd unreachable or refusing: the cluster's store is unavailable.
		return exitcode.With(exitcode.Unavailable, fmt.Errorf("status: cluster %s: etcd %v: %w", cfg.Cluster, cfg.Etcd, err))
	}
	if asJSON {
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	return writeStatus(w, doc)
}

// dialEtcd connects to the cluster's etcd with the node's client
// certificate (mTLS only, interfaces.md Cluster).
func dialEtcd(cfg *clusterconf.Config) (*clientv3.Client, error) {
	tlsc, err := clustercert.EtcdClientTLS(cfg.TLSDir)
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, e := range cfg.Etcd {
		eps = append(eps, strings.TrimSuffix(e, "/"))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsc, DialTimeout: etcdTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", cfg.Etcd, err)
	}
	return cli, nil
}

// ReadStatus reads the live nodes and the owner keys from etcd, and each
// owned session's active run from its log on the shared root l.Root.
func ReadStatus(ctx context.Context, cli *clientv3.Client, cluster string, l layout.Layout) (*StatusDoc, error) {
	rctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	live, err := ownership.Live(rctx, cli, cluster)
	if err != nil {
		return nil, err
	}
	owners, err := ownership.OpenOwners(rctx, cli, cluster)
	if err != nil {
		return nil, err
	}
	list, err := owners.List(rctx)
	owners.Close()
	if err != nil {
		return nil, err
	}
	doc := &StatusDoc{Nodes: []StatusNode{}, Sessions: []StatusSession{}}
	seen := map[string]bool{}
	for _, n := range live {
		seen[n.Node] = true
		doc.Nodes = append(doc.Nodes, StatusNode{Node: n.Node, Addr: n.Addr, Alive: true})
	}
	for _, o := range list {
		if !seen[o.Node] {
			seen[o.Node] = true
			doc.Nodes = append(doc.Nodes, StatusNode{Node: o.Node, Addr: o.Addr})
		}
		parts := strings.SplitN(o.Session, "/", 3)
		if len(parts) != 3 {
			continue // ownership validates ids; nothing else is listed
		}
		s := StatusSession{Session: parts[2], Agent: parts[0], Scope: parts[1], Owner: o.Node, Epoch: o.Epoch}
		s.ActiveRun = activeRun(l.SessionDir(parts[0], parts[1], parts[2]))
		doc.Sessions = append(doc.Sessions, s)
	}
	sort.Slice(doc.Nodes, func(i, j int) bool { return doc.Nodes[i].Node < doc.Nodes[j].Node })
	return doc, nil
}

// activeRun is the last run the session's log (either layout) shows
// without its done; nil when none or when the log cannot be read.
func activeRun(dir string) *string {
	c, err := store.OpenChain(dir)
	if err != nil {
		return nil // no log yet (a new session) or an unreadable one: nothing to show
	}
	defer c.Close()
	open := map[string]bool{}
	var last string
	_, _ = sessions.Scan(c.Reader(), func(f *sessions.Frame) {
		switch f.Type {
		case ipc.TypeUser, ipc.TypeStart:
			if f.Run != "" && !open[f.Run] {
				open[f.Run] = true
				last = f.Run
			}
		case ipc.TypeDone:
			delete(open, f.Run)
		}
	})
	if last == "" || !open[last] {
		return nil
	}
	return &last
}

func writeStatus(w io.Writer, doc *StatusDoc) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tALIVE\tSESSIONS\tACTIVE RUNS")
	owned, active := map[string]int{}, map[string]int{}
	for _, s := range doc.Sessions {
		owned[s.Owner]++
		if s.ActiveRun != nil {
			active[s.Owner]++
		}
	}
	for _, n := range doc.Nodes {
		alive := "yes"
		if !n.Alive {
			alive = "no (lease expiring)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", n.Node, n.Addr, alive, owned[n.Node], active[n.Node])
	}
	return tw.Flush()
}
