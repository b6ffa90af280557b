package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/ownership"
)

// dialRun dials agent's socket under a node's runtime directory.
func dialRun(t *testing.T, run, agent string) *client {
	t.Helper()
	p := filepath.Join(run, "agent", agent+".sock")
	var c net.Conn
	var err error
	for i := 0; i < 300; i++ {
		if c, err = net.Dial("unix", p); err == nil {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dial %s: %v", p, err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

// pickedBy is the node rendezvous hashing places agent's private
// session on among nodes.
func pickedBy(agent, session string, nodes ...string) string {
	var live []ownership.NodeInfo
	for _, n := range nodes {
		live = append(live, ownership.NodeInfo{Node: n})
	}
	return ownership.Pick(ownership.SessionID(agent, "private", session), live).Node
}

// sessionOn returns a session name rendezvous hashing places on want
// among nodes, for agent's private scope.
func sessionOn(t *testing.T, agent, want string, nodes ...string) string {
	t.Helper()
	var live []ownership.NodeInfo
	for _, n := range nodes {
		live = append(live, ownership.NodeInfo{Node: n})
	}
	for i := 0; i < 1000; i++ {
		s := fmt.Sprintf("s%d", i)
		if ownership.Pick(ownership.SessionID(agent, "private", s), live).Node == want {
			return s
		}
	}
	t.Fatal("no session name lands on " + want)
	return ""
}

// Any node is a front door (interfaces.md "Cluster (phase 1)"): requests
// to n1's sockets for sessions no node serves yet are placed by
// rendezvous hashing over the live nodes, so some run on n2, and their
// clients see exactly what a single daemon would send; a run on n2 asks
// its approval through n1's connection, the answer goes back the same way
// and the tool runs once; `resume` through n1 streams n2's session; a
// TLS peer with the CA's etcd certificate instead of a node's is refused.
func TestClusterFrontDoor(t *testing.T) {
	w, tlsDir, etcd, ws := newCluster(t)
	run2 := filepath.Join(filepath.Dir(w.run), "run2")
	n1 := startNode(t, w, w.run, tlsDir, etcd, "n1", []string{ws})
	n2 := startNode(t, w, run2, tlsDir, etcd, "n2", []string{ws})
	w.agent("a", nil)
	w.tool("mark", markTool)
	w.agent("ap", map[string]string{"tools": "mark\n", "approval": "ask\n"})
	waitFor(t, "n1 to see both nodes", 10*time.Second, func() bool { return len(readClusterStatus(t, n1.file).Nodes) == 2 })

	// Twelve new sessions through n1: each answered as by one daemon.
	for i := 0; i < 12; i++ {
		r := w.ctx(ws, "", "agent", "send", "a", "--session", fmt.Sprintf("f%d", i), "echo", fmt.Sprintf("front %d", i))
		if want := fmt.Sprintf("echo: front %d\n", i); r.code != 0 || r.stdout != want {
			t.Fatalf("send %d through n1: %d %q %q\nn1:\n%s\nn2:\n%s", i, r.code, r.stdout, r.stderr, n1.log, n2.log)
		}
	}
	owners := map[string]int{}
	for _, s := range readClusterStatus(t, n1.file).Sessions {
		owners[s.Owner]++
	}
	if owners["n1"] == 0 || owners["n2"] == 0 || owners["n1"]+owners["n2"] != 12 {
		t.Fatalf("sessions placed %v, want them spread over n1 and n2", owners)
	}

	// An approval asked on n2, answered through n1.
	s := sessionOn(t, "ap", "n2", "n1", "n2")
	c := dialRun(t, w.run, "ap")
	c.send(sendReq("a1", "tool mark", "workspace", ws, "session", s))
	fs := c.until("approval_request", 20*time.Second)
	ar := fs[len(fs)-1]
	c.send(fmt.Sprintf(`{"op":"approve","run":%q,"id":%q,"decision":"allow_once"}`, ar.Run, ar.ID))
	fs = c.until("done", 20*time.Second)
	var result *frame
	for i := range fs {
		if fs[i].Type == "tool_result" {
			result = &fs[i]
		}
	}
	if result == nil || result.Status != "ok" || fs[len(fs)-1].Status != "ok" {
		t.Fatalf("the approved call through n1: %v\nn2:\n%s", fs, n2.log)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
		t.Fatalf("the tool did not run: %v", err)
	}
	st := readClusterStatus(t, n1.file)
	found := false
	for _, x := range st.Sessions {
		if x.Agent == "ap" && x.Session == s {
			found = x.Owner == "n2"
		}
	}
	if !found {
		t.Fatalf("session %s not owned by n2: %+v", s, st.Sessions)
	}
	// resume through n1: n2's history, seq from 1, then caught_up.
	c.send(fmt.Sprintf(`{"op":"resume","session":%q}`, s))
	fs = c.until("caught_up", 20*time.Second)
	var seq int64
	for _, f := range fs {
		if f.Seq == 0 {
			continue
		}
		if f.Seq != seq+1 {
			t.Fatalf("resume through n1: seq %d after %d: %v", f.Seq, seq, fs)
		}
		seq = f.Seq
	}
	if seq < 5 {
		t.Fatalf("resume through n1 streamed %d frames: %v", seq, fs)
	}

	// The front door's cost (reported, not asserted): a send's and a
	// resume's round trip to n2's session through n1 and at n2 itself,
	// interleaved.
	var viaFront, direct, rFront, rDirect []time.Duration
	for i := 0; i < 10; i++ {
		for k, run := range []string{w.run, run2} {
			t0 := time.Now()
			st := openStream(t, run, "ap", fmt.Sprintf(`{"op":"send","id":"rt-%d-%d","session":%q,"input":"echo x","workspace":%q}`, i, k, s, ws), fmt.Sprintf("rt-%d-%d", i, k))
			<-st.ended
			d := time.Since(t0)
			t0 = time.Now()
			if _, err := resumeAt(run, "ap", s, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			r := time.Since(t0)
			if k == 0 {
				viaFront, rFront = append(viaFront, d), append(rFront, r)
			} else {
				direct, rDirect = append(direct, d), append(rDirect, r)
			}
		}
	}
	med := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	t.Logf("front door: send round trip median %v via n1, %v at n2 (ratio %.2f); resume %v vs %v (ratio %.2f)",
		med(viaFront), med(direct), float64(med(viaFront))/float64(med(direct)), med(rFront), med(rDirect), float64(med(rFront))/float64(med(rDirect)))

	// Only a node certificate opens a link.
	pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "etcd-client.crt"), filepath.Join(tlsDir, "etcd-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(tlsDir, "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc, err := tls.Dial("tcp", n2.listen, &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	if err == nil {
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(tc, "{\"agent\":\"a\",\"scope\":\"private\",\"session\":\"x\",\"uid\":%d}\n{\"op\":\"resume\",\"session\":\"x\"}\n", os.Getuid())
		b := make([]byte, 1)
		_, err = tc.Read(b)
		tc.Close()
	}
	if err == nil {
		t.Fatal("a peer with the etcd client certificate was served by a node's front door")
	}
	// A node's link for another uid: refused, nothing served (a cluster
	// belongs to one user).
	pair3, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "n3.crt"), filepath.Join(tlsDir, "n3.key"))
	if err != nil {
		t.Fatal(err)
	}
	tc, err = tls.Dial("tcp", n2.listen, &tls.Config{Certificates: []tls.Certificate{pair3}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatalf("a node's link: %v", err)
	}
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(tc, "{\"agent\":\"a\",\"scope\":\"private\",\"session\":\"f1\",\"uid\":%d}\n{\"op\":\"resume\",\"session\":\"f1\"}\n", os.Getuid()+1)
	all, _ := io.ReadAll(tc)
	tc.Close()
	if !strings.Contains(string(all), `"code":"bad_request"`) || strings.Contains(string(all), `"seq"`) {
		t.Fatalf("a link for another uid got %q", all)
	}
}

// Three nodes started at once on a fresh shared root: each installs the
// helper binaries and the toolset there (temporary file and rename; the
// toolset under its directory's lock), every install is whole, and each
// node serves.
func TestClusterNodesStartTogether(t *testing.T) {
	w, tlsDir, etcd, ws := newCluster(t)
	base := filepath.Dir(w.run)
	runs := []string{w.run, filepath.Join(base, "run2"), filepath.Join(base, "run3")}
	nodes := make([]*clusterNode, 3)
	for i, name := range []string{"n1", "n2", "n3"} {
		nodes[i] = launchNode(t, w, runs[i], tlsDir, etcd, name, []string{ws})
	}
	for i, name := range []string{"n1", "n2", "n3"} {
		nodes[i].waitServing(t, runs[i], name)
	}
	w.agent("a", nil)
	for _, bin := range []string{"tsh", "ctxterm"} {
		want, _ := os.ReadFile(filepath.Join(binDir, bin))
		var got []byte
		waitFor(t, "bin/"+bin+" installed whole", 20*time.Second, func() bool {
			got, _ = os.ReadFile(filepath.Join(w.root, "bin", bin))
			return len(got) == len(want)
		})
		if string(got) != string(want) {
			t.Fatalf("bin/%s on the shared root differs from the build's", bin)
		}
	}
	left, _ := filepath.Glob(filepath.Join(w.root, "bin", ".*tmp*"))
	if len(left) > 0 {
		t.Errorf("temporary files left on the shared root: %v", left)
	}
	for i := range runs {
		cmd := exec.Command(w.ctxBin, "agent", "send", "a", "--session", fmt.Sprintf("t%d", i), "echo", "together")
		cmd.Env, cmd.Dir = w.env("CTX_RUNTIME_DIR="+runs[i]), ws
		if r := w.runCmd(cmd); r.code != 0 || r.stdout != "echo: together\n" {
			t.Fatalf("send through node %d: %d %q %q\n%s", i+1, r.code, r.stdout, r.stderr, nodes[i].log)
		}
	}
}
