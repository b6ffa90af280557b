package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/limits"
)

// releaseWindow is how long a sandbox a dead daemon held on its block pipe
// would take to start once the pipe reads EOF (milliseconds); the tests
// look again after it.
const releaseWindow = 2 * time.Second

// runCgroups lists the run cgroups of w's CTX_ROOT in every v1 hierarchy
// (this machine) and the v2 one.
func runCgroups(w *world) []string {
	base := cgroup.BaseName(os.Getuid(), w.root)
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + base)
	if d := "/sys/fs/cgroup/" + base; fileExists(d) {
		dirs = append(dirs, d)
	}
	var out []string
	for _, d := range dirs {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			if e.IsDir() && strings.HasPrefix(e.Name(), "run-") {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}

// TestSecurityHostReaperNoRestart: SIGKILL the daemon while a tool's
// detached, SIGTERM-ignoring grandchild runs (or while its sandbox is still
// held), and start no daemon again: within a bounded time nothing of the
// run is alive, its sandbox never starts late, and its run cgroups are
// gone — the reaper, not the next daemon, swept them (docs/walls.md, "No
// sandbox outlives its daemon").
func TestSecurityHostReaperNoRestart(t *testing.T) {
	w := newWorld(t)
	needCgroups(t, w)
	installAttack(t, w)
	w.agent("crash", map[string]string{"tools": "attack\n"})
	for i := 0; i < 4; i++ {
		w.start()
		mark := marker(t, "reaped"+strconv.Itoa(i))
		c := w.dial("crash")
		c.send(sendReq("crash-"+strconv.Itoa(i), "tool attack orphan "+mark+" 60s", "session", "s"+strconv.Itoa(i), "workspace", t.TempDir()))
		// Odd rounds kill as soon as the sandbox exists (often still
		// held); even ones once the orphan is detached and running.
		waitFor(t, "the tool's sandbox", 20*time.Second, func() bool { return len(procsWith(mark)) >= 2 })
		if i%2 == 0 {
			waitFor(t, "the orphan", 20*time.Second, func() bool {
				for _, p := range procsWith(mark) {
					if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); strings.Contains(string(b), "\x00linger\x00") {
						return true
					}
				}
				return false
			})
		}
		w.kill()
		waitFor(t, "no process of the dead daemon's run", 10*time.Second, func() bool { return len(procsWith(mark)) == 0 })
		time.Sleep(releaseWindow)
		if left := procsWith(mark); len(left) > 0 {
			t.Fatalf("round %d: a process of the dead daemon's run started after its death: %v", i, left)
		}
		if left := runCgroups(w); len(left) > 0 {
			t.Fatalf("round %d: run cgroups left with no daemon: %v", i, left)
		}
	}
	if !strings.Contains(w.log.String(), "swept the run cgroups of a daemon that is gone") {
		t.Errorf("the reaper never swept:\n%s", w.log)
	}
}

