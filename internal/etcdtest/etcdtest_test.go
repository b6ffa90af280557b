package etcdtest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// roundTrip puts and reads back one key: the member serves.
func roundTrip(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	r, err := cli.Get(ctx, "/k")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get /k = %v, want v", r.Kvs)
	}
}

func TestStartServesOnLoopback(t *testing.T) {
	t0 := time.Now()
	s := Start(t, Options{})
	t.Logf("embedded etcd ready in %v", time.Since(t0))
	eps := s.Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "http://127.0.0.1:") || strings.HasSuffix(eps[0], ":0") {
		t.Fatalf("endpoints = %v, want one http://127.0.0.1:<port>", eps)
	}
	roundTrip(t, s.Client(t, nil))
}

func TestStartWithTLSRequiresClientCertificates(t *testing.T) {
	c := NewCerts(t)
	t0 := time.Now()
	s := Start(t, Options{TLS: &c.Server})
	t.Logf("embedded etcd with TLS ready in %v", time.Since(t0))
	if eps := s.Endpoints(); !strings.HasPrefix(eps[0], "https://127.0.0.1:") {
		t.Fatalf("endpoints = %v, want https", eps)
	}
	roundTrip(t, s.Client(t, c.Client))

	// A client certificate from another CA gets nothing.
	cli := s.Client(t, c.Other)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "/k"); err == nil {
		t.Fatal("a client with a foreign certificate read from the member")
	}
	// Neither does a client without a certificate.
	noCert := c.Client.Clone()
	noCert.Certificates = nil
	cli2 := s.Client(t, noCert)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if _, err := cli2.Get(ctx2, "/k"); err == nil {
		t.Fatal("a client without a certificate read from the member")
	}
}

func TestStopEndsServing(t *testing.T) {
	s := Start(t, Options{NoFsync: true})
	addr := strings.TrimPrefix(s.Endpoints()[0], "http://")
	s.Stop()
	s.Stop() // twice is fine: tests stop early and the cleanup stops again
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, dir, addr, nil) }()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(StartTimeout)
	for {
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Put(pctx, "/k", "v")
		pcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run's member did not serve within %v: %v", StartTimeout, err)
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	roundTrip(t, cli)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20s of cancel")
	}
}

func TestRunRefusesABadAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Run(ctx, t.TempDir(), "127.0.0.1:notaport", nil)
	if err == nil {
		t.Fatal("Run with a bad address returned nil")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run waited for the context instead of failing: %v", err)
	}
}
