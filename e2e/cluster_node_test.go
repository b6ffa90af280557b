package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/cgroup"
)

// clusterNode is one ctx-cluster daemon of a test cluster.
type clusterNode struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	file string
	// listen is the node's address for other nodes (the front door).
	listen string
	done   chan struct{}
}

// freePort returns a loopback address nothing listens on now, below the
// kernel's ephemeral range (ip_local_port_range, 32768 up by default) and
// never handed out twice in this process: a port from ":0" closed again
// could become the local port of any outgoing connection of a parallel
// test before the node binds it.
func freePort(t *testing.T) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if portsUsed[p] {
			continue
		}
		portsUsed[p] = true
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

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
func startNode(t *testing.T, w *world, run, tlsDir, etcd, node string, shared []string) *clusterNode {
	t.Helper()
	n := launchNode(t, w, run, tlsDir, etcd, node, shared)
	n.waitServing(t, run, node)
	return n
}

// launchNode starts a node without waiting for it to serve.
func launchNode(t *testing.T, w *world, run, tlsDir, etcd, node string, shared []string) *clusterNode {
	t.Helper()
	file := filepath.Join(t.TempDir(), node+".json")
	listen := freePort(t)
	b, _ := json.Marshal(map[string]any{"cluster": "c1", "node": node, "listen": listen, "etcd": []string{etcd},
		"tls_dir": tlsDir, "root": w.root, "runtime_dir": run, "workspaces": shared})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n := &clusterNode{file: file, listen: listen, log: &syncBuffer{}, done: make(chan struct{})}
	// Last, after the node stopped: no run cgroup of the node (keyed by
	// its runtime directory) outlives the test — a node killed -9 has no
	// reaper to sweep them (docs/cluster.md), its next start would.
	t.Cleanup(func() {
		m := cgroup.New(context.Background(), os.Getuid(), run, nil)
		_, _ = m.Sweep()
		m.Release()
	})
	n.cmd = exec.Command(filepath.Join(binDir, "ctx-cluster"), "daemon", "--cluster", file)
	n.cmd.Env = w.env("CTX_RUNTIME_DIR=" + run)
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
	return n
}

