// Package clustercert makes and loads a cluster's TLS material: one CA,
// one certificate per node (server and client of node-to-node mTLS), and
// one client and one server certificate for etcd, all ECDSA P-256 in PEM
// files of one directory (interfaces.md Cluster: `ctx-cluster init`). A
// node is recognised by a URI SAN naming it (urn:ctx-cluster:node:ID), so
// a certificate of the same CA that is not a node's — the etcd client's —
// is refused between nodes.
package clustercert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

// The files of a TLS directory besides the nodes' own <node>.crt and
// <node>.key.
const (
	CACert         = "ca.crt"
	CAKey          = "ca.key"
	EtcdClientCert = "etcd-client.crt"
	EtcdClientKey  = "etcd-client.key"
	EtcdServerCert = "etcd-server.crt"
	EtcdServerKey  = "etcd-server.key"
)

// Validity of what Init makes (docs/cluster.md says the same).
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 2 * 365 * 24 * time.Hour
	// backdate covers clocks of other nodes a little behind this one's.
	backdate = 5 * time.Minute
)

// nodeURIPrefix starts the URI SAN of a node certificate. An opaque URN
// rather than scheme://node: node names may hold ".." sequences, which
// x509 refuses in a URI's host.
const nodeURIPrefix = "urn:ctx-cluster:node:"

var (
	// ErrInvalid is wrapped by errors about Init's arguments (no node, a
	// node given twice, a bad host); a bad node name wraps
	// layout.ErrBadName instead.
	ErrInvalid = errors.New("invalid")
	// ErrExists is wrapped when Init finds a CA (or any file it would
	// write) already in the directory: keys are never overwritten.
	ErrExists = errors.New("already exists")
	// ErrMaterial is wrapped when a node's or the etcd client's TLS
	// material is missing, unreadable or does not fit together.
	ErrMaterial = errors.New("TLS material")
)

// reserved are the names a node cannot have: its <node>.crt would be
// one of the shared files.
var reserved = map[string]bool{"ca": true, "etcd-client": true, "etcd-server": true}

// CheckNode checks a node name: an agent-like name (layout.CheckName) that
// is not one of the directory's shared file stems (ca, etcd-client,
// etcd-server). Its errors wrap layout.ErrBadName.
func CheckNode(node string) error {
	if err := layout.CheckName("node", node); err != nil {
		return err
	}
	if reserved[node] {
		return fmt.Errorf("node name %q is reserved (its files would be the CA's or etcd's): %w", node, layout.ErrBadName)
	}
	return nil
}

// NodeCert and NodeKey name a node's files in a TLS directory.
func NodeCert(node string) string { return node + ".crt" }

// NodeKey: see NodeCert.
func NodeKey(node string) string { return node + ".key" }

// NodeOf returns the node a certificate names in its node URI SAN; ok is
// false for a certificate that is not a node's.
func NodeOf(c *x509.Certificate) (node string, ok bool) {
	for _, u := range c.URIs {
		if s := u.String(); strings.HasPrefix(s, nodeURIPrefix) {
			n := s[len(nodeURIPrefix):]
			if CheckNode(n) == nil {
				return n, true
			}
		}
	}
	return "", false
}

