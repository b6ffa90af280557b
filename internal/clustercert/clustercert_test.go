package clustercert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/layout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// initDir makes the material of nodes a and b (and the etcd pair) in a
// fresh directory below a temp dir, so Init creates it.
func initDir(t *testing.T, hosts ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if err := Init(dir, []string{"a", "b"}, hosts); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInitFilesAndModes: interfaces.md Cluster — DIR 0700, files 0600,
// PEM; exactly the files docs/cluster.md lists.
func TestInitFilesAndModes(t *testing.T) {
	dir := initDir(t, "10.0.0.7", "node-b.example")
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %04o, want 0700", st.Mode().Perm())
	}
	want := []string{"a.crt", "a.key", "b.crt", "b.key", CACert, CAKey, EtcdClientCert, EtcdClientKey, EtcdServerCert, EtcdServerKey}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 || !info.Mode().IsRegular() {
			t.Errorf("%s: mode %v, want a regular file 0600", e.Name(), info.Mode())
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		blk, _ := pem.Decode(b)
		wantType := "CERTIFICATE"
		if strings.HasSuffix(e.Name(), ".key") {
			wantType = "PRIVATE KEY"
		}
		if blk == nil || blk.Type != wantType {
			t.Errorf("%s: not PEM %s", e.Name(), wantType)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

// TestInitTightensAnExistingDir: an existing directory is set to 0700.
func TestInitTightensAnExistingDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Init(dir, []string{"n1"}, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %04o, want 0700", st.Mode().Perm())
	}
}

func TestInitCertificates(t *testing.T) {
	dir := initDir(t, "10.0.0.7", "Node-B.example", "10.0.0.7", "fd00::1")
	ca := readCert(t, filepath.Join(dir, CACert))
	if !ca.IsCA || ca.MaxPathLen != 0 || !ca.MaxPathLenZero {
		t.Errorf("CA: IsCA %v MaxPathLen %d", ca.IsCA, ca.MaxPathLen)
	}
	near := func(name string, c *x509.Certificate, d time.Duration) {
		if got := c.NotAfter.Sub(c.NotBefore); got < d || got > d+time.Hour {
			t.Errorf("%s valid for %v, want %v (+ the backdate)", name, got, d)
		}
	}
	near("CA", ca, CAValidity)
	if CAValidity < 10*365*24*time.Hour || LeafValidity < 2*365*24*time.Hour {
		t.Errorf("validity: CA %v, leaves %v; docs/cluster.md says 10 and 2 years", CAValidity, LeafValidity)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	wantIPs := []string{"10.0.0.7", "127.0.0.1", "::1", "fd00::1"}
	wantDNS := []string{"localhost", "node-b.example"}
	hostSANs := func(name string, c *x509.Certificate) {
		var ips []string
		for _, ip := range c.IPAddresses {
			ips = append(ips, ip.String())
		}
		slices.Sort(ips)
		dns := slices.Clone(c.DNSNames)
		slices.Sort(dns)
		if !slices.Equal(ips, wantIPs) || !slices.Equal(dns, wantDNS) {
			t.Errorf("%s: IPs %v DNS %v, want %v %v", name, ips, dns, wantIPs, wantDNS)
		}
	}
	usage := func(name string, c *x509.Certificate, want ...x509.ExtKeyUsage) {
		if !slices.Equal(c.ExtKeyUsage, want) {
			t.Errorf("%s: ExtKeyUsage %v, want %v", name, c.ExtKeyUsage, want)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: want}); err != nil {
			t.Errorf("%s: does not verify under the CA: %v", name, err)
		}
		if c.PublicKeyAlgorithm != x509.ECDSA {
			t.Errorf("%s: key %v, want ECDSA", name, c.PublicKeyAlgorithm)
		}
		near(name, c, LeafValidity)
	}
	for _, n := range []string{"a", "b"} {
		c := readCert(t, filepath.Join(dir, NodeCert(n)))
		usage(n, c, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		hostSANs(n, c)
		if got, ok := NodeOf(c); !ok || got != n || c.Subject.CommonName != n {
			t.Errorf("node cert %s names %q (%v), CN %q", n, got, ok, c.Subject.CommonName)
		}
	}
	ec := readCert(t, filepath.Join(dir, EtcdClientCert))
	usage("etcd-client", ec, x509.ExtKeyUsageClientAuth)
	es := readCert(t, filepath.Join(dir, EtcdServerCert))
	usage("etcd-server", es, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	hostSANs("etcd-server", es)
	for name, c := range map[string]*x509.Certificate{"etcd-client": ec, "etcd-server": es, "CA": ca} {
		if n, ok := NodeOf(c); ok {
			t.Errorf("%s passes for node %q", name, n)
		}
	}
}

func TestInitRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		hosts []string
		want  error
	}{
		{"no nodes", nil, nil, ErrInvalid},
		{"twice", []string{"a", "a"}, nil, ErrInvalid},
		{"bad name", []string{"../x"}, nil, layout.ErrBadName},
		{"empty name", []string{""}, nil, layout.ErrBadName},
		{"reserved ca", []string{"ca"}, nil, layout.ErrBadName},
		{"reserved etcd-client", []string{"n", "etcd-client"}, nil, layout.ErrBadName},
		{"reserved etcd-server", []string{"etcd-server"}, nil, layout.ErrBadName},
		{"host with port", []string{"a"}, []string{"10.0.0.1:7000"}, ErrInvalid},
		{"host with space", []string{"a"}, []string{" h.example"}, ErrInvalid},
		{"empty host", []string{"a"}, []string{""}, ErrInvalid},
		{"host empty label", []string{"a"}, []string{"a..b"}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tls")
			err := Init(dir, tc.nodes, tc.hosts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Init(%q, %q) = %v, want %v", tc.nodes, tc.hosts, err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused init made %s (%v)", dir, err)
			}
		})
	}
}

