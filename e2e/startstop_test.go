package e2e

import (
	"bufio"
	"net"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pingOnce dials the system socket and reads one pong.
func pingOnce(sock string) bool {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("{\"op\":\"ping\"}\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.Contains(line, `"pong"`)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestDaemonFastStartAndStop: exec → ping answered is a small multiple of
// a bare process start of the same binary (the installs and scans come
// after the sockets), and an idle daemon exits on SIGTERM long before
// the cancel grace (10 s here): nothing runs, so nothing is waited for.
// The bounds are ratios and fractions of the grace, not wall-clock
// targets; the measured times are logged.
func TestDaemonFastStartAndStop(t *testing.T) {
	w := newWorld(t)
	w.agent("a", nil)

	var starts, stops, bare []time.Duration
	for i := 0; i < 5; i++ {
		// The baseline: the same ctx → ctxd exec chain, exiting at once
		// (ctxd's usage error).
		t0 := time.Now()
		_ = exec.Command(binDir+"/ctxd", "--usage-please").Run()
		bare = append(bare, time.Since(t0))

		cmd := exec.Command(w.ctxBin, "daemon")
		cmd.Env = w.env("CTX_CANCEL_GRACE=10s")
		t0 = time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		for !pingOnce(w.run + "/system.sock") {
			select {
			case <-exited:
				t.Fatal("daemon exited at start")
			case <-time.After(time.Millisecond):
			}
			if time.Since(t0) > 20*time.Second {
				cmd.Process.Kill()
				t.Fatal("no pong in 20 s")
			}
		}
		starts = append(starts, time.Since(t0))
		// A run (the deferred installs are waited for), then idle with a
		// live agent actor and session actor.
		w.mustCtx("agent", "send", "a", "echo", "hi")
		time.Sleep(100 * time.Millisecond)
		t1 := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Fatal("daemon did not exit on SIGTERM")
		}
		stops = append(stops, time.Since(t1))
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d after SIGTERM, want 0", code)
		}
	}
	t.Logf("exec→pong median %v (all %v); bare process start median %v; SIGTERM→exit median %v (all %v)",
		median(starts), starts, median(bare), median(stops), stops)
	// A daemon start is a Go process start, a lock, a few directories and
	// three sockets. 275–320 ms before the start-up work (≈ 40× a process start).
	if m, b := median(starts), median(bare); m > 10*b+50*time.Millisecond {
		t.Errorf("exec→pong %v is over 10× a bare start of ctxd (%v) + 50 ms", m, b)
	}
	// 2 s before the start-up work with the default grace: it waited it out.
	if m := median(stops); m > 2*time.Second {
		t.Errorf("an idle daemon took %v to exit on SIGTERM with CTX_CANCEL_GRACE=10s", m)
	}
}

// TestDaemonGoProcs: the daemon runs its Go code on half the CPUs Go found
// for it (at least one), and a GOMAXPROCS in its environment stands.
func TestDaemonGoProcs(t *testing.T) {
	re := regexp.MustCompile(`msg="go procs" gomaxprocs=(\d+) found=(\d+)`)
	read := func(w *world) (procs, found int) {
		t.Helper()
		var m []string
		waitUntil(5*time.Second, func() bool { m = re.FindStringSubmatch(w.log.String()); return m != nil })
		if m == nil {
			t.Fatalf("no go procs line:\n%s", w.log)
		}
		procs, _ = strconv.Atoi(m[1])
		found, _ = strconv.Atoi(m[2])
		return procs, found
	}
	w := newWorld(t)
	w.start()
	procs, found := read(w)
	if found < 1 || found > runtime.NumCPU() || procs != max(1, found/2) {
		t.Fatalf("gomaxprocs %d of %d found (%d CPUs): want half, at least 1", procs, found, runtime.NumCPU())
	}
	w2 := newWorld(t)
	w2.start("GOMAXPROCS=3")
	if procs, _ := read(w2); procs != 3 {
		t.Fatalf("gomaxprocs %d with GOMAXPROCS=3 in the environment", procs)
	}
}
