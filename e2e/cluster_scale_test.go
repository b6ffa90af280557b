package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The cluster at the scale (`make test-cluster`, docs/cluster.md
// "Proof"): three nodes, a real etcd, one shared root; 300 sessions, 60
// slow runs in flight through the front doors when one node is killed
// with -9; then a node paused past its TTL; then a node restarted. It runs
// when CTX_TEST_CLUSTER=1 (make test-cluster; .ci/run runs it).

// stream is one client connection whose frames a goroutine collects.
type stream struct {
	c      net.Conn
	mu     sync.Mutex
	frames []frame
	ended  chan struct{} // the request's done came, or the connection ended
	at     time.Time     // when ended closed
	id     string
}

func openStream(t *testing.T, run, agent, line, id string) *stream {
	t.Helper()
	s := &stream{ended: make(chan struct{}), id: id}
	// Called from workers too: a failure is an answer without frames,
	// never t.Fatal off the test's goroutine.
	c, err := net.Dial("unix", filepath.Join(run, "agent", agent+".sock"))
	if err == nil {
		_, err = c.Write([]byte(line + "\n"))
	}
	if err != nil {
		t.Logf("stream %s via %s: %v", id, filepath.Base(run), err)
		if c != nil {
			c.Close()
		}
		close(s.ended)
		s.c = &net.UnixConn{}
		return s
	}
	s.c = c
	t.Cleanup(func() { c.Close() })
	go func() {
		defer func() { s.at = time.Now(); close(s.ended) }()
		br := bufio.NewReaderSize(c, 1<<20)
		for {
			b, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var f frame
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			f.raw = string(b)
			s.mu.Lock()
			s.frames = append(s.frames, f)
			s.mu.Unlock()
			if f.Type == "done" && f.ID == id || f.Type == "error" && f.Seq == 0 {
				return
			}
		}
	}()
	return s
}

func (s *stream) got() []frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]frame(nil), s.frames...)
}

// resumeAt reads a session's whole history through a node: the frames
// before caught_up.
func resumeAt(run, agent, session string, timeout time.Duration) ([]frame, error) {
	c, err := net.Dial("unix", filepath.Join(run, "agent", agent+".sock"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(c, "{\"op\":\"resume\",\"session\":%q}\n", session)
	br := bufio.NewReaderSize(c, 1<<20)
	var out []frame
	for {
		b, err := br.ReadBytes('\n')
		if err != nil {
			return out, err
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			return out, err
		}
		f.raw = string(b)
		switch {
		case f.Type == "caught_up":
			return out, nil
		case f.Type == "error" && f.Seq == 0:
			return out, fmt.Errorf("%s: %s", f.Code, f.Message)
		}
		out = append(out, f)
	}
}

// nodePID is the node under a ctx-cluster daemon's fence parent.
func nodePID(t *testing.T, n *clusterNode) int {
	t.Helper()
	kids := childrenOf(n.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("the fence parent %d has children %v", n.cmd.Process.Pid, kids)
	}
	return kids[0]
}

func ownersOf(st clusterStatus, agent string) map[string]string {
	m := map[string]string{}
	for _, s := range st.Sessions {
		if s.Agent == agent {
			m[s.Session] = s.Owner
		}
	}
	return m
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	p := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1))].Round(10 * time.Millisecond) }
	return fmt.Sprintf("n=%d min %v p50 %v p90 %v max %v", len(ds), p(0), p(0.5), p(0.9), p(1))
}

// parallel runs f(0..n-1) on k workers.
func parallel(n, k int, f func(i int)) {
	var wg sync.WaitGroup
	ch := make(chan int)
	for w := 0; w < k; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		ch <- i
	}
	close(ch)
	wg.Wait()
}