// TestInitNeverOverwrites: a directory with a CA is refused and its keys
// are unchanged; a stray file init would write is refused too, and the
// files written before it are removed.
func TestInitNeverOverwrites(t *testing.T) {
	dir := initDir(t)
	before, _ := os.ReadFile(filepath.Join(dir, CAKey))
	if err := Init(dir, []string{"c"}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second init: %v, want ErrExists", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, CAKey))
	if string(before) != string(after) {
		t.Error("ca.key changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "c.crt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused init wrote c.crt (%v)", err)
	}

	stray := t.TempDir()
	if err := os.WriteFile(filepath.Join(stray, "b.key"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Init(stray, []string{"a", "b"}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("init over b.key: %v, want ErrExists", err)
	}
	ents, _ := os.ReadDir(stray)
	if len(ents) != 1 || ents[0].Name() != "b.key" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("after a failed init the dir holds %v, want only b.key", names)
	}
	if b, _ := os.ReadFile(filepath.Join(stray, "b.key")); string(b) != "mine" {
		t.Errorf("b.key overwritten: %q", b)
	}
}

// handshake runs one TLS handshake over loopback and returns the server's
// and the client's errors.
func handshake(t *testing.T, server, client *tls.Config) (serr, cerr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// A TLS 1.3 server learns of a refused server certificate only
			// when it reads; one byte proves the client accepted it.
			var b [1]byte
			_, err = io.ReadFull(tc, b[:])
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := (&tls.Dialer{Config: client}).DialContext(ctx, "tcp", ln.Addr().String())
	if err == nil {
		// In TLS 1.3 the client's handshake ends before the server checked
		// its certificate: the refusal arrives on the first read.
		_, cerr = c.Write([]byte{1})
		if cerr == nil {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var b [1]byte
			_, cerr = c.Read(b[:])
			if errors.Is(cerr, io.EOF) {
				cerr = nil // the server closed after a good handshake
			}
		}
		c.Close()
	} else {
		cerr = err
	}
	select {
	case serr = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("server handshake did not end")
	}
	return serr, cerr
}

func withServerName(c *tls.Config, name string) *tls.Config {
	c = c.Clone()
	c.ServerName = name
	return c
}

func TestNodeToNode(t *testing.T) {
	dir := initDir(t)
	aSrv, _, err := NodeTLS(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, bCli, err := NodeTLS(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*tls.Config{aSrv, bCli} {
		if c.MinVersion != tls.VersionTLS13 {
			t.Errorf("MinVersion %x, want TLS 1.3", c.MinVersion)
		}
	}
	if aSrv.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("ClientAuth %v", aSrv.ClientAuth)
	}
	if aSrv.VerifyConnection == nil || bCli.VerifyConnection == nil {
		t.Fatal("no check that the peer is a node")
	}
	var seen string
	srv := aSrv.Clone()
	srv.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := aSrv.VerifyConnection(cs); err != nil {
			return err
		}
		seen, _ = NodeOf(cs.PeerCertificates[0])
		return nil
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		serr, cerr := handshake(t, srv, withServerName(bCli, host))
		if serr != nil || cerr != nil {
			t.Fatalf("node b → node a at %s: server %v, client %v", host, serr, cerr)
		}
		if seen != "b" {
			t.Errorf("server saw node %q, want b", seen)
		}
	}
	// The certificate holds only the hosts init was given.
	if _, cerr := handshake(t, aSrv, withServerName(bCli, "elsewhere.example")); cerr == nil {
		t.Error("a server name outside the certificate's hosts was accepted")
	}
}

// TestNodeRefusesOthers: the peer of a node must hold a node certificate
// of this CA; another CA's node and this CA's etcd certificates are
// refused, in both directions.
func TestNodeRefusesOthers(t *testing.T) {
	dir := initDir(t)
	other := initDir(t)
	aSrv, aCli, err := NodeTLS(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	oSrv, oCli, err := NodeTLS(other, "b")
	if err != nil {
		t.Fatal(err)
	}
	local := func(c *tls.Config) *tls.Config { return withServerName(c, "127.0.0.1") }
	if serr, _ := handshake(t, aSrv, local(oCli)); serr == nil {
		t.Error("a node of another CA was accepted as a client")
	}
	if _, cerr := handshake(t, oSrv, local(aCli)); cerr == nil {
		t.Error("a node of another CA was accepted as a server")
	}

	pair := func(cert, key string) tls.Certificate {
		p, err := tls.LoadX509KeyPair(filepath.Join(dir, cert), filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := x509.NewCertPool()
	ca.AddCert(readCert(t, filepath.Join(dir, CACert)))
	for _, p := range []struct{ cert, key string }{{EtcdClientCert, EtcdClientKey}, {EtcdServerCert, EtcdServerKey}} {
		cli := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair(p.cert, p.key)}}
		serr, _ := handshake(t, aSrv, cli)
		if serr == nil || !strings.Contains(serr.Error(), "not a node certificate") {
			t.Errorf("%s as a node's client: server error %v, want not a node certificate", p.cert, serr)
		}
	}
	srv := &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca, Certificates: []tls.Certificate{pair(EtcdServerCert, EtcdServerKey)}}
	if _, cerr := handshake(t, srv, local(aCli)); cerr == nil || !strings.Contains(cerr.Error(), "not a node certificate") {
		t.Errorf("etcd-server as a node's server: client error %v, want not a node certificate", cerr)
	}
}

// TestEtcdClientTLS: the etcd client certificate is accepted by a server
// holding the etcd server certificate and requiring client certificates,
// as etcd with --client-cert-auth --trusted-cert-file=ca.crt does.
func TestEtcdClientTLS(t *testing.T) {
	dir := initDir(t)
	cli, err := EtcdClientTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, EtcdServerCert), filepath.Join(dir, EtcdServerKey))
	if err != nil {
		t.Fatal(err)
	}
	ca := x509.NewCertPool()
	ca.AddCert(readCert(t, filepath.Join(dir, CACert)))
	srv := &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca, Certificates: []tls.Certificate{pair}}
	if serr, cerr := handshake(t, srv, withServerName(cli, "localhost")); serr != nil || cerr != nil {
		t.Fatalf("etcd client → etcd server: server %v, client %v", serr, cerr)
	}
	// etcd's own gateway dials it with the server certificate as a client.
	self := &tls.Config{RootCAs: ca, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}}
	if serr, cerr := handshake(t, srv, self); serr != nil || cerr != nil {
		t.Fatalf("etcd server certificate as its own client: server %v, client %v", serr, cerr)
	}
}

