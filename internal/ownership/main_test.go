package ownership

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Small numbers keep the tests short: renewals every 666 ms, a deadline
// 1.5 s after each acknowledged send.
const (
	testTTL    = 2 * time.Second
	testMargin = 500 * time.Millisecond
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// verbose logs to stderr when CTX_TEST_LOG is set, to read a test's
// story.
func testLogger() *slog.Logger {
	if os.Getenv("CTX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return quiet
}

// world is one embedded etcd, with or without mutual TLS.
type world struct {
	srv *etcdtest.Server
	tls *tls.Config
}

func newWorld(t *testing.T, withTLS bool) *world {
	t.Helper()
	w := &world{}
	opts := etcdtest.Options{NoFsync: true}
	if withTLS {
		c := etcdtest.NewCerts(t)
		opts.TLS = &c.Server
		w.tls = c.Client
	}
	w.srv = etcdtest.Start(t, opts)
	return w
}

// client opens a client of its own: each member gets one, as each node
// has its own.
func (w *world) client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   w.srv.Endpoints(),
		DialTimeout: 5 * time.Second,
		TLS:         w.tls,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func node(id, version string) NodeInfo {
	return NodeInfo{Node: id, Addr: id + ".test:7000", Version: version, PID: 4242, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// join makes a member on a client of its own, closed at cleanup.
func (w *world) join(t *testing.T, cluster string, me NodeInfo) *Member {
	t.Helper()
	m, err := JoinWith(ctxT(t, 10*time.Second), w.client(t), Config{Cluster: cluster, Me: me, TTL: testTTL, Margin: testMargin, Logger: testLogger()})
	if err != nil {
		t.Fatalf("join %s: %v", me.Node, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func (m *Member) ownersT(t *testing.T) *Owners {
	t.Helper()
	o, err := m.Owners(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o
}

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