// TestSecurityHostReaperSweepsLeftovers: a process in a run cgroup of this
// CTX_ROOT that escaped its sandbox's teardown (here: placed there from
// outside, detached, SIGTERM ignored — what the issue found alive 47
// minutes after a crash) is killed and its cgroup removed within a bounded
// time after the daemon is SIGKILLed, with no daemon started again
// (docs/walls.md, "No sandbox outlives its daemon").
func TestSecurityHostReaperSweepsLeftovers(t *testing.T) {
	w := newWorld(t)
	needCgroups(t, w)
	w.start()
	m := cgroup.New(context.Background(), os.Getuid(), w.root, nil)
	mark := marker(t, "escaped")
	cmd := exec.Command(binDir+"/attack", "linger", mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	if err := m.Group("run-escaped", limits.Default).Place(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	w.kill()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatalf("the escaped process is alive 5 s after its daemon died (%v)", procsWith(mark))
	}
	waitFor(t, "the run cgroup removed", 5*time.Second, func() bool { return len(runCgroups(w)) == 0 })
	if !strings.Contains(w.log.String(), "swept the run cgroups of a daemon that is gone") {
		t.Errorf("the reaper's sweep was not logged:\n%s", w.log)
	}
}

// TestSecurityHostApprovedFileBoundByDescriptor: under `ask` the tool file
// is checked, shown and approved; right after allow_once, while the host
// builds the view (a large workspace makes that take a while), the file
// is replaced on the host. What runs is the checked file (bound over its
// path by descriptor, --ro-bind-fd) or nothing (a replacement seen before
// the spawn fails closed; one after it leaves the descriptor naming an
// unlinked file, which bwrap refuses to bind): the replacement never runs.
// Rounds at growing delays; at least one swap must land between the last
// check and the run, or the test proved nothing. README "`tsh call`
// executes the descriptor it checked", spec: A2 V3
func TestSecurityHostApprovedFileBoundByDescriptor(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_APPROVAL_TIMEOUT=10s")
	const checked = "#!/bin/sh\nif [ -e /workspace/swap-done ]; then echo ran-after-swap; else echo ran-before-swap; fi\n"
	const evil = "#!/bin/sh\ntouch /workspace/swapped\necho swapped\n"
	w.tool("mark", checked)
	w.agent("ap", map[string]string{"tools": "mark\n", "approval": "ask\n"})
	ws := w.workspace()
	// The view's walk of the workspace is the window between the last
	// check and bwrap's mounts.
	for i := 0; i < 3000; i++ {
		d := filepath.Join(ws, "d"+strconv.Itoa(i/100), "e"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(w.root, "tool", "mark")
	tmp := filepath.Join(w.root, "mark.tmp") // not in the tool directory: the view lists that
	c := w.dial("ap")
	after := 0
	for round, delay := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond, 15 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond} {
		os.Remove(filepath.Join(ws, "swap-done"))
		if err := os.WriteFile(tmp, []byte(checked), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		id := "b" + strconv.Itoa(round)
		c.send(sendReq(id, "tool mark", "workspace", ws))
		got := c.until("approval_request", 10*time.Second)
		ar := got[len(got)-1]
		if err := os.WriteFile(tmp, []byte(evil), 0o755); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		c.send(map[string]any{"op": "approve", "run": ar.Run, "id": ar.ID, "decision": "allow_once"})
		time.Sleep(delay)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "swap-done"), nil, 0o644)
		swapped := time.Since(t0)
		var tr frame
		for _, f := range c.until("done", 15*time.Second) {
			if f.Type == "tool_result" {
				tr = f
			}
		}
		t.Logf("round %d: swap %v after allow_once: %s %s %q", round, swapped.Round(time.Microsecond), tr.Status, tr.Layer, tr.Content)
		if _, err := os.Stat(filepath.Join(ws, "swapped")); err == nil || strings.Contains(tr.Content, "swapped") {
			t.Fatalf("round %d: the file swapped in after the approval ran: %s", round, tr.raw)
		}
		switch {
		case tr.Status == "ok" && strings.Contains(tr.Content, "ran-after-swap"):
			after++ // the checked file ran, after the swap
		case tr.Status == "error" && tr.Layer == "sandbox" && strings.Contains(tr.Content, "bwrap: "):
			// The swap came after the last check, before bwrap mounted the
			// checked file: its descriptor now names an unlinked file,
			// which bwrap refuses to bind ("Can't find source path
			// /proc/self/fd/N", "Race condition binding dirfd"). Nothing ran.
			after++
		case tr.Status == "ok" && strings.Contains(tr.Content, "ran-before-swap"):
		case tr.Status == "denied" && tr.Layer == "changed": // swapped before the last check
		default:
			t.Errorf("round %d: tool_result %s", round, tr.raw)
		}
	}
	if after == 0 {
		t.Fatal("no round swapped the file between the last check and the run: the test proved nothing")
	}
}

// TestSecurityHostTerminalToolHasNoCtty: a tool started from the agent's
// persistent terminal — at tsh's prompt, and through `tsh call` from the
// interactive bash tool — has no controlling terminal: tty_nr 0, /dev/tty
// refused. The same probe run by bash directly (bash keeps
// the terminal: it is declared interactive) sees one, so the probe can
// tell (README "The walls": TIOCSTI and the controlling terminal).
func TestSecurityHostTerminalToolHasNoCtty(t *testing.T) {
	w, ws := termWorld(t)
	installAttack(t, w)
	if err := os.WriteFile(filepath.Join(w.root, "agent", "t1.d", "policy"), []byte("allow tool bash\nallow tool attack\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	a := dialTerm(t, filepath.Join(w.run, "terminal", "t1", "default", "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	detached := func(key, how string) {
		t.Helper()
		nr, devtty, leader := a.value(key+"_NR"), a.value(key+"_DEVTTY"), a.value(key+"_LEADER")
		// A new session (tsh's prompt) or TIOCNOTTY (`tsh call` execs
		// the tool in place, in the caller's session): either way no
		// controlling terminal.
		t.Logf("a tool %s: tty_nr %s, /dev/tty %s, session leader %s", how, nr, devtty, leader)
		if nr != "0" || !strings.HasPrefix(devtty, "refused:") {
			t.Errorf("a tool %s has a controlling terminal: tty_nr %s, /dev/tty %s", how, nr, devtty)
		}
	}
	a.run("call attack ctty T1", "T1_FG")
	detached("T1", "called at tsh's prompt")
	a.run("attack ctty T2", "T2_FG")
	detached("T2", "run by name at tsh's prompt")
	a.send("bash\r")
	// Typed-ahead lines may be flushed while bash sets up its terminal:
	// type again until it answers.
	waitFor(t, "bash's prompt", 10*time.Second, func() bool {
		a.send("echo BA''SH=up\r")
		time.Sleep(300 * time.Millisecond)
		return a.value("BASH") == "up"
	})
	a.run("/ctx/tool/attack ctty T3", "T3_FG")
	if nr := a.value("T3_NR"); nr == "0" || nr == "" {
		t.Fatalf("the probe run by bash itself sees no controlling terminal (tty_nr %q): it cannot tell", nr)
	}
	a.run("/ctx/bin/tsh call attack ctty T4", "T4_FG")
	detached("T4", "called through tsh from bash")
}

// TestSecurityHostRequestRacesPassivation: with CTX_SESSION_IDLE at 1 ms,
// requests to one session arrive as its idle tick fires, again and again,
// through the real daemon: each is answered (none is lost with a session
// stopped under it), and the session's files are closed once they stop.
// spec: P4 (the package test TestRequestRacingPassivation runs the race
// thousands of times)
func TestSecurityHostRequestRacesPassivation(t *testing.T) {
	w, c, base := idleWorld(t, "1ms")
	for i := 0; i < 400; i++ {
		time.Sleep(time.Duration(i%5) * 500 * time.Microsecond)
		c.send(map[string]any{"op": "resume", "session": "racy"})
		if f := c.must(10 * time.Second); f.Type != "caught_up" {
			t.Fatalf("request %d: %s", i, f.raw)
		}
	}
	waitFor(t, "the session passivated", 10*time.Second, func() bool { return w.openFDs() <= base+2 })
}