// TestMissingMaterialNamed: a node refuses to start without its
// material, and the error names the file.
func TestMissingMaterialNamed(t *testing.T) {
	for _, f := range []string{CACert, "a.crt", "a.key"} {
		dir := initDir(t)
		p := filepath.Join(dir, f)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		_, _, err := NodeTLS(dir, "a")
		if !errors.Is(err, ErrMaterial) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p) {
			t.Errorf("without %s: %v, want ErrMaterial naming %s", f, err, p)
		}
	}
	for _, f := range []string{CACert, EtcdClientCert, EtcdClientKey} {
		dir := initDir(t)
		p := filepath.Join(dir, f)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if _, err := EtcdClientTLS(dir); !errors.Is(err, ErrMaterial) || !strings.Contains(err.Error(), p) {
			t.Errorf("etcd client without %s: %v", f, err)
		}
	}
	dir := initDir(t)
	if _, _, err := NodeTLS(dir, "z"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "z.crt")) {
		t.Errorf("an unknown node: %v", err)
	}
	if _, _, err := NodeTLS(dir, "etcd-client"); !errors.Is(err, layout.ErrBadName) {
		t.Errorf("node etcd-client: %v, want a bad name", err)
	}
}

// TestMaterialRefused: files present but wrong stop a start too.
func TestMaterialRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir, other string)
		want  string
	}{
		{"key readable by group", func(t *testing.T, dir, _ string) {
			if err := os.Chmod(filepath.Join(dir, "a.key"), 0o640); err != nil {
				t.Fatal(err)
			}
		}, "mode 0640"},
		{"key of another node", func(t *testing.T, dir, _ string) {
			copyFile(t, filepath.Join(dir, "b.key"), filepath.Join(dir, "a.key"))
		}, "private key does not match"},
		{"certificate of another node", func(t *testing.T, dir, _ string) {
			copyFile(t, filepath.Join(dir, "b.crt"), filepath.Join(dir, "a.crt"))
			copyFile(t, filepath.Join(dir, "b.key"), filepath.Join(dir, "a.key"))
		}, `does not name node "a"`},
		{"etcd client pair as a node's", func(t *testing.T, dir, _ string) {
			copyFile(t, filepath.Join(dir, EtcdClientCert), filepath.Join(dir, "a.crt"))
			copyFile(t, filepath.Join(dir, EtcdClientKey), filepath.Join(dir, "a.key"))
		}, "not valid under"},
		{"CA of another cluster", func(t *testing.T, dir, other string) {
			copyFile(t, filepath.Join(other, CACert), filepath.Join(dir, CACert))
		}, "not valid under"},
		{"a leaf as the CA", func(t *testing.T, dir, _ string) {
			copyFile(t, filepath.Join(dir, "b.crt"), filepath.Join(dir, CACert))
		}, "not a CA certificate"},
		{"garbage CA", func(t *testing.T, dir, _ string) {
			if err := os.WriteFile(filepath.Join(dir, CACert), []byte("not pem"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "exactly one PEM CERTIFICATE"},
		{"a directory for a file", func(t *testing.T, dir, _ string) {
			p := filepath.Join(dir, "a.crt")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, other := initDir(t), initDir(t)
			tc.spoil(t, dir, other)
			_, _, err := NodeTLS(dir, "a")
			if !errors.Is(err, ErrMaterial) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NodeTLS: %v, want ErrMaterial containing %q", err, tc.want)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckNode(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "node-1": true, "n.example_2": true, "A..b": true,
		"": false, "-a": false, ".a": false, "a/b": false, "ca": false, "etcd-client": false, "etcd-server": false,
		strings.Repeat("n", 64): true, strings.Repeat("n", 65): false,
	} {
		if err := CheckNode(name); (err == nil) != ok {
			t.Errorf("CheckNode(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestCheckHost(t *testing.T) {
	for h, ok := range map[string]bool{
		"10.0.0.1": true, "::1": true, "fd00::9": true, "localhost": true, "node-1.example.com": true, "N1": true,
		"": false, "10.0.0.1:7000": false, "[::1]": false, "fe80::1%eth0": false, "a..b": false, "-a": false,
		"a-": false, "a_b": false, "a b": false, "*.example": false, strings.Repeat("a", 64): false,
		strings.Repeat("a.", 126) + "a": true, strings.Repeat("a.", 127) + "a": false,
	} {
		if err := CheckHost(h); (err == nil) != ok {
			t.Errorf("CheckHost(%q) = %v, want ok=%v", h, err, ok)
		} else if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckHost(%q): %v does not wrap ErrInvalid", h, err)
		}
	}
}
