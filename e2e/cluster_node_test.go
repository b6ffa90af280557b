package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterNode is one ctx-cluster daemon of a test cluster.
type clusterNode struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	file string
	done chan struct{}
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startEtcd runs ctx-etcd-test over https with init's certificates.
func startEtcd(t *testing.T, tlsDir string) string {
	t.Helper()
	addr := freePort(t)
	cmd := exec.Command(filepath.Join(binDir, "ctx-etcd-test"), "--dir", t.TempDir(), "--listen", addr, "--tls-dir", tlsDir)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log.String(), "etcd ready") {
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not start:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "https://" + addr
}

// startNode starts one node serving w's root and runtime directory.
func startNode(t *testing.T, w *world, tlsDir, etcd, node string, shared []string) *clusterNode {
	t.Helper()
	file := filepath.Join(t.TempDir(), node+".json")
	b, _ := json.Marshal(map[string]any{"cluster": "c1", "node": node, "listen": freePort(t), "etcd": []string{etcd},
		"tls_dir": tlsDir, "root": w.root, "runtime_dir": w.run, "workspaces": shared})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n := &clusterNode{file: file, log: &syncBuffer{}, done: make(chan struct{})}
	n.cmd = exec.Command(filepath.Join(binDir, "ctx-cluster"), "daemon", "--cluster", file)
	n.cmd.Env = w.env()
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			n.cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", w.run+"/system.sock"); err == nil {
			c.Close()
			return n
		}
		select {
		case <-n.done:
			t.Fatalf("node %s exited at start:\n%s", node, n.log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never served:\n%s", node, n.log)
		}
	}
}

type clusterStatus struct {
	Nodes []struct {
		Node  string
		Alive bool
	}
	Sessions []struct {
		Session, Agent, Scope, Owner string
		Epoch                        int64
		ActiveRun                    *string `json:"active_run"`
	}
}

func readClusterStatus(t *testing.T, file string) clusterStatus {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "ctx-cluster"), "status", "--cluster", file, "--json").Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var s clusterStatus
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("status %q: %v", out, err)
	}
	return s
}

// One node of a cluster serves `ctx` exactly as a single daemon does, over
// its runtime directory: a send under a shared workspace runs, its frames
// go to the session's own segment (no events.jsonl), etcd names the node
// as the session's owner with an epoch, and `ctx-cluster status` says so;
// a workspace outside the shared prefixes is refused workspace_not_shared
// before anything is recorded; SIGTERM leaves the cluster (its keys go)
// and exits 0 (interfaces.md "Cluster (phase 1)").
func TestClusterOneNodeServesLikeADaemon(t *testing.T) {
	w := newWorld(t)
	tlsDir := filepath.Join(t.TempDir(), "tls")
	if out, err := exec.Command(filepath.Join(binDir, "ctx-cluster"), "init", "--dir", tlsDir, "--nodes", "n1,n2").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	etcd := startEtcd(t, tlsDir)
	ws := w.workspace()
	n := startNode(t, w, tlsDir, etcd, "n1", []string{ws})
	w.agent("a", nil)
	r := w.ctx(ws, "", "agent", "send", "a", "echo", "hello", "cluster")
	if r.code != 0 || r.stdout != "echo: hello cluster\n" {
		t.Fatalf("send on a node: %d %q %q\n%s", r.code, r.stdout, r.stderr, n.log)
	}
	dir := filepath.Join(w.root, "home", itoa(os.Getuid()), "agent", "a", "session", "default")
	if _, err := os.Stat(filepath.Join(dir, "events.jsonl")); err == nil {
		t.Error("a cluster session wrote events.jsonl")
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.jsonl"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want the owner's one", segs)
	}
	if b, _ := os.ReadFile(segs[0]); !strings.Contains(string(b), `"node":"n1"`) || !strings.Contains(string(b), `"type":"done"`) {
		t.Fatalf("segment:\n%s", b)
	}
	st := readClusterStatus(t, n.file)
	if len(st.Nodes) != 1 || st.Nodes[0].Node != "n1" || !st.Nodes[0].Alive {
		t.Errorf("status nodes %+v", st.Nodes)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].Owner != "n1" || st.Sessions[0].Agent != "a" || st.Sessions[0].Epoch <= 0 || st.Sessions[0].ActiveRun != nil {
		t.Errorf("status sessions %+v", st.Sessions)
	}
	// The same session again: the same ownership, the same segment.
	if r := w.ctx(ws, "", "agent", "send", "a", "echo", "again"); r.code != 0 || r.stdout != "echo: again\n" {
		t.Fatalf("second send: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if again, _ := filepath.Glob(filepath.Join(dir, "segments", "*.jsonl")); len(again) != 1 {
		t.Errorf("segments after a second send %v", again)
	}
	// Outside every shared prefix: refused, nothing recorded.
	other := w.workspace()
	r = w.ctx(other, "", "agent", "send", "a", "--session", "elsewhere", "echo", "no")
	if r.code == 0 || !strings.Contains(r.stderr, "workspace_not_shared") && !strings.Contains(r.stderr, "shared workspaces") {
		t.Errorf("a workspace outside the shared prefixes: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(w.root, "home", itoa(os.Getuid()), "agent", "a", "session", "elsewhere")); err == nil {
		t.Error("a refused request created its session")
	}
	// SIGTERM: the node leaves (its lease revoked, so its keys go) and exits 0.
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("node did not stop on SIGTERM:\n%s", n.log)
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("node exited %d on SIGTERM:\n%s", code, n.log)
	}
	if st := readClusterStatus(t, n.file); len(st.Nodes) != 0 || len(st.Sessions) != 0 {
		t.Errorf("after leaving: %+v", st)
	}
}
