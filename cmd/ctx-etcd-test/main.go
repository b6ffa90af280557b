// Command ctx-etcd-test runs one embedded etcd member for the cluster's
// black-box tests (make test-cluster) and for trying a cluster by hand
// without installing etcd. It is never installed: production clusters
// run a real etcd (docs/cluster.md).
//
//	ctx-etcd-test --dir DATA --listen 127.0.0.1:2379 [--tls-dir DIR]
//
// With --tls-dir (made by `ctx-cluster init`) the member serves https with
// etcd-server.crt and requires client certificates of that CA.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/etcdtest"
)

func main() {
	dir := flag.String("dir", "", "the member's data directory")
	listen := flag.String("listen", "127.0.0.1:2379", "the client listener, HOST:PORT")
	tlsDir := flag.String("tls-dir", "", "ctx-cluster init's directory: serve https, require client certificates")
	flag.Parse()
	if *dir == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: ctx-etcd-test --dir DATA [--listen HOST:PORT] [--tls-dir DIR]")
		os.Exit(2)
	}
	var files *etcdtest.TLSFiles
	if *tlsDir != "" {
		files = &etcdtest.TLSFiles{
			Cert: filepath.Join(*tlsDir, clustercert.EtcdServerCert),
			Key:  filepath.Join(*tlsDir, clustercert.EtcdServerKey),
			CA:   filepath.Join(*tlsDir, clustercert.CACert),
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := etcdtest.Run(ctx, *dir, *listen, files); err != nil {
		fmt.Fprintln(os.Stderr, "ctx-etcd-test:", err)
		os.Exit(1)
	}
}
