package etcdtest

import (
	"path/filepath"
	"testing"

	"crypto/tls"

	"github.com/cortexfs/ctx/internal/clustercert"
)

// Certs is the material `ctx-cluster init` makes (internal/clustercert),
// in a t.TempDir(): a member runs with mutual TLS exactly as a cluster's
// etcd would, and a second CA's client stands for a stranger.
type Certs struct {
	// Dir is init's directory (ca.crt, etcd-server.*, etcd-client.*, n1.*).
	Dir string
	// Server is what Options.TLS takes.
	Server TLSFiles
	// ClientCert and ClientKey are a client's certificate and key files.
	ClientCert, ClientKey string
	// Client is a tls.Config presenting the etcd client certificate and
	// trusting only the CA.
	Client *tls.Config
	// Other is a tls.Config with a client certificate from another CA,
	// which the member must refuse.
	Other *tls.Config
}

// NewCerts runs clustercert.Init for one node, n1, and for a stranger's
// CA.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if err := clustercert.Init(dir, []string{"n1"}, nil); err != nil {
		t.Fatal(err)
	}
	c := &Certs{Dir: dir,
		Server: TLSFiles{CA: filepath.Join(dir, clustercert.CACert),
			Cert: filepath.Join(dir, clustercert.EtcdServerCert), Key: filepath.Join(dir, clustercert.EtcdServerKey)},
		ClientCert: filepath.Join(dir, clustercert.EtcdClientCert), ClientKey: filepath.Join(dir, clustercert.EtcdClientKey)}
	var err error
	if c.Client, err = clustercert.EtcdClientTLS(dir); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := clustercert.Init(other, []string{"n1"}, nil); err != nil {
		t.Fatal(err)
	}
	stranger, err := clustercert.EtcdClientTLS(other)
	if err != nil {
		t.Fatal(err)
	}
	// The stranger trusts our CA (it can reach the member) but presents
	// its own CA's certificate.
	stranger.RootCAs = c.Client.RootCAs
	c.Other = stranger
	return c
}
