// Package etcdtest runs a real, single-member etcd inside the process —
// on loopback, with ephemeral ports and its data in a temporary
// directory — so the cluster's tests exercise the etcd they will meet in
// production rather than a fake. Only tests and the test-only
// cmd/ctx-etcd-test import it: it is the one package that links the etcd
// server (docs/cluster.md, "Parts and packages").
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds how long a start waits for the member to be ready
// (it elects itself leader and publishes its attributes); a single member
// on loopback is ready in well under a second.
const StartTimeout = 20 * time.Second

// TLSFiles are PEM files for the client listener. When given, the server
// presents Cert/Key, and requires every client to present a certificate
// signed by CA (mutual TLS, as ctx-cluster's etcd is run).
type TLSFiles struct {
	Cert, Key, CA string
}

// Options configures Start. The zero value is a plain-HTTP member in
// t.TempDir() with fsync on.
type Options struct {
	// TLS, when set, makes the client listener https with client
	// certificates required.
	TLS *TLSFiles
	// Dir is the data directory; empty means a fresh t.TempDir().
	Dir string
	// NoFsync skips fsync (etcd's --unsafe-no-fsync): faster on a slow
	// disk, never what production does.
	NoFsync bool
}

// Server is a running embedded etcd member.
type Server struct {
	e         *embed.Etcd
	endpoints []string
	tls       bool
	stopped   chan struct{}
}

// Start runs an embedded etcd member for the test and registers its
// Stop as a cleanup. It fails the test when the member is not ready
// within StartTimeout.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := start(dir, "127.0.0.1:0", opts.TLS, opts.NoFsync, zap.NewNop())
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Endpoints are the client URLs to hand to clientv3 (https:// when the
// member was started with TLS).
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Stop closes the member and waits for its goroutines to end. It may be
// called more than once (a test that stops the server early, and the
// cleanup).
func (s *Server) Stop() {
	select {
	case <-s.stopped:
		return
	default:
	}
	close(s.stopped)
	s.e.Close()
}

// Client opens a client to the member for the test, closed at cleanup.
// tlsCfg is needed when the member runs with TLS (a certificate signed by
// its CA); nil otherwise.
func (s *Server) Client(t testing.TB, tlsCfg *tls.Config) *clientv3.Client {
	t.Helper()
	if s.tls && tlsCfg == nil {
		t.Fatal("etcdtest: the member requires client certificates; pass a tls.Config")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Run serves an etcd member with its data in dir and its client listener
// on listenClient ("HOST:PORT"; port 0 picks one, logged when ready)
// until ctx is done; then it stops the member and returns nil. It is the
// body of the test-only cmd/ctx-etcd-test. An error the member reports
// while serving ends Run with that error.
func Run(ctx context.Context, dir, listenClient string, tlsFiles *TLSFiles) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("etcdtest: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	lg, err := zc.Build()
	if err != nil {
		return fmt.Errorf("etcdtest: logger: %w", err)
	}
	s, err := start(dir, listenClient, tlsFiles, false, lg)
	if err != nil {
		return err
	}
	defer func() {
		// etcd logs its own listeners closing as errors ("http: Server
		// closed"); a requested stop is not one.
		zc.Level.SetLevel(zap.FatalLevel)
		s.Stop()
	}()
	slog.Info("etcd ready", "endpoints", s.endpoints, "dir", dir)
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.e.Err():
		return fmt.Errorf("etcdtest: serving: %w", err)
	}
}

// start configures and starts the member and waits until it serves.
func start(dir, listenClient string, tf *TLSFiles, noFsync bool, lg *zap.Logger) (*Server, error) {
	scheme := "http"
	if tf != nil {
		scheme = "https"
	}
	curl, err := url.Parse(scheme + "://" + listenClient)
	if err != nil {
		return nil, fmt.Errorf("client listen address %q: %w", listenClient, err)
	}
	// The peer listener cannot be turned off; a single member only needs
	// it bound. Port 0 is fine: with one member nobody dials it, and the
	// member's id is derived from the URL as written.
	purl, _ := url.Parse("http://127.0.0.1:0")

	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.UnsafeNoFsync = noFsync
	// The gateway dials the member's own client port presenting the
	// server certificate as a client certificate; nothing of ours speaks
	// HTTP/JSON to etcd, so it is only a source of handshake noise.
	cfg.EnableGRPCGateway = false
	// A lone member waits one election timeout before it leads and
	// serves: 100 ms instead of the default 1 s makes a start take ~50 ms
	// rather than ~900 ms. With no peers there is no election to lose.
	// (etcd's smallest lease TTL follows: 1.5 elections, rounded up to 1 s.)
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.Metrics = "basic"
	if tf != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile:       tf.Cert,
			KeyFile:        tf.Key,
			TrustedCAFile:  tf.CA,
			ClientCertAuth: true,
		}
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd in %s failed while starting: %w", dir, err)
	case <-time.After(StartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd in %s: %w", dir, errNotReady)
	}
	s := &Server{e: e, tls: tf != nil, stopped: make(chan struct{})}
	for _, l := range e.Clients {
		s.endpoints = append(s.endpoints, scheme+"://"+l.Addr().String())
	}
	if len(s.endpoints) == 0 {
		e.Close()
		return nil, fmt.Errorf("etcd in %s: no client listener", dir)
	}
	return s, nil
}

var errNotReady = errors.New("not ready within " + StartTimeout.String())