func TestClusterScale(t *testing.T) {
	if os.Getenv("CTX_TEST_CLUSTER") != "1" {
		t.Skip("the cluster at scale runs with make test-cluster (CTX_TEST_CLUSTER=1)")
	}
	const (
		sessions = 300
		inFlight = 60
	)
	w, tlsDir, etcd, ws := newCluster(t)
	base := filepath.Dir(w.run)
	runs := []string{w.run, filepath.Join(base, "run2"), filepath.Join(base, "run3")}
	names := []string{"n1", "n2", "n3"}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		nodes[i] = startNode(t, w, runs[i], tlsDir, etcd, names[i], []string{ws})
	}
	w.tool("mark", markTool)
	w.agent("slow", map[string]string{"tools": "mark\n", "approval": "auto\n"})
	waitFor(t, "three live nodes", 20*time.Second, func() bool { return len(readClusterStatus(t, nodes[0].file).Nodes) == 3 })
	for _, run := range runs {
		waitFor(t, "the agent's socket on every node", 20*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(run, "agent", "slow.sock"))
			return err == nil
		})
	}
	sess := func(i int) string { return fmt.Sprintf("s%03d", i) }
	// Each session begins in its own checkout under the shared prefix;
	// the 60 slow runs share one workspace across the nodes (each node
	// shares the placeholders it binds there: the last node to leave,
	// idle for the linger, removes them).
	root := ws
	for i := 0; i < sessions+30; i++ {
		if err := os.Mkdir(filepath.Join(root, sess(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wsOf := func(i int) string { return filepath.Join(root, sess(i)) }

	t.Logf("phase: begin 300 sessions %v", time.Now().Format("15:04:05.000"))
	// 300 sessions, each begun through a node round robin.
	start := time.Now()
	var fails []string
	var fmu sync.Mutex
	parallel(sessions, 12, func(i int) {
		s := openStream(t, runs[i%3], "slow", fmt.Sprintf(`{"op":"send","id":"init-%d","session":%q,"input":"echo %d","workspace":%q}`, i, sess(i), i, wsOf(i)), fmt.Sprintf("init-%d", i))
		select {
		case <-s.ended:
		case <-time.After(60 * time.Second):
		}
		fs := s.got()
		if len(fs) == 0 || fs[len(fs)-1].Type != "done" || fs[len(fs)-1].Status != "ok" {
			fmu.Lock()
			fails = append(fails, fmt.Sprintf("%s: %v", sess(i), types(fs)))
			fmu.Unlock()
		}
		s.c.Close()
	})
	if len(fails) > 0 {
		dumpCluster(t, w, nodes, "slow", strings.SplitN(fails[0], ":", 2)[0])
		t.Fatalf("%d of %d sessions failed to begin: %v", len(fails), sessions, fails[:min(5, len(fails))])
	}
	t.Logf("300 sessions begun through the front doors in %v", time.Since(start).Round(time.Millisecond))
	placed := ownersOf(readClusterStatus(t, nodes[0].file), "slow")
	count := map[string]int{}
	for _, o := range placed {
		count[o]++
	}
	t.Logf("placement: %v of %d owner keys (idle sessions may have passivated)", count, len(placed))

	t.Logf("phase: 60 runs %v", time.Now().Format("15:04:05.000"))
	// 60 slow runs in flight, their clients on n2 and n3 (front doors);
	// then n1 is killed with -9.
	flights := make([]*stream, inFlight)
	for i := range flights {
		id := fmt.Sprintf("slow-%d", i)
		flights[i] = openStream(t, runs[1+i%2], "slow", fmt.Sprintf(`{"op":"send","id":%q,"session":%q,"input":"slow 12 mark","workspace":%q}`, id, sess(i), ws), id)
	}
	waitFor(t, "60 runs under way", 60*time.Second, func() bool {
		for _, s := range flights {
			fs := s.got()
			if len(fs) < 3 {
				return false
			}
		}
		return true
	})
	before := readClusterStatus(t, nodes[1].file)
	owner := ownersOf(before, "slow")
	epochs := map[string]int64{}
	for _, s := range before.Sessions {
		epochs[s.Session] = s.Epoch
	}
	var lostSessions []int
	for i := 0; i < inFlight; i++ {
		if owner[sess(i)] == "n1" {
			lostSessions = append(lostSessions, i)
		}
	}
	if len(lostSessions) == 0 {
		t.Fatalf("no run in flight on n1: %v", owner)
	}
	t.Logf("phase: kill -9 n1 %v", time.Now().Format("15:04:05.000"))
	killed := time.Now()
	nodes[0].cmd.Process.Kill()
	<-nodes[0].done

	// Every interrupted run is concluded exactly once, by the new owner,
	// within 15 s; its client (on a front door) sees that conclusion.
	concluded := make([]time.Duration, 0, len(lostSessions))
	for _, i := range lostSessions {
		s := flights[i]
		select {
		case <-s.ended:
		case <-time.After(time.Until(killed.Add(15 * time.Second))):
			t.Fatalf("the run of %s (on n1) was not concluded within 15 s: %v\nn2:\n%s", sess(i), types(s.got()), tail(nodes[1].log.String()))
		}
		concluded = append(concluded, s.at.Sub(killed))
		fs := s.got()
		last := fs[len(fs)-1]
		if last.Type != "done" || last.Status != "error" {
			t.Fatalf("%s's client through a front door: %v", sess(i), types(fs))
		}
		n := 0
		for _, f := range fs {
			if f.Type == "error" && f.Code == "interrupted" {
				n++
				if !strings.Contains(f.Message, "n1") {
					t.Errorf("%s: the conclusion does not name n1: %s", sess(i), f.Message)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d interrupted conclusions: %v", sess(i), n, types(fs))
		}
	}
	t.Logf("failover: %d runs on n1 concluded after the kill: %s", len(lostSessions), percentiles(concluded))
	// The runs elsewhere go on to their own end.
	for i, s := range flights {
		select {
		case <-s.ended:
		case <-time.After(60 * time.Second):
			t.Fatalf("the run of %s never ended: %v", sess(i), types(s.got()))
		}
		if owner[sess(i)] != "n1" {
			if fs := s.got(); fs[len(fs)-1].Type != "done" || fs[len(fs)-1].Status != "ok" {
				t.Errorf("%s (on %s) ended %v", sess(i), owner[sess(i)], types(fs))
			}
		}
	}

	t.Logf("phase: resumes %v", time.Now().Format("15:04:05.000"))
	// All 300 sessions resumable from both survivors within 20 s of the
	// kill; seq contiguous across segments; every frame a client got is
	// in the log as it got it (0 committed frames lost).
	var mu sync.Mutex
	hist := map[string][]frame{}
	var bad []string
	parallel(sessions*2, 16, func(k int) {
		i, run := k/2, runs[1+k%2]
		fs, err := resumeAt(run, "slow", sess(i), 20*time.Second)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s via %s: %v", sess(i), filepath.Base(run), err))
			return
		}
		for j, f := range fs {
			if f.Seq != int64(j+1) {
				bad = append(bad, fmt.Sprintf("%s: seq %d at %d", sess(i), f.Seq, j))
				return
			}
		}
		hist[sess(i)] = fs
	})
	resumed := time.Since(killed)
	if len(bad) > 0 {
		t.Fatalf("%d resumes failed: %v", len(bad), bad[:min(5, len(bad))])
	}
	if resumed > 20*time.Second {
		t.Errorf("resuming 300 sessions from both survivors ended %v after the kill, want 20 s", resumed)
	}
	t.Logf("600 resumes (300 sessions from each survivor) done %v after the kill", resumed.Round(time.Millisecond))
	for i, s := range flights {
		log := hist[sess(i)]
		for _, f := range s.got() {
			if f.Seq == 0 {
				continue
			}
			if f.Seq > int64(len(log)) || log[f.Seq-1].Type != f.Type || log[f.Seq-1].Run != f.Run || log[f.Seq-1].Text != f.Text {
				t.Fatalf("%s: a frame its client got is not in the log: %s", sess(i), f.raw)
			}
		}
		dones := 0
		for _, f := range log {
			if f.Type == "done" && f.ID == s.id {
				dones++
			}
		}
		if dones != 1 {
			t.Fatalf("%s: %d done frames for %s", sess(i), dones, s.id)
		}
	}
	// Epochs only grow; one owner key per session (etcd's keys are per
	// session; status lists each once).
	after := readClusterStatus(t, nodes[1].file)
	seen := map[string]bool{}
	for _, s := range after.Sessions {
		if seen[s.Agent+"/"+s.Session] {
			t.Errorf("two owner keys for %s", s.Session)
		}
		seen[s.Agent+"/"+s.Session] = true
		if s.Owner == "n1" {
			t.Errorf("%s still owned by the lost node", s.Session)
		}
		if e, ok := epochs[s.Session]; ok && s.Epoch < e {
			t.Errorf("%s: epoch %d after %d", s.Session, s.Epoch, e)
		}
	}

	t.Logf("phase: resent ids %v", time.Now().Format("15:04:05.000"))
	// 10 % of the request ids sent again, through any survivor: each
	// replays, nothing runs twice.
	parallel(sessions/10, 10, func(k int) {
		i := k * 10
		id := fmt.Sprintf("init-%d", i)
		line := fmt.Sprintf(`{"op":"send","id":%q,"session":%q,"input":"echo %d","workspace":%q}`, id, sess(i), i, wsOf(i))
		if i < inFlight && k%2 == 0 {
			id = fmt.Sprintf("slow-%d", i)
			line = fmt.Sprintf(`{"op":"send","id":%q,"session":%q,"input":"slow 12 mark","workspace":%q}`, id, sess(i), ws)
		}
		s := openStream(t, runs[1+k%2], "slow", line, id)
		select {
		case <-s.ended:
		case <-time.After(20 * time.Second):
		}
		fs := s.got()
		mu.Lock()
		defer mu.Unlock()
		if len(fs) == 0 || fs[len(fs)-1].Type != "done" {
			bad = append(bad, fmt.Sprintf("resent %s: %v", id, types(fs)))
			return
		}
		for _, f := range fs {
			if f.Seq > 0 && !f.Replay {
				bad = append(bad, fmt.Sprintf("resent %s ran again: %s", id, f.raw))
				return
			}
		}
	})
	if len(bad) > 0 {
		t.Fatalf("resent ids: %v", bad[:min(5, len(bad))])
	}

	t.Logf("phase: restart n1 %v", time.Now().Format("15:04:05.000"))
	// n1 restarted: a new member, which takes new sessions.
	nodes[0] = startNode(t, w, runs[0], tlsDir, etcd, "n1", []string{ws})
	waitFor(t, "n1 back in the live set", 30*time.Second, func() bool { return len(readClusterStatus(t, nodes[1].file).Nodes) == 3 })
	parallel(30, 10, func(k int) {
		i := sessions + k
		s := openStream(t, runs[1+k%2], "slow", fmt.Sprintf(`{"op":"send","id":"new-%d","session":%q,"input":"echo new","workspace":%q}`, i, sess(i), wsOf(i)), fmt.Sprintf("new-%d", i))
		<-s.ended
	})
	if n := count3(ownersOf(readClusterStatus(t, nodes[1].file), "slow"), "n1"); n == 0 {
		t.Errorf("the restarted n1 took none of 30 new sessions")
	}
	// Their runs are over, and their workspaces' placeholders linger
	// (CTX_CLUSTER_PLACEHOLDER_LINGER, 30 s) on the nodes that ran them;
	// those on n1 and n3, which live on, must be gone by the end.
	shared := append(append([]string{".git/"}, absentDirNames...), absentFileNames...)
	var lingering []string
	for k, o := range ownersOf(readClusterStatus(t, nodes[1].file), "slow") {
		if i, err := strconv.Atoi(strings.TrimPrefix(k, "s")); err == nil && i >= sessions && (o == "n1" || o == "n3") {
			if got := placeholdersIn(wsOf(i), shared); len(got) != len(shared) {
				t.Errorf("%s on %s, just after its run: only %v of its placeholders linger", k, o, got)
			}
			lingering = append(lingering, wsOf(i))
		}
	}
	if len(lingering) == 0 {
		t.Errorf("none of the 30 new sessions is on n1 or n3")
	}

	t.Logf("phase: SIGSTOP n2 %v", time.Now().Format("15:04:05.000"))
	// n2 paused past its TTL with runs in flight: its fence kills it and
	// its sandboxes within 1 s of its deadline; nothing it wrote past the
	// seal is ever read; its runs are concluded by the others.
	st := ownersOf(readClusterStatus(t, nodes[1].file), "slow")
	var onN2 []*stream
	var onN2s []string
	for i := inFlight; i < sessions && len(onN2) < 6; i++ {
		if o, held := st[sess(i)]; o == "n2" || !held && pickedBy("slow", sess(i), "n1", "n2", "n3") == "n2" {
			id := fmt.Sprintf("stop-%d", i)
			onN2 = append(onN2, openStream(t, runs[2], "slow", fmt.Sprintf(`{"op":"send","id":%q,"session":%q,"input":"slow 30 mark","workspace":%q}`, id, sess(i), wsOf(i)), id))
			onN2s = append(onN2s, sess(i))
		}
	}
	if len(onN2) == 0 {
		t.Fatalf("no idle session owned by n2 to run on: %v", st)
	}
	waitFor(t, "the runs on n2 under way", 30*time.Second, func() bool {
		for _, s := range onN2 {
			if len(s.got()) < 3 {
				return false
			}
		}
		return true
	})
	pid := nodePID(t, nodes[1])
	kids := allDescendants(pid)
	if len(kids) == 0 {
		t.Fatal("n2 runs no sandbox")
	}
	stopped := time.Now()
	syscall.Kill(pid, syscall.SIGSTOP)
	// The deadline is at most TTL (5 s) after the stop.
	select {
	case <-nodes[1].done:
	case <-time.After(10 * time.Second):
		syscall.Kill(pid, syscall.SIGCONT)
		t.Fatalf("the paused n2 was not ended by its fence")
	}
	fenced := time.Since(stopped)
	if fenced > 5*time.Second+time.Second {
		t.Errorf("n2 ended %v after its pause, past its deadline + 1 s", fenced)
	}
	waitFor(t, "n2's sandboxes gone", time.Second, func() bool {
		for _, k := range kids {
			if syscall.Kill(k, 0) == nil {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k)); !strings.Contains(string(b), ") Z") {
					return false
				}
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // the pause lasts 2× TTL in all
	syscall.Kill(pid, syscall.SIGCONT)
	if code := nodes[1].cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("the fenced node exited 0")
	}
	for k, s := range onN2 {
		select {
		case <-s.ended:
		case <-time.After(30 * time.Second):
			t.Fatalf("the run on paused n2 (%s) was not concluded: %v", onN2s[k], types(s.got()))
		}
		fs := s.got()
		if fs[len(fs)-1].Type != "done" {
			t.Fatalf("%s: %v", onN2s[k], types(fs))
		}
		log, err := resumeAt(runs[2], "slow", onN2s[k], 20*time.Second)
		if err != nil {
			t.Fatalf("resume %s: %v", onN2s[k], err)
		}
		for _, f := range fs {
			if f.Seq > 0 && (f.Seq > int64(len(log)) || log[f.Seq-1].raw != strings.Replace(f.raw, `,"replay":true`, "", 1) && log[f.Seq-1].Type != f.Type) {
				t.Fatalf("%s: a frame its client got is not in the log: %s", onN2s[k], f.raw)
			}
		}
		for j, f := range log {
			if f.Seq != int64(j+1) {
				t.Fatalf("%s: seq %d at %d", onN2s[k], f.Seq, j)
			}
		}
	}
	t.Logf("SIGSTOP: n2 fenced %v after the pause", fenced.Round(10*time.Millisecond))

	// The new sessions' workspaces on the nodes that live on: idle past
	// the linger, their placeholders are removed (each node was the last
	// to leave its own; a dead node's stay until a run there adopts them,
	// as after a daemon's crash).
	waitFor(t, "the lingering placeholders removed", 45*time.Second, func() bool {
		for _, d := range lingering {
			if len(placeholdersIn(d, shared)) > 0 {
				return false
			}
		}
		return true
	})
	t.Logf("placeholders of %d workspaces removed after the linger", len(lingering))
}

func count3(m map[string]string, node string) int {
	n := 0
	for _, o := range m {
		if o == node {
			n++
		}
	}
	return n
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// dumpCluster logs the nodes' logs and one session's segments.
func dumpCluster(t *testing.T, w *world, nodes []*clusterNode, agent, session string) {
	for i, n := range nodes {
		t.Logf("node %d log:\n%s", i+1, tail(n.log.String()))
	}
	segs, _ := filepath.Glob(filepath.Join(w.sessionDir(agent, session), "segments", "*"))
	for _, f := range segs {
		b, _ := os.ReadFile(f)
		t.Logf("%s:\n%s", f, b)
	}
}

// allDescendants lists every process under pid (childrenOf reads each
// process's stat: a Go process forks from any thread, and a thread's
// children file lists only its own).
func allDescendants(pid int) []int {
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		kids := childrenOf(queue[0])
		out = append(out, kids...)
		queue = append(queue, kids...)
	}
	return out
}
