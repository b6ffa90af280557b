package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs is a throwaway CA with a server certificate for 127.0.0.1 and
// one client certificate, written as PEM files — enough to run a member
// with mutual TLS. It stands alone (not internal/clustercert) so that
// the test server does not move when the production certificate code
// does.
type Certs struct {
	// Server is what Options.TLS takes.
	Server TLSFiles
	// ClientCert and ClientKey are a client's certificate and key files.
	ClientCert, ClientKey string
	// Client is a tls.Config presenting the client certificate and
	// trusting only the CA.
	Client *tls.Config
	// Other is a tls.Config with a client certificate from another CA,
	// which the member must refuse.
	Other *tls.Config
}

// NewCerts writes a CA, a server and a client certificate into a
// t.TempDir().
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := newCA(t, "etcdtest CA")
	c := &Certs{Server: TLSFiles{CA: filepath.Join(dir, "ca.pem")}}
	writePEM(t, c.Server.CA, "CERTIFICATE", ca.Raw)

	srv := issue(t, ca, caKey, "etcd", x509.ExtKeyUsageServerAuth)
	c.Server.Cert, c.Server.Key = writePair(t, dir, "server", srv)
	cl := issue(t, ca, caKey, "client", x509.ExtKeyUsageClientAuth)
	c.ClientCert, c.ClientKey = writePair(t, dir, "client", cl)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c.Client = &tls.Config{Certificates: []tls.Certificate{cl}, RootCAs: pool, MinVersion: tls.VersionTLS12}

	other, otherKey := newCA(t, "another CA")
	stranger := issue(t, other, otherKey, "stranger", x509.ExtKeyUsageClientAuth)
	c.Other = &tls.Config{Certificates: []tls.Certificate{stranger}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func writePair(t testing.TB, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", c.Certificate[0])
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", der)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
