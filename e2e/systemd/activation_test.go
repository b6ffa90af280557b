package systemd

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/termres"
)

// bins is where run.sh puts the ctx binaries and the clock tool (read-only).
const bins = "/ctxtest"

// ctxRun runs a ctx command (or any program) in dir (the agent's workspace)
// with env added to this test's environment and returns its stdout, stderr
// and error.
func ctxRun(dir string, env []string, name string, args ...string) (string, string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// userctl runs `systemctl --user args...` and fails the test when it fails.
func userctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("systemctl", append([]string{"--user"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("systemctl --user %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// dumpUnit logs what the manager knows about ctx.service, for a failure.
func dumpUnit(t *testing.T) {
	t.Helper()
	out, _ := exec.Command("systemctl", "--user", "status", "--no-pager", "-l", "ctx.socket", "ctx.service").CombinedOutput()
	t.Logf("systemctl --user status:\n%s", out)
	out, _ = exec.Command("journalctl", "--user", "--no-pager", "-n", "40", "-u", "ctx.service").CombinedOutput()
	t.Logf("journal:\n%s", out)
}

// removeUnits disables and stops ctx.socket and ctx.service and removes
// their files: the container root is cached between runs.
func removeUnits(dir string) {
	_ = exec.Command("systemctl", "--user", "disable", "--now", "ctx.socket").Run()
	_ = exec.Command("systemctl", "--user", "stop", "ctx.service").Run()
	for _, n := range []string{"ctx.socket", "ctx.service"} {
		_ = os.Remove(filepath.Join(dir, n))
	}
	_ = exec.Command("systemctl", "--user", "daemon-reload").Run()
	_ = exec.Command("systemctl", "--user", "reset-failed", "ctx.service", "ctx.socket").Run()
}

// inode of a file, 0 when it is missing.
func inode(p string) uint64 {
	var st syscall.Stat_t
	if syscall.Lstat(p, &st) != nil {
		return 0
	}
	return st.Ino
}

// TestSocketActivation: the units `ctx install-units` writes, through the
// real user manager. Enabling ctx.socket binds the system socket (0600 in a
// 0700 directory) without starting the daemon; the first client starts
// ctx.service, which serves the socket it was handed (LISTEN_FDS) and
// reports READY (Type=notify); an agent answers with a sandboxed tool
// call; `systemctl --user stop` ends the daemon within TimeoutStopSec
// while the socket stays; the next client starts it again and the session
// is still there.
// spec: A4, and interfaces.md "Daemon" (LISTEN_FDS; readiness = ping answered)
func TestSocketActivation(t *testing.T) {
	inner(t)
	for _, b := range []string{"ctx", "ctxd", "ctxterm", "tsh", "agent.update", "demo-agent", "clock"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			t.Fatalf("run.sh did not provide %s: %v", b, err)
		}
	}
	ctx := filepath.Join(bins, "ctx")
	xdg := os.Getenv("XDG_RUNTIME_DIR")
	if xdg == "" {
		t.Fatal("XDG_RUNTIME_DIR unset")
	}
	home, _ := os.UserHomeDir()
	unitDir := filepath.Join(home, ".config", "systemd", "user")
	runtime := filepath.Join(xdg, "cortexfs")
	sock := filepath.Join(runtime, "system.sock")

	// CTX_ROOT in a temporary directory (install-units writes it into
	// ctx.service). Cleanups run last-registered first: the units go (and
	// the daemon stops) before the root is removed.
	root, work := t.TempDir(), t.TempDir()
	removeUnits(unitDir) // a run that died half-way
	t.Cleanup(func() { removeUnits(unitDir) })
	env := []string{"CTX_ROOT=" + root, "CTX_NO_AUTOSTART=1"}
	run := func(name string, args ...string) string {
		t.Helper()
		out, errb, err := ctxRun(work, env, name, args...)
		if err != nil {
			dumpUnit(t)
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, errb)
		}
		return out
	}

	// Install and enable: the socket listens, the daemon does not run yet.
	out := run(ctx, "install-units", "--bin", ctx)
	if !strings.Contains(out, "wrote "+filepath.Join(unitDir, "ctx.service")) {
		t.Errorf("install-units: %q", out)
	}
	svc, _ := os.ReadFile(filepath.Join(unitDir, "ctx.service"))
	if !strings.Contains(string(svc), "ExecStart="+ctx+" daemon\n") || !strings.Contains(string(svc), `Environment="CTX_ROOT=`+root+`"`) {
		t.Errorf("ctx.service:\n%s", svc)
	}
	userctl(t, "daemon-reload")
	userctl(t, "enable", "--now", "ctx.socket")
	if got := show(t, "ctx.socket", "ActiveState"); got != "active" {
		dumpUnit(t)
		t.Fatalf("ctx.socket is %q after enable --now", got)
	}
	if got := show(t, "ctx.service", "ActiveState"); got != "inactive" {
		t.Errorf("ctx.service is %q before the first connection, want inactive", got)
	}
	st, err := os.Lstat(sock)
	if err != nil {
		t.Fatalf("ctx.socket did not bind %s: %v", sock, err)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 { // spec: A4
		t.Errorf("%s: mode %v, want a socket with 0600", sock, st.Mode())
	}
	if dt, err := os.Stat(runtime); err != nil || dt.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v, want a 0700 directory", runtime, dt.Mode(), err)
	}
	bound := inode(sock)

	// The first client starts the daemon. CTX_NO_AUTOSTART=1: only the
	// manager can have started it.
	t0 := time.Now()
	dout, derr, _ := ctxRun(work, env, ctx, "doctor", "--json") // other checks may fail in the container
	var rep struct {
		Checks []struct{ Name, Status, Message, Fix string }
	}
	if err := json.Unmarshal([]byte(dout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, dout, derr)
	}
	var daemon string
	for _, c := range rep.Checks {
		if c.Name == "daemon" {
			daemon = c.Status + ": " + c.Message
		}
	}
	if !strings.HasPrefix(daemon, "ok: ctx daemon ") || !strings.Contains(daemon, " answers on "+sock) {
		dumpUnit(t)
		t.Fatalf("doctor's daemon check after the first connection: %q", daemon)
	}
	t.Logf("activated in %v: %s", time.Since(t0), daemon)
	// Type=notify: "active" (not "activating") only after READY; a daemon
	// that never sent it would sit in activating and time out.
	for prop, want := range map[string]string{"ActiveState": "active", "SubState": "running", "Type": "notify", "NotifyAccess": "main"} {
		if got := show(t, "ctx.service", prop); got != want {
			t.Errorf("ctx.service %s = %q, want %q", prop, got, want)
		}
	}
	pid1 := show(t, "ctx.service", "MainPID")
	inv1 := show(t, "ctx.service", "InvocationID")
	if pid1 == "" || pid1 == "0" {
		t.Fatalf("ctx.service has no main pid")
	}
	if inode(sock) != bound {
		t.Errorf("the daemon replaced the activated socket %s instead of serving it", sock)
	}
	// The daemon runs ctx daemon as ExecStart says, with the unit's CTX_ROOT;
	// ctx execs ctxd beside it in the same process.
	if cmdline, _ := os.ReadFile("/proc/" + pid1 + "/cmdline"); string(cmdline) != filepath.Join(filepath.Dir(ctx), "ctxd")+"\x00daemon\x00" {
		t.Errorf("main pid %s runs %q", pid1, cmdline)
	}
	if b, err := os.ReadFile(filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "daemon.lock")); err != nil || strings.TrimSpace(string(b)) != pid1 {
		t.Errorf("daemon lock in CTX_ROOT: %q %v, want pid %s", b, err, pid1)
	}

	// An agent turn through the activated daemon, with the clock tool in bwrap.
	if out := run(ctx, "init"); out != "CTX_ROOT "+root+" ready\n" {
		t.Errorf("ctx init: %q", out)
	}
	run("cp", "-r", filepath.Join(bins, "clock"), filepath.Join(bins, "clock.d"), filepath.Join(root, "tool")+"/")
	run(ctx, "agent", "create", "demo", "--exec", filepath.Join(bins, "demo-agent"))
	sent := false
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Logf("SKIP the agent turn: bwrap is not installed in the container root (run.sh installs bubblewrap; see its log)")
	} else {
		answer := regexp.MustCompile(`^Let me look at the clock\. It is \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC\), according to the clock tool\.\n$`)
		if out := run(ctx, "agent", "send", "demo", "what time is it?"); !answer.MatchString(out) {
			t.Errorf("send: %q", out)
		}
		sent = true
		terminalUnderSystemd(t, ctx, layout.Layout{Root: root, Runtime: runtime, UID: os.Getuid()}, env)
	}

	// Stop: STOPPING, then exit well within TimeoutStopSec; the socket stays.
	timeout, err := time.ParseDuration(strings.NewReplacer(" ", "", "min", "m").Replace(show(t, "ctx.service", "TimeoutStopUSec")))
	if err != nil || timeout <= 0 {
		t.Fatalf("TimeoutStopUSec: %v", err)
	}
	t1 := time.Now()
	userctl(t, "stop", "ctx.service")
	took := time.Since(t1)
	t.Logf("ctx.service stopped in %v (TimeoutStopSec %v)", took, timeout)
	if took >= timeout {
		t.Errorf("stopping ctx.service took %v, its TimeoutStopSec is %v (killed, not stopped)", took, timeout)
	}
	for prop, want := range map[string]string{"ActiveState": "inactive", "Result": "success"} {
		if got := show(t, "ctx.service", prop); got != want {
			t.Errorf("after stop: ctx.service %s = %q, want %q", prop, got, want)
		}
	}
	if got := show(t, "ctx.socket", "ActiveState"); got != "active" {
		t.Errorf("after stopping the service, ctx.socket is %q", got)
	}
	if inode(sock) != bound {
		t.Errorf("the stopped daemon removed or replaced the manager's socket %s", sock)
	}
	if _, err := os.Stat("/proc/" + pid1); err == nil {
		t.Errorf("the daemon (pid %s) still runs after the stop", pid1)
	}

	// The next client starts it again; the session survived.
	out = run(ctx, "agent", "resume", "demo")
	if sent && (!strings.Contains(out, "> what time is it?\n") || !strings.Contains(out, "according to the clock tool.")) {
		t.Errorf("resume after re-activation:\n%s", out)
	}
	if got := show(t, "ctx.service", "ActiveState"); got != "active" {
		t.Errorf("ctx.service is %q after the next connection", got)
	}
	if pid2, inv2 := show(t, "ctx.service", "MainPID"), show(t, "ctx.service", "InvocationID"); pid2 == pid1 || inv2 == inv1 || pid2 == "0" {
		t.Errorf("not a new activation: pid %s→%s, invocation %s→%s", pid1, pid2, inv1, inv2)
	}
	t.Logf("resume after re-activation:\n%s", out)
}

// terminalUnderSystemd: a terminal started through the activated daemon
// runs in its own transient unit (the systemd launcher): ctxterm waits on
// its hold FIFO until the launch root is registered (U2), and its shell
// is held until the daemon has checked the view (--view-hold, B1) — here
// a workspace with a nested repository, whose hooks stay read-only.
func terminalUnderSystemd(t *testing.T, ctx string, l layout.Layout, env []string) {
	ws := t.TempDir()
	for _, d := range []string{".git", "sub/.git/hooks"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// bash as an interactive tool, as the terminal tests elsewhere have it.
	tools := filepath.Join(l.Root, "tool")
	if err := os.MkdirAll(filepath.Join(tools, "bash.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tools, "bash"), []byte("#!/bin/sh\nexec /bin/bash \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(tools, "bash.d", "tool.json"), []byte(`{"description":"bash","interactive":true}`), 0o644)
	if out, errb, err := ctxRun(ws, env, ctx, "agent", "start", "demo", "--session", "term"); err != nil {
		t.Fatalf("agent start: %v\n%s%s", err, out, errb)
	}
	defer ctxRun(ws, env, ctx, "agent", "stop", "demo", "--session", "term")
	rec, err := os.ReadFile(filepath.Join(l.TerminalDir("demo", "term"), termres.EventsFile))
	if err != nil || !bytes.Contains(rec, []byte(`"launcher":"systemd"`)) {
		t.Errorf("the terminal's agent.start does not name the systemd launcher (%v):\n%s", err, rec)
	}
	c, err := ctxterm.DialHello(l.RuntimeTerminalSocket("demo", "term"), ctxterm.Hello{Mode: ctxterm.ModeAttach, Cols: 120, Rows: 40})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	defer c.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	go c.CopyOutput(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) }))
	expect := func(s string) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			ok := strings.Contains(out.String(), s)
			got := out.String()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("terminal output has no %q:\n%q", s, got)
			}
		}
	}
	expect("tsh> ")
	c.Write([]byte("bash\r"))
	expect("/workspace$ ")
	c.Write([]byte(`touch /workspace/sub/.git/hooks/post-checkout 2>/dev/null && echo "HO""OK=planted" || echo "HO""OK=refused"` + "\r"))
	expect("HOOK=")
	expect("HOOK=refused")
	if _, err := os.Stat(filepath.Join(ws, "sub", ".git", "hooks", "post-checkout")); err == nil {
		t.Error("a hook was planted in the nested repository from the terminal")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
