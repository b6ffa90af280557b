package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/workspace"
)

// TestBenchScale is the scale benchmark (`make bench-scale`):
// CTX_BENCH_SCALE_N sessions (default 10,000) are created with one trivial
// send each over the socket by concurrent clients, then left idle
// (CTX_SESSION_IDLE=1s). It reports the daemon's RSS and open descriptors
// after passivation — at 1/10 of the count and at the full count, so that
// descriptors can be seen not to depend on it — the time from a resume
// request to caught_up for a passivated session against a live one, and
// sends per second to 100 concurrent sessions against the same agent started
// the same way by the minimal launcher of BenchmarkSendVsDirect, in the same
// run. It asserts RSS < 100 MiB and descriptors independent of the count;
// the ratios are reported, not asserted. Gated by CTX_BENCH_SCALE=1.
func TestBenchScale(t *testing.T) {
	if os.Getenv("CTX_BENCH_SCALE") == "" {
		t.Skip("the scale benchmark: CTX_BENCH_SCALE=1 (make bench-scale)")
	}
	n := 10000
	if s := os.Getenv("CTX_BENCH_SCALE_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 10 {
			t.Fatalf("CTX_BENCH_SCALE_N=%q: want a count ≥ 10", s)
		}
		n = v
	}
	clients := 16
	w := newWorld(t)
	w.start("CTX_SESSION_IDLE=1s", "GODEBUG=gctrace=1") // gctrace: live heap vs RSS
	w.agent("scale", nil)
	pid := w.daemon.Process.Pid
	c := w.dial("scale")
	c.send(map[string]any{"op": "ping"})
	c.must(5 * time.Second)
	t.Logf("idle daemon (pid %d): RSS %.1f MiB, %d descriptors", pid, rssMiB(pid), w.openFDs())

	// settle waits until the daemon's descriptors stop falling (the
	// sessions passivated), then reads RSS and descriptors.
	settle := func() (float64, int) {
		prev, same := -1, 0
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && same < 6; {
			time.Sleep(500 * time.Millisecond)
			if f := w.openFDs(); f == prev {
				same++
			} else {
				prev, same = f, 0
			}
		}
		return rssMiB(pid), w.openFDs()
	}

	created := 0
	create := func(upto int) {
		t0 := time.Now()
		var next atomic.Int64
		next.Store(int64(created))
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		for k := 0; k < clients; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc, err := rawDial(w, "scale")
				if err != nil {
					errs <- err
					return
				}
				defer rc.Close()
				for {
					i := int(next.Add(1) - 1)
					if i >= upto {
						return
					}
					s := "s" + strconv.Itoa(i)
					if err := rc.roundTrip(sendReq("r"+s, "echo hi", "session", s), "done"); err != nil {
						errs <- fmt.Errorf("session %s: %w", s, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		el := time.Since(t0)
		t.Logf("created sessions %d..%d in %v (%.0f sessions/s, %d clients)", created, upto-1, el.Round(time.Millisecond), float64(upto-created)/el.Seconds(), clients)
		created = upto
	}

	create(n / 10)
	rss1, fds1 := settle()
	t.Logf("after %d sessions, idle: RSS %.1f MiB, %d descriptors", n/10, rss1, fds1)
	create(n)
	rssN, fdsN := settle()
	t.Logf("after %d sessions, idle: RSS %.1f MiB, %d descriptors", n, rssN, fdsN)
	// The Go runtime gives freed memory back to the kernel gradually:
	// watch RSS for 30 s more, and judge the value it settles at.
	var series []string
	for i := 0; i < 6; i++ {
		time.Sleep(5 * time.Second)
		series = append(series, strconv.FormatFloat(rssMiB(pid), 'f', 1, 64))
	}
	rssEarly := rssN
	rssN = rssMiB(pid)
	t.Logf("RSS every 5 s after that: %s MiB", strings.Join(series, ", "))
	if gcs := gcLines(w.log.String()); len(gcs) > 0 {
		t.Logf("the daemon's last GC (%d so far): %s", len(gcs), gcs[len(gcs)-1])
	}
	if rssN >= 100 {
		t.Errorf("RSS %.1f MiB with %d idle sessions: want < 100 MiB", rssN, n)
	}
	if fdsN > fds1+4 {
		t.Errorf("descriptors grow with the session count: %d after %d sessions, %d after %d", fds1, n/10, fdsN, n)
	}

	// Resume: a passivated session (created long ago) vs a live one (sent
	// to just before; still within the idle period). Interleaved.
	const resumes = 20
	var passive, live []time.Duration
	for i := 0; i < resumes; i++ {
		s := "s" + strconv.Itoa(i*(n/resumes))
		t0 := time.Now()
		c.send(map[string]any{"op": "resume", "session": s})
		got := c.until("caught_up", 10*time.Second)
		passive = append(passive, time.Since(t0))
		if len(got) < 2 || got[0].Type != "user" {
			t.Fatalf("resume of passivated %s: %v", s, types(got))
		}
		ls := "live" + strconv.Itoa(i)
		c.send(sendReq("l"+ls, "echo hi", "session", ls))
		c.until("done", 10*time.Second)
		t0 = time.Now()
		c.send(map[string]any{"op": "resume", "session": ls})
		got = c.until("caught_up", 10*time.Second)
		live = append(live, time.Since(t0))
		if len(got) < 2 {
			t.Fatalf("resume of live %s: %v", ls, types(got))
		}
	}
	pm, lm := median(passive), median(live)
	t.Logf("resume → caught_up (median of %d): passivated %v, live %v, ratio %.2f×", resumes, pm, lm, float64(pm)/float64(lm))

	// Throughput: 100 concurrent sessions, `per` sends each, over the
	// socket; then the minimal launcher, 100 concurrent, the same count.
	const conc, per = 100, 5
	l := layout.Layout{Root: w.root, Runtime: w.run, UID: os.Getuid()}
	def, err := agentdef.Load(l, "scale")
	if err != nil {
		t.Fatal(err)
	}
	roots, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	ws := w.workspace()
	// The launcher's view is the runtime's (View.Build), placeholders of
	// the absent protected names included (BenchmarkSendVsDirect).
	placeholders := workspace.NewRegistry()
	direct := func(g, i int) error {
		run := fmt.Sprintf("run-direct-%d-%d", g, i)
		v := sandbox.View{Layout: l, Def: def, Session: "direct" + strconv.Itoa(g), Run: run, Workspace: ws, Placeholders: placeholders}
		stdin, _ := envelope.Encode(&envelope.Envelope{Schema: envelope.Schema, Run: run, Input: "echo hi", HistoryMessages: "[]"})
		spec, held, err := v.Build([]string{v.AgentPath()}, v.AgentEnv(0))
		if err != nil {
			return err
		}
		defer held.Ended()
		p, err := proc.Start(proc.Options{Bwrap: "/usr/bin/bwrap", Spec: spec, Stdin: stdin, Roots: roots, Ident: v.Identity()})
		held.Started()
		if err != nil {
			return err
		}
		io.Copy(io.Discard, p.Stdout)
		return p.Wait()
	}
	socket := func(rc *rawClient, g, i int) error {
		s := "t" + strconv.Itoa(g)
		return rc.roundTrip(sendReq(fmt.Sprintf("t%d-%d", g, i), "echo hi", "session", s, "workspace", ws), "done")
	}
	burst := func(name string, f func(g int) error) float64 {
		t0 := time.Now()
		errs := make(chan error, conc)
		var wg sync.WaitGroup
		for g := 0; g < conc; g++ {
			wg.Add(1)
			go func(g int) { defer wg.Done(); errs <- f(g) }(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				ents, _ := os.ReadDir(ws)
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("%s: %v (the workspace holds %v)", name, err, names)
			}
		}
		return float64(conc*per) / time.Since(t0).Seconds()
	}
	var sockRate, dirRate []float64
	var sockSelf, sockKids, dirSelf, dirKids time.Duration
	var sockAll, dirAll time.Duration // the machine's busy time (/proc/stat)
	for round := 0; round < 3; round++ {
		s0, k0 := rusage()
		m0 := machineBusy()
		t.Logf("round %d", round)
		dirRate = append(dirRate, burst("direct", func(g int) error {
			for i := 0; i < per; i++ {
				if err := direct(g, round*per+i); err != nil {
					return err
				}
			}
			return nil
		}))
		s1, k1 := rusage()
		m1 := machineBusy()
		dirSelf, dirKids, dirAll = dirSelf+s1-s0, dirKids+k1-k0, dirAll+m1-m0
		ds0, dk0 := procCPU(pid)
		sockRate = append(sockRate, burst("socket", func(g int) error {
			rc, err := rawDial(w, "scale")
			if err != nil {
				return err
			}
			defer rc.Close()
			for i := 0; i < per; i++ {
				if err := socket(rc, g, round*per+i); err != nil {
					return err
				}
			}
			return nil
		}))
		ds1, dk1 := procCPU(pid)
		sockSelf, sockKids, sockAll = sockSelf+ds1-ds0, sockKids+dk1-dk0, sockAll+machineBusy()-m1
	}
	per3 := time.Duration(3 * conc * per)
	t.Logf("CPU per send: runtime daemon %v + its children %v; launcher (the test process) %v + children %v",
		(sockSelf / per3).Round(10*time.Microsecond), (sockKids / per3).Round(10*time.Microsecond),
		(dirSelf / per3).Round(10*time.Microsecond), (dirKids / per3).Round(10*time.Microsecond))
	// The rusage above misses most of bwrap's kernel work (its mounts
	// under the global mount lock); the machine's busy time over each
	// burst counts everything (docs/performance.md).
	t.Logf("machine CPU per send (every process and the kernel): runtime %v, launcher %v, %.2f×",
		(sockAll / per3).Round(10*time.Microsecond), (dirAll / per3).Round(10*time.Microsecond), float64(sockAll)/float64(dirAll))
	sr, dr := medianF(sockRate), medianF(dirRate)
	t.Logf("sends/s, %d concurrent sessions × %d (median of 3 rounds): runtime %.0f, minimal launcher %.0f, ratio %.2f× (runtime/launcher) — rounds %v vs %v",
		conc, per, sr, dr, sr/dr, fmtRates(sockRate), fmtRates(dirRate))
	fmt.Printf("bench-scale: sessions=%d rss_1=%.1fMiB fds_1=%d rss_n_settled=%.1fMiB rss_n=%.1fMiB fds_n=%d resume_passivated=%v resume_live=%v resume_ratio=%.2f sends_per_s=%.0f launcher_per_s=%.0f send_ratio=%.2f\n",
		n, rss1, fds1, rssEarly, rssN, fdsN, pm, lm, float64(pm)/float64(lm), sr, dr, sr/dr)
}

// rssMiB reads VmRSS of pid in MiB.
func rssMiB(pid int) float64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.Atoi(f[1])
				return float64(kb) / 1024
			}
		}
	}
	return -1
}

