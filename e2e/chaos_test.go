package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chaosKills is the number of kills: CTX_CHAOS_KILLS (make chaos: 1000),
// else a short form for every `go test` (about a minute on 2 cores).
func chaosKills(t *testing.T) int {
	if v := os.Getenv("CTX_CHAOS_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CTX_CHAOS_KILLS=%q", v)
		}
		return n
	}
	if testing.Short() {
		return 8
	}
	return 12
}

// ack is a frame the daemon sent a client: committed, so it must stay in
// the session's log.
type ack struct {
	session string
	seq     int64
	raw     string
}

type chaos struct {
	t        *testing.T
	w        *world
	faults   string
	mu       sync.Mutex
	acks     []ack
	runs     map[string]bool // run ids seen by clients
	sessions map[string]bool
	viol     []string
	frames   int
}

func (c *chaos) violation(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.viol = append(c.viol, fmt.Sprintf(format, args...))
}

// work sends one request on its own connection and reads until its done,
// an error, EOF or the timeout, recording every committed frame.
func (c *chaos) work(session, id string, req map[string]any) {
	p := filepath.Join(c.w.run, "agent", "c.sock")
	conn, err := net.Dial("unix", p)
	if err != nil {
		return // the daemon is down: nothing was acknowledged
	}
	defer conn.Close()
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return
	}
	c.mu.Lock()
	c.sessions[session] = true
	c.mu.Unlock()
	r := bufio.NewReaderSize(conn, 1<<20)
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var f frame
		if json.Unmarshal(line, &f) != nil {
			c.violation("session %s: a frame that is not JSON: %q", session, line)
			return
		}
		if f.Seq > 0 && !f.Replay {
			c.mu.Lock()
			c.acks = append(c.acks, ack{session, f.Seq, string(bytes.TrimSpace(line))})
			if f.Run != "" {
				c.runs[f.Run] = true
			}
			c.mu.Unlock()
		}
		if f.Type == "done" && f.ID == id || f.Type == "caught_up" && f.ActiveRun == nil || f.Type == "error" && f.Seq == 0 {
			return
		}
	}
}

// check reads every session log and holds the invariants; it waits (up
// to a few seconds) for runs that a restart is still concluding.
func (c *chaos) check(final bool) {
	c.t.Helper()
	var last []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		last = c.checkOnce()
		if len(last) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, v := range last {
		c.violation("%s", v)
	}
	// No process of a concluded run is alive.
	waitUntil(5*time.Second, func() bool { return len(procsWith(binDir+"/testagent")) == 0 })
	if ps := procsWith(binDir + "/testagent"); len(ps) > 0 {
		c.violation("agent processes alive after every run concluded: %v", ps)
	}
	// Every socket answers.
	if !pingOnce(c.w.run + "/system.sock") {
		c.violation("the system socket does not answer ping")
	}
	// An agent actor restarted by the last kill may still be binding.
	agentSock := filepath.Join(c.w.run, "agent", "c.sock")
	waitUntil(3*time.Second, func() bool { return pingOnce(agentSock) })
	if !pingOnce(agentSock) {
		c.violation("the agent socket does not answer ping")
	}
}

func waitUntil(d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *chaos) checkOnce() []string {
	var out []string
	c.mu.Lock()
	sessions := make([]string, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	acks := append([]ack(nil), c.acks...)
	c.mu.Unlock()
	logs := map[string]map[int64]string{}
	frames := 0
	for _, s := range sessions {
		b, err := os.ReadFile(filepath.Join(c.w.sessionDir("c", s), "events.jsonl"))
		if err != nil {
			if !os.IsNotExist(err) {
				out = append(out, fmt.Sprintf("session %s: %v", s, err))
			}
			continue
		}
		bySeq := map[int64]string{}
		logs[s] = bySeq
		var prev int64
		dones := map[string]int{}
		started := map[string]bool{}
		for i, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var f frame
			if err := json.Unmarshal(l, &f); err != nil {
				out = append(out, fmt.Sprintf("session %s line %d: not JSON: %.200q", s, i+1, l))
				continue
			}
			frames++
			if f.Seq <= prev {
				out = append(out, fmt.Sprintf("session %s line %d: seq %d after %d", s, i+1, f.Seq, prev))
			}
			prev = f.Seq
			bySeq[f.Seq] = string(l)
			if f.Run != "" {
				started[f.Run] = true
			}
			if f.Type == "done" {
				dones[f.Run]++
			}
		}
		for r := range started {
			if dones[r] != 1 {
				out = append(out, fmt.Sprintf("session %s: run %s has %d done frames", s, r, dones[r]))
			}
		}
	}
	for _, a := range acks {
		got, ok := logs[a.session][a.seq]
		if !ok || got != a.raw {
			out = append(out, fmt.Sprintf("session %s: acknowledged frame seq %d lost (log has %.200q)", a.session, a.seq, got))
		}
	}
	c.mu.Lock()
	c.frames = frames
	c.mu.Unlock()
	return out
}

