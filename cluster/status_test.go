package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/clusterconf"
	"github.com/cortexfs/ctx/internal/etcdtest"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/ownership"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// `ctx-cluster status --json` against a real etcd over mutual TLS with the
// certificates `ctx-cluster init` makes: the live node, the sessions it
// owns with their epochs, and the one whose log (a segmented one, on the
// shared root) shows a run without done (interfaces.md "Cluster (phase 1)").
func TestStatusReadsEtcdAndTheSharedLogs(t *testing.T) {
	tlsDir := filepath.Join(t.TempDir(), "tls")
	if err := clustercert.Init(tlsDir, []string{"n1", "n2"}, nil); err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, TLS: &etcdtest.TLSFiles{
		Cert: filepath.Join(tlsDir, clustercert.EtcdServerCert),
		Key:  filepath.Join(tlsDir, clustercert.EtcdServerKey),
		CA:   filepath.Join(tlsDir, clustercert.CACert),
	}})
	root, rt, ws := t.TempDir(), t.TempDir(), t.TempDir()
	file, _ := json.Marshal(map[string]any{"cluster": "c1", "node": "n1", "listen": "127.0.0.1:0",
		"etcd": srv.Endpoints(), "tls_dir": tlsDir, "root": root, "runtime_dir": rt, "workspaces": []string{ws}})
	cfg, err := clusterconf.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	tlsc, err := clustercert.EtcdClientTLS(tlsDir)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), TLS: tlsc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := ownership.JoinWith(ctx, cli, ownership.Config{Cluster: "c1", TTL: 2 * time.Second, Margin: 500 * time.Millisecond,
		Me: ownership.NodeInfo{Node: "n1", Addr: "127.0.0.1:7001", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	owners, err := m.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer owners.Close()
	busy, _, err := owners.Acquire(ctx, ownership.SessionID("demo", "private", "busy"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := owners.Acquire(ctx, ownership.SessionID("demo", "private", "idle")); err != nil {
		t.Fatal(err)
	}
	// busy's log: its owner's segment holds a run without done.
	dir := layout.Layout{Root: root, UID: os.Getuid()}.SessionDir("demo", "private", "busy")
	lg, _, err := store.OpenSegmented(dir, busy.Epoch, "n1")
	if err != nil {
		t.Fatal(err)
	}
	in := "hi"
	if _, err := lg.AppendBatch([]ipc.Frame{{Type: ipc.TypeUser, Session: "busy", Run: "run-1-aa", ID: "r1", Input: in}}); err != nil {
		t.Fatal(err)
	}
	lg.Close()

	var out bytes.Buffer
	if err := Status(ctx, cfg, true, &out); err != nil {
		t.Fatal(err)
	}
	var doc StatusDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if len(doc.Nodes) != 1 || doc.Nodes[0] != (StatusNode{Node: "n1", Addr: "127.0.0.1:7001", Alive: true}) {
		t.Errorf("nodes %+v", doc.Nodes)
	}
	got := map[string]StatusSession{}
	for _, s := range doc.Sessions {
		got[s.Session] = s
	}
	if s := got["busy"]; s.Agent != "demo" || s.Scope != "private" || s.Owner != "n1" || s.Epoch != busy.Epoch || s.ActiveRun == nil || *s.ActiveRun != "run-1-aa" {
		t.Errorf("busy: %+v", s)
	}
	if s := got["idle"]; s.Owner != "n1" || s.Epoch <= busy.Epoch || s.ActiveRun != nil {
		t.Errorf("idle: %+v", s)
	}
	if !strings.Contains(out.String(), `"active_run":null`) {
		t.Errorf("an idle session's active_run must be null: %s", out.Bytes())
	}
	out.Reset()
	if err := Status(ctx, cfg, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "n1") || !strings.Contains(out.String(), "127.0.0.1:7001  yes") {
		t.Errorf("text status:\n%s", out.String())
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}