func medianF(d []float64) float64 {
	s := append([]float64(nil), d...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func fmtRates(r []float64) string {
	var out []string
	for _, v := range r {
		out = append(out, strconv.FormatFloat(v, 'f', 0, 64))
	}
	return strings.Join(out, "/")
}

// rawClient is a socket client safe to use from any goroutine: it returns
// errors instead of failing the test.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
}

func rawDial(w *world, agent string) (*rawClient, error) {
	c, err := net.Dial("unix", filepath.Join(w.run, "agent", agent+".sock"))
	if err != nil {
		return nil, err
	}
	return &rawClient{c: c, r: bufio.NewReaderSize(c, 1<<16)}, nil
}

func (rc *rawClient) Close() error { return rc.c.Close() }

// roundTrip sends req and reads frames until one of type typ; an error
// frame (or a done that is not ok) is an error.
func (rc *rawClient) roundTrip(req any, typ string) error {
	b, _ := json.Marshal(req)
	if _, err := rc.c.Write(append(b, '\n')); err != nil {
		return err
	}
	rc.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var runErr []byte // the run's error frame, said with a done that is not ok
	for {
		line, err := rc.r.ReadBytes('\n')
		if err != nil {
			return err
		}
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("bad frame %q", line)
		}
		if f.Type == "error" && f.Seq == 0 {
			return fmt.Errorf("%s", line)
		}
		if f.Type == "error" {
			runErr = line
		}
		if f.Type == typ {
			if typ == "done" && f.Status != "ok" {
				return fmt.Errorf("%s (the run's error: %s)", line, runErr)
			}
			return nil
		}
	}
}

// rusage is this process's CPU time and that of its waited-for children.
func rusage() (self, kids time.Duration) {
	var s, k syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &k)
	tv := func(r *syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return tv(&s), tv(&k)
}

// machineBusy is the machine's busy CPU time so far, all CPUs: the
// first line of /proc/stat less idle and iowait (clock ticks of 10 ms).
func machineBusy() time.Duration {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f {
		if i == 0 || i == 4 || i == 5 { // "cpu", idle, iowait
			continue
		}
		if i > 8 { // guest times are already in user
			break
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

// procCPU is pid's CPU time and that of its waited-for children, from
// /proc/PID/stat (clock ticks of 10 ms).
func procCPU(pid int) (self, kids time.Duration) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(i int) time.Duration {
		v, _ := strconv.Atoi(f[i])
		return time.Duration(v) * 10 * time.Millisecond
	}
	return tick(11) + tick(12), tick(13) + tick(14)
}

// gcLines are the gctrace lines of a daemon log ("gc N @…: … A->B->C MB …").
func gcLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "gc ") && strings.Contains(l, "MB") {
			out = append(out, l)
		}
	}
	return out
}
