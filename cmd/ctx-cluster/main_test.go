package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/cluster"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/version"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestVersionAndUsage(t *testing.T) {
	for _, flag := range []string{"--version", "-V"} {
		code, out, _ := runCLI(t, flag)
		if code != 0 || out != "ctx-cluster "+version.Version+"\n" {
			t.Errorf("%s: %d %q", flag, code, out)
		}
	}
	if code, out, _ := runCLI(t, "--help"); code != 0 || !strings.Contains(out, "init") || !strings.Contains(out, "daemon") || !strings.Contains(out, "status") {
		t.Errorf("--help: %d %q", code, out)
	}
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"init", "--nodes", "a"},          // no --dir
		{"init", "--dir", t.TempDir()},    // no --nodes
		{"daemon"},                        // no --cluster
		{"status", "--cluster", "x", "y"}, // a stray argument
	} {
		if code, _, errOut := runCLI(t, args...); code != exitcode.Usage || !strings.HasPrefix(errOut, "ctx-cluster: ") {
			t.Errorf("%q: exit %d, stderr %q; want %d and a message", args, code, errOut, exitcode.Usage)
		}
	}
}

// TestInit: interfaces.md Cluster — `init --dir DIR --nodes ID[,ID…]
// [--hosts ADDR,…]` writes the CA and a certificate per node; a second
// init on the same DIR is refused and changes nothing.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	code, out, errOut := runCLI(t, "init", "--dir", dir, "--nodes", "n1,n2", "--hosts", "10.1.2.3,ctx.example")
	if code != 0 {
		t.Fatalf("init: %d %s", code, errOut)
	}
	for _, want := range []string{"ca.crt", "n1.crt", "n2.key", "etcd-client.crt", "etcd-server.key"} {
		if !strings.Contains(out, want) {
			t.Errorf("init's output does not name %s:\n%s", want, out)
		}
	}
	for _, n := range []string{"n1", "n2"} {
		srv, _, err := clustercert.NodeTLS(dir, n)
		if err != nil {
			t.Fatalf("node %s: %v", n, err)
		}
		ips := srv.Certificates[0].Leaf.IPAddresses
		if len(ips) != 3 || ips[2].String() != "10.1.2.3" {
			t.Errorf("node %s IP SANs %v, want loopback and 10.1.2.3", n, ips)
		}
	}
	if _, err := clustercert.EtcdClientTLS(dir); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	code, _, errOut = runCLI(t, "init", "--dir", dir, "--nodes", "n3")
	if code != exitcode.Usage || !strings.Contains(errOut, "already holds a CA") {
		t.Errorf("second init: %d %q", code, errOut)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(key, again) {
		t.Error("a refused init changed ca.key")
	}
	for _, args := range [][]string{
		{"--nodes", "ca"},
		{"--nodes", "a,a"},
		{"--nodes", "a/b"},
		{"--nodes", "a", "--hosts", "10.0.0.1:7000"},
	} {
		d := filepath.Join(t.TempDir(), "tls")
		if code, _, errOut := runCLI(t, append([]string{"init", "--dir", d}, args...)...); code != exitcode.Usage {
			t.Errorf("init %q: exit %d (%s), want %d", args, code, errOut, exitcode.Usage)
		}
	}
}

// clusterFile writes a valid cluster file for node n1 with its TLS
// material in tlsDir.
func clusterFile(t *testing.T, tlsDir string, edit func(map[string]any)) string {
	t.Helper()
	base := t.TempDir()
	m := map[string]any{
		"cluster": "test", "node": "n1", "listen": "127.0.0.1:0",
		"etcd":    []string{"https://127.0.0.1:9"},
		"tls_dir": tlsDir, "root": base + "/root", "runtime_dir": base + "/run",
		"workspaces": []string{base + "/work"},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(base, "cluster.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDaemonAndStatusValidate: the file and (daemon) the node's TLS
// material are checked before the cluster code runs; an invalid file or
// missing certificate is invalid input (2), named in the message.
func TestDaemonAndStatusValidate(t *testing.T) {
	tlsDir := filepath.Join(t.TempDir(), "tls")
	if code, _, errOut := runCLI(t, "init", "--dir", tlsDir, "--nodes", "n1"); code != 0 {
		t.Fatal(errOut)
	}
	good := clusterFile(t, tlsDir, nil)
	// No etcd answers: the node cannot join; unavailable, naming the
	// cluster. In-process, so without the fence (which would run this
	// test binary as the node).
	t.Setenv(cluster.EnvNoFence, "1")
	if code, _, errOut := runCLI(t, "daemon", "--cluster", good); code != exitcode.Unavailable || !strings.Contains(errOut, "join cluster") {
		t.Errorf("daemon without etcd: %d %q, want %d", code, errOut, exitcode.Unavailable)
	}
	// No etcd answers at the file's endpoint: status says so, unavailable.
	if code, _, errOut := runCLI(t, "status", "--cluster", good, "--json"); code != exitcode.Unavailable || !strings.Contains(errOut, "etcd") {
		t.Errorf("status without etcd: %d %q, want %d naming etcd", code, errOut, exitcode.Unavailable)
	}

	noMaterial := clusterFile(t, tlsDir, func(m map[string]any) { m["node"] = "n2" })
	code, _, errOut := runCLI(t, "daemon", "--cluster", noMaterial)
	if want := filepath.Join(tlsDir, "n2.crt"); code != exitcode.Usage || !strings.Contains(errOut, want) {
		t.Errorf("daemon without its certificate: %d %q, want %d naming %s", code, errOut, exitcode.Usage, want)
	}

	http := clusterFile(t, tlsDir, func(m map[string]any) { m["etcd"] = []string{"http://127.0.0.1:2379"} })
	extra := clusterFile(t, tlsDir, func(m map[string]any) { m["region"] = "eu" })
	missing := filepath.Join(t.TempDir(), "none.json")
	for _, f := range []string{http, extra, missing} {
		for _, cmd := range []string{"daemon", "status"} {
			code, _, errOut := runCLI(t, cmd, "--cluster", f)
			if code != exitcode.Usage || !strings.Contains(errOut, f) {
				t.Errorf("%s --cluster %s: %d %q, want %d naming the file", cmd, f, code, errOut, exitcode.Usage)
			}
		}
	}
}