// Init writes a new CA and the certificates of nodes, of an etcd client
// and of an etcd server into dir, creating dir 0700 (an existing dir is
// set to 0700); every file is PEM, mode 0600. hosts (IP addresses or DNS
// names) are the addresses nodes and etcd are reached at; 127.0.0.1, ::1
// and localhost are always added. Init refuses a dir that already holds
// a CA or any file it would write, and removes what it wrote when it
// fails.
func Init(dir string, nodes []string, hosts []string) error {
	if len(nodes) == 0 {
		return fmt.Errorf("init: no nodes: %w", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if err := CheckNode(n); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		if seen[n] {
			return fmt.Errorf("init: node %q given twice: %w", n, ErrInvalid)
		}
		seen[n] = true
	}
	ips, dns, err := sans(hosts)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	for _, name := range []string{CACert, CAKey} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("init: %s already holds a CA (%s); make a new directory rather than replace keys in use: %w", dir, name, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("init: %w", err)
		}
	}

	now := time.Now()
	files := map[string][]byte{} // name → PEM, written once all are made
	caKey, err := newKey()
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "ctx-cluster CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // it signs leaves only
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("init: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("init: CA: %w", err)
	}
	if err := addPair(files, CACert, CAKey, caDER, caKey); err != nil {
		return fmt.Errorf("init: %w", err)
	}

	leaf := func(cn string, usage []x509.ExtKeyUsage, withHosts bool, uris []*url.URL, certName, keyName string) error {
		k, err := newKey()
		if err != nil {
			return err
		}
		t := &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn},
			NotBefore:   now.Add(-backdate),
			NotAfter:    now.Add(LeafValidity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: usage,
			URIs:        uris,
		}
		if withHosts {
			t.IPAddresses, t.DNSNames = ips, dns
		}
		der, err := sign(t, ca, &k.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("%s: %w", certName, err)
		}
		return addPair(files, certName, keyName, der, k)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, n := range nodes {
		u, err := url.Parse(nodeURIPrefix + n)
		if err != nil {
			return fmt.Errorf("init: node %q: %w", n, err)
		}
		if err := leaf(n, both, true, []*url.URL{u}, NodeCert(n), NodeKey(n)); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	if err := leaf("etcd-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false, nil, EtcdClientCert, EtcdClientKey); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	// etcd dials its own client port with its server certificate (its
	// gRPC gateway), so with --client-cert-auth that certificate must
	// allow client use too; it carries no node URI, so nodes still refuse it.
	if err := leaf("etcd-server", both, true, nil, EtcdServerCert, EtcdServerKey); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return writeAll(dir, files)
}

// sans splits hosts into the IP and DNS SANs of node and etcd server
// certificates, loopback and localhost included.
func sans(hosts []string) ([]net.IP, []string, error) {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	dns := []string{"localhost"}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !containsIP(ips, ip) {
				ips = append(ips, ip)
			}
			continue
		}
		if err := CheckHost(h); err != nil {
			return nil, nil, err
		}
		h = strings.ToLower(h)
		if !containsString(dns, h) {
			dns = append(dns, h)
		}
	}
	return ips, dns, nil
}

func containsIP(ips []net.IP, ip net.IP) bool {
	for _, x := range ips {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// CheckHost accepts an IP address or a DNS name (no port, no zone): what a
// certificate's SANs can name. Its errors wrap ErrInvalid.
func CheckHost(h string) error {
	if net.ParseIP(h) != nil || validDNSName(h) {
		return nil
	}
	return fmt.Errorf("host %q: give an IP address or a DNS name, without a port: %w", h, ErrInvalid)
}

// validDNSName accepts letters, digits and hyphens in dot-separated
// labels of 1–63 bytes, 253 bytes in all: what a certificate's DNS SAN
// can be matched against.
func validDNSName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, priv *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return der, nil
}

func addPair(files map[string][]byte, certName, keyName string, der []byte, k *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return fmt.Errorf("%s: %w", keyName, err)
	}
	files[certName] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	files[keyName] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
	return nil
}

// writeAll creates every file with O_EXCL, mode 0600, and fsyncs it and
// then dir; on any failure it removes the files it created, so a failed
// init leaves nothing that a second one would refuse.
func writeAll(dir string, files map[string][]byte) (err error) {
	var made []string
	defer func() {
		if err != nil {
			for _, p := range made {
				_ = os.Remove(p)
			}
		}
	}()
	for name, b := range files {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("init: %s exists; keys are never overwritten: %w", p, ErrExists)
			}
			return fmt.Errorf("init: %w", err)
		}
		made = append(made, p)
		_, err = f.Write(b)
		if err == nil {
			err = f.Chmod(0o600) // whatever the umask left
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("init: write %s: %w", p, err)
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("init: fsync %s: %w", dir, err)
	}
	return nil
}

// maxPEM bounds what a TLS file may hold: one certificate or key is far
// below it.
const maxPEM = 64 << 10