// waitServing waits for the node's system socket.
func (n *clusterNode) waitServing(t *testing.T, run, node string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", run+"/system.sock"); err == nil {
			c.Close()
			return
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

// newCluster makes a world (its root is the cluster's shared root),
// init's certificates for n1, n2 and n3, a running etcd and one shared
// workspace.
func newCluster(t *testing.T) (w *world, tlsDir, etcd, ws string) {
	t.Helper()
	w = newWorld(t)
	tlsDir = filepath.Join(t.TempDir(), "tls")
	if out, err := exec.Command(filepath.Join(binDir, "ctx-cluster"), "init", "--dir", tlsDir, "--nodes", "n1,n2,n3").CombinedOutput(); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	return w, tlsDir, startEtcd(t, tlsDir), w.workspace()
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
	w, tlsDir, etcd, ws := newCluster(t)
	n := startNode(t, w, w.run, tlsDir, etcd, "n1", []string{ws})
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

// A node killed with -9 mid-run: its lease expires, its owner key goes,
// and the survivor — with no client asking — owns the session at a larger
// epoch, seals the lost node's segment and concludes the open run exactly
// once — interrupted, naming the lost node, then done — with seq
// contiguous across the two segments; then it serves the session. A send
// the survivor's front door had carried to the lost node (queued there,
// unrecorded) is sent again to the next owner and answered once
// (interfaces.md "Cluster (phase 1)").
func TestClusterLostNodesRunIsConcludedByTheSurvivor(t *testing.T) {
	w, tlsDir, etcd, ws := newCluster(t)
	run2 := filepath.Join(filepath.Dir(w.run), "run2")
	n1 := startNode(t, w, w.run, tlsDir, etcd, "n1", []string{ws})
	n2 := startNode(t, w, run2, tlsDir, etcd, "n2", []string{ws})
	w.agent("a", nil)
	dir := filepath.Join(w.root, "home", itoa(os.Getuid()), "agent", "a", "session", "default")

	for _, run := range []string{w.run, run2} {
		waitFor(t, "the agent's socket on both nodes", 20*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(run, "agent", "a.sock"))
			return err == nil
		})
	}
	// A long run on n1.
	send := exec.Command(w.ctxBin, "agent", "send", "a", "sleep", "60")
	send.Env, send.Dir = w.env(), ws
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { send.Process.Kill(); send.Wait() }()
	waitFor(t, "the run to be under way on n1", 20*time.Second, func() bool {
		segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.jsonl"))
		if len(segs) != 1 {
			return false
		}
		b, _ := os.ReadFile(segs[0])
		return strings.Contains(string(b), "sleeping")
	})
	// Asked on n2 while n1 lives: n2's front door carries the send to n1,
	// where it waits behind the long run (nothing recorded yet).
	on2 := func(args ...string) result {
		cmd := exec.Command(w.ctxBin, args...)
		cmd.Env, cmd.Dir = w.env("CTX_RUNTIME_DIR="+run2), ws
		return w.runCmd(cmd)
	}
	early := make(chan result, 1)
	go func() { early <- on2("agent", "send", "a", "--json", "echo", "early") }()
	time.Sleep(500 * time.Millisecond)
	select {
	case r := <-early:
		t.Fatalf("a send through n2 ended while n1's run was under way: %d %q %q\nn2:\n%s", r.code, r.stdout, r.stderr, n2.log)
	default:
	}
	killed := time.Now()
	n1.cmd.Process.Kill() // the fence parent; the node dies with it
	<-n1.done
	// With no client asking, the survivor adopts the session once n1's
	// lease is gone and concludes the run: a second segment, n2's.
	waitFor(t, "n2 to conclude the lost node's run on its own", 15*time.Second, func() bool {
		segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.jsonl"))
		if len(segs) != 2 {
			return false
		}
		b, _ := os.ReadFile(segs[1])
		return strings.Contains(string(b), `"type":"done"`)
	})
	concluded := time.Since(killed)
	// The send n2's front door carried to n1 was never recorded there: the
	// front sends it again to the session's next owner (n2 itself), where
	// it runs once, and its client sees one answer.
	select {
	case r := <-early:
		if r.code != 0 || !strings.Contains(r.stdout, `"text":"echo: early"`) || strings.Count(r.stdout, `"type":"assistant"`) != 1 || strings.Count(r.stdout, `"type":"done"`) != 1 {
			t.Fatalf("the send through n2's front door: %d %q %q\nn2:\n%s", r.code, r.stdout, r.stderr, n2.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the send through n2's front door never ended\nn2:\n%s", n2.log)
	}
	// n2 serves the session.
	var r result
	waitFor(t, "n2 to serve the lost node's session", 20*time.Second, func() bool {
		r = on2("agent", "send", "a", "echo", "after")
		return r.code == 0
	})
	if r.stdout != "echo: after\n" {
		t.Fatalf("send on n2: %q %q", r.stdout, r.stderr)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.jsonl"))
	if len(segs) != 2 {
		t.Fatalf("segments %v, want n1's and n2's", segs)
	}
	b, _ := os.ReadFile(segs[1])
	if strings.Count(string(b), `"code":"interrupted"`) != 1 || !strings.Contains(string(b), "node n1 was lost") || !strings.Contains(string(b), `"node":"n2"`) {
		t.Fatalf("n2's segment:\n%s", b)
	}
	st := readClusterStatus(t, n2.file)
	if len(st.Sessions) != 1 || st.Sessions[0].Owner != "n2" {
		t.Errorf("status after failover %+v", st)
	}
	// The whole log, as a client resuming on n2 gets it: seq contiguous
	// across the two segments, each run done once.
	h := on2("agent", "resume", "a", "--json")
	var seq int64
	dones := 0
	for _, ln := range strings.Split(strings.TrimSpace(h.stdout), "\n") {
		var f struct {
			Type string
			Seq  int64
		}
		if json.Unmarshal([]byte(ln), &f) != nil || f.Seq == 0 {
			continue
		}
		if f.Seq != seq+1 {
			t.Fatalf("seq %d after %d in:\n%s", f.Seq, seq, h.stdout)
		}
		seq = f.Seq
		if f.Type == "done" {
			dones++
		}
	}
	if dones != 3 {
		t.Errorf("%d done frames, want the interrupted run's and the two new ones':\n%s", dones, h.stdout)
	}
	t.Logf("failover: the survivor concluded the run %v after the kill, with no client asking", concluded.Round(10*time.Millisecond))
}