func daemonFDs(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents)
}

// TestChaos kills, at random and while sends, tool calls and resumes are
// in flight, the daemon (SIGKILL), a run, session or agent actor (armed
// fault points of the ctxfault build) and an agent's process tree; after
// each kill it restarts what must restart and holds the invariants:
// every events.jsonl line valid, seq strictly increasing, every run
// concluded by exactly one done, every acknowledged frame still in the
// log, no agent process of a concluded run alive, the daemon's
// descriptors back to their level, every socket answering.
// `make chaos` runs 1,000 kills (CTX_CHAOS_KILLS). spec: issue 15 (item 5)
func TestChaos(t *testing.T) {
	w := newWorld(t)
	w.ctxBin = binDir + "/fault/ctx"
	faults := filepath.Join(filepath.Dir(w.root), "faults")
	if err := os.MkdirAll(faults, 0o755); err != nil {
		t.Fatal(err)
	}
	w.agent("c", nil)
	env := []string{"CTX_FAULT_DIR=" + faults, "CTX_CANCEL_GRACE=300ms", "CTX_SESSION_IDLE=300ms"}
	w.start(env...)
	c := &chaos{t: t, w: w, faults: faults, runs: map[string]bool{}, sessions: map[string]bool{}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 15))
	inputs := []string{"echo hi", "calls 2", "sleep 1", "spew 20", "echo there"}
	kinds := []string{"daemon", "run.start", "session.request", "agent.incoming", "agent-tree"}
	counts := map[string]int{}
	baseFDs, basePID := -1, 0
	n := chaosKills(t)
	reqs := 0
	start := time.Now()
	for k := 0; k < n; k++ {
		kind := kinds[rng.IntN(len(kinds))]
		if strings.Contains(kind, ".") {
			// Armed once: the next hit of that point panics its actor.
			os.WriteFile(filepath.Join(faults, kind), nil, 0o600)
		}
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			s := "s" + strconv.Itoa(rng.IntN(6))
			id := fmt.Sprintf("k%d-%d", k, i)
			req := map[string]any{"op": "send", "id": id, "session": s, "input": inputs[rng.IntN(len(inputs))]}
			if rng.IntN(4) == 0 {
				req = map[string]any{"op": "resume", "session": s}
			}
			reqs++
			wg.Add(1)
			go func() { defer wg.Done(); c.work(s, id, req) }()
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		switch kind {
		case "daemon":
			w.kill()
			w.start(env...)
		case "agent-tree":
			for _, pid := range procsWith(binDir + "/testagent") {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		wg.Wait()
		os.Remove(filepath.Join(faults, kind)) // not hit this round: disarm
		counts[kind]++
		c.check(k == n-1)
		// The daemon's descriptors return to their level once sessions
		// are idle (passivated): nothing leaks across kills.
		pid := w.daemon.Process.Pid
		if pid != basePID {
			waitUntil(3*time.Second, func() bool { return daemonFDs(pid) <= 40 })
			baseFDs, basePID = daemonFDs(pid), pid
		} else {
			// A leak never comes back; a session still finishing a cancelled
			// run or waiting out CTX_SESSION_IDLE does (the long form saw 6
			// descriptors held past 3 s five times in 300 kills, each
			// released by the next kill).
			waitUntil(10*time.Second, func() bool { return daemonFDs(pid) <= baseFDs+4 })
			if fds := daemonFDs(pid); fds > baseFDs+4 {
				c.violation("after kill %d (%s): the daemon holds %d descriptors, %d after its start", k, kind, fds, baseFDs)
			}
		}
		if len(c.viol) > 20 {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("chaos: %d kills %v in %v; %d requests, %d runs, %d acknowledged frames checked, %d log frames; %d violations",
		n, counts, time.Since(start).Round(time.Second), reqs, len(c.runs), len(c.acks), c.frames, len(c.viol))
	for _, v := range c.viol {
		t.Error(v)
	}
}