// readFile reads a TLS file, naming it in every error; a key readable by
// group or others is refused as ssh refuses one.
func readFile(dir, name string, key bool) ([]byte, error) {
	p := filepath.Join(dir, name)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is missing (ctx-cluster init makes it): %w: %w", p, ErrMaterial, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrMaterial, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMaterial, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: %w", p, ErrMaterial)
	}
	if key && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is mode %04o: a private key must be readable by its owner only (chmod 600): %w", p, st.Mode().Perm(), ErrMaterial)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", p, ErrMaterial, err)
	}
	if len(b) > maxPEM {
		return nil, fmt.Errorf("%s is larger than %d bytes: %w", p, maxPEM, ErrMaterial)
	}
	return b, nil
}

// loadCA reads ca.crt: exactly one CA certificate.
func loadCA(dir string) (*x509.Certificate, *x509.CertPool, error) {
	b, err := readFile(dir, CACert, false)
	if err != nil {
		return nil, nil, err
	}
	p := filepath.Join(dir, CACert)
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, nil, fmt.Errorf("%s: want exactly one PEM CERTIFICATE: %w", p, ErrMaterial)
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", p, ErrMaterial, err)
	}
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate: %w", p, ErrMaterial)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return ca, pool, nil
}

// loadPair reads a certificate and its key and checks that the
// certificate is signed by the CA for usage, so a wrong or expired file
// stops a start rather than the first handshake.
func loadPair(dir, certName, keyName string, pool *x509.CertPool, usage x509.ExtKeyUsage) (tls.Certificate, error) {
	cb, err := readFile(dir, certName, false)
	if err != nil {
		return tls.Certificate{}, err
	}
	kb, err := readFile(dir, keyName, true)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(cb, kb)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s, %s: %w: %w", filepath.Join(dir, certName), filepath.Join(dir, keyName), ErrMaterial, err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: not valid under %s: %w: %w", filepath.Join(dir, certName), CACert, ErrMaterial, err)
	}
	return pair, nil
}

// NodeTLS returns the TLS configurations of node-to-node traffic for node,
// from the files Init wrote into dir: server requires and verifies a
// client certificate, client presents one; both accept only the CA of dir
// and only a peer whose certificate is a node's (NodeOf), over TLS 1.3.
// The caller sets client.ServerName (gRPC does, from the address it
// dials): the peer's certificate must hold that address, which is why
// init's --hosts lists every address nodes reach each other at. A missing
// file is named in the error.
func NodeTLS(dir, node string) (server *tls.Config, client *tls.Config, err error) {
	if err := CheckNode(node); err != nil {
		return nil, nil, fmt.Errorf("node TLS: %w", err)
	}
	_, pool, err := loadCA(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("node TLS: %w", err)
	}
	pair, err := loadPair(dir, NodeCert(node), NodeKey(node), pool, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, nil, fmt.Errorf("node TLS: %w", err)
	}
	if n, ok := NodeOf(pair.Leaf); !ok || n != node {
		return nil, nil, fmt.Errorf("node TLS: %s does not name node %q: %w", filepath.Join(dir, NodeCert(node)), node, ErrMaterial)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, nil, fmt.Errorf("node TLS: %s cannot be a client certificate: %w: %w", filepath.Join(dir, NodeCert(node)), ErrMaterial, err)
	}
	server = &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{pair},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        pool,
		VerifyConnection: peerIsNode,
	}
	client = &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{pair},
		RootCAs:          pool,
		VerifyConnection: peerIsNode,
	}
	return server, client, nil
}

// peerIsNode runs after the chain was verified against the CA: the CA
// also signs etcd's certificates, which must not pass for a node.
func peerIsNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("cluster peer presented no certificate")
	}
	if _, ok := NodeOf(cs.PeerCertificates[0]); !ok {
		return fmt.Errorf("cluster peer %q is not a node certificate", cs.PeerCertificates[0].Subject.CommonName)
	}
	return nil
}

// EtcdClientTLS returns the TLS configuration of a node's etcd client: the
// etcd client certificate of dir, trusting only its CA. Its minimum is
// TLS 1.2, not 1.3: an etcd restricted with --cipher-suites speaks 1.2 only.
func EtcdClientTLS(dir string) (*tls.Config, error) {
	_, pool, err := loadCA(dir)
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	pair, err := loadPair(dir, EtcdClientCert, EtcdClientKey, pool, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
	}, nil
}
