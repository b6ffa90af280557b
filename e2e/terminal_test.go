package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
)

// bashTool is the visible bash tool tsh's bare `bash` line calls (K6).
const bashTool = "#!/bin/sh\nexec /bin/bash \"$@\"\n"

// termWorld is a world with a started daemon, agent t1, the bash tool and
// a git workspace; its cleanup ends the terminal whatever the test did
// (the terminal outlives the daemon by design).
func termWorld(t *testing.T, extra ...string) (*world, string) {
	t.Helper()
	w := newWorld(t)
	w.start(extra...)
	w.tool("bash", bashTool)
	// A shell needs the terminal it runs on: declared interactive, it keeps
	// it (every other tool gets a new session).
	os.MkdirAll(filepath.Join(w.root, "tool", "bash.d"), 0o755)
	os.WriteFile(filepath.Join(w.root, "tool", "bash.d", "tool.json"), []byte(`{"description":"bash","interactive":true}`), 0o644)
	w.agent("t1", nil)
	ws := w.workspace()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Logf("git init: %v %s (using a bare .git directory)", err, out)
		os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	}
	t.Cleanup(func() {
		killTerminal(w, "t1", "default")
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(w.run, "terminal", "t1", "default.log"))
			t.Logf("terminal log:\n%s", b)
		}
	})
	return w, ws
}

type launchReceipt struct {
	Kind       string `json:"kind"`
	Launcher   string `json:"launcher"`
	PID        int    `json:"pid"`
	StartTime  uint64 `json:"start_time"`
	Generation int    `json:"generation"`
	Terminal   string `json:"terminal"`
	Socket     string `json:"socket"`
	Reason     string `json:"reason"`
	Status     *int   `json:"status"`
}

func (w *world) receipt(agent, session, kind string) (launchReceipt, bool) {
	var r launchReceipt
	b, err := os.ReadFile(filepath.Join(w.run, "receipts", "terminal", agent, session, kind+".json"))
	if err != nil {
		return r, false
	}
	if err := json.Unmarshal(b, &r); err != nil {
		w.t.Fatalf("receipt: %v", err)
	}
	return r, true
}

// killTerminal SIGKILLs a live terminal's process tree (test cleanup).
func killTerminal(w *world, agent, session string) {
	r, ok := w.receipt(agent, session, "launch")
	if !ok || r.PID <= 0 {
		return
	}
	for _, p := range descendants(r.PID) {
		syscall.Kill(p, syscall.SIGKILL)
	}
	syscall.Kill(r.PID, syscall.SIGKILL)
}

func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		b, _ := os.ReadFile("/proc/" + itoa(cur) + "/task/" + itoa(cur) + "/children")
		for _, f := range strings.Fields(string(b)) {
			if c, err := atoi(f); err == nil {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

func (w *world) termDir(agent, session string) string {
	return filepath.Join(w.sessionDir(agent, session), "terminal")
}

func (w *world) termEvents(agent, session string) []map[string]any {
	w.t.Helper()
	b, _ := os.ReadFile(filepath.Join(w.termDir(agent, session), "events.jsonl"))
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal(l, &m); err != nil {
			w.t.Fatalf("terminal events line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func eventTypes(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

// termConn is a test client of a terminal: it keeps all output.
type termConn struct {
	t    *testing.T
	c    *ctxterm.Conn
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (tc *termConn) Write(p []byte) (int, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.out.Write(p)
}

func (tc *termConn) bytes() []byte {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]byte(nil), tc.out.Bytes()...)
}

func dialTerm(t *testing.T, path string, mode ctxterm.Mode) *termConn {
	t.Helper()
	c, err := ctxterm.DialHello(path, ctxterm.Hello{Mode: mode, Cols: 200, Rows: 50})
	if err != nil {
		t.Fatalf("dial %s (%s): %v", path, mode, err)
	}
	tc := &termConn{t: t, c: c, done: make(chan struct{})}
	go func() { defer close(tc.done); tc.c.CopyOutput(tc) }()
	t.Cleanup(func() { c.Close(); <-tc.done })
	return tc
}

func (tc *termConn) send(s string) {
	tc.t.Helper()
	if _, err := tc.c.Write([]byte(s)); err != nil {
		tc.t.Fatalf("send: %v", err)
	}
}

// expect waits until the output contains s.
func (tc *termConn) expect(s string, timeout time.Duration) {
	tc.t.Helper()
	deadline := time.Now().Add(timeout)
	for !bytes.Contains(tc.bytes(), []byte(s)) {
		if time.Now().After(deadline) {
			tc.t.Fatalf("terminal output has no %q:\n%q", s, tc.bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// value returns the text after the last KEY= up to the end of its line.
// Commands spell keys split ("P""WD=") so their echo never matches.
func (tc *termConn) value(key string) string {
	out := string(tc.bytes())
	i := strings.LastIndex(out, key+"=")
	if i < 0 {
		return ""
	}
	v := out[i+len(key)+1:]
	if j := strings.IndexAny(v, "\r\n"); j >= 0 {
		v = v[:j]
	}
	return v
}

// run types one command line and waits for KEY= in the output: one at a
// time, so typed-ahead echo never interleaves with the output.
func (tc *termConn) run(line, key string) string {
	tc.t.Helper()
	tc.send(line + "\r")
	deadline := time.Now().Add(10 * time.Second)
	for tc.value(key) == "" {
		if time.Now().After(deadline) {
			tc.t.Fatalf("no %s= after %q:\n%q", key, line, tc.bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return tc.value(key)
}

// buildSTI builds a TIOCSTI probe: it opens a terminal without making it
// its controlling terminal and pushes one byte into its input.
func buildSTI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		fmt.Println("STI=open-failed:" + err.Error())
		return
	}
	c := byte('#')
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCSTI, uintptr(unsafe.Pointer(&c))); e != 0 {
		fmt.Println("STI=refused:" + e.Error())
		return
	}
	fmt.Println("STI=injected")
}
`
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module sti\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644)
	cmd := exec.Command("go", "build", "-o", "sti", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the TIOCSTI probe: %v\n%s", err, out)
	}
	return filepath.Join(dir, "sti")
}

// TestTerminalStartAttachSandbox drives the whole chain: ctx agent start →
// launcher → ctxterm (host) → bwrap → tsh, then through tsh's bash tool checks the
// sandbox from inside, the watch/attach semantics, stop, and that the
// resource outlives the process.
// spec: T1 T2 T3 T4 T5 B1 B2 B3 B4 S5 D3 D4 D6 D7 D8 L2 L3 L6
func TestTerminalStartAttachSandbox(t *testing.T) {
	w, ws := termWorld(t, "PROVIDER_SECRET=sk-daemon-secret")
	sti, _ := os.ReadFile(buildSTI(t))
	w.tool("sti", string(sti))

	r := w.ctx(ws, "", "agent", "start", "t1")
	if r.code != 0 {
		t.Fatalf("agent start: %d %s%s\n%s", r.code, r.stdout, r.stderr, w.log)
	}
	lr, ok := w.receipt("t1", "default", "launch")
	if !ok || lr.Kind != "launch" || lr.Launcher != "builtin" || lr.PID <= 0 || lr.StartTime == 0 || lr.Generation != 1 {
		t.Fatalf("launch receipt: %+v %v", lr, ok)
	}
	id, err := os.ReadFile(filepath.Join(w.termDir("t1", "default"), "id"))
	if err != nil || strings.TrimSpace(string(id)) != lr.Terminal {
		t.Fatalf("terminal id %q vs receipt %q: %v", id, lr.Terminal, err)
	}
	// spec: T3 — the ABI path aliases the runtime socket.
	abi := filepath.Join(w.termDir("t1", "default"), "main.sock")
	rt := filepath.Join(w.run, "terminal", "t1", "default", "main.sock")
	if target, err := os.Readlink(abi); err != nil || target != rt {
		t.Fatalf("ABI socket link: %q %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(w.root, "instances")); err == nil {
		t.Error("an instances/ directory exists (L5)")
	}

	w1 := dialTerm(t, rt, ctxterm.ModeWatch)
	w2 := dialTerm(t, abi, ctxterm.ModeWatch)
	a := dialTerm(t, abi, ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)

	// spec: S5 — bytes sent on a watch connection never reach the PTY.
	w1.send("touch /workspace/watch-injected\r")
	w2.send("echo WATCH-INJ\"\"ECTED\r")

	a.send("bash\r")
	a.expect("/workspace# ", 10*time.Second) // tsh reads ahead: type only once bash prompts
	a.run(`echo "P""WD=$(pwd)"`, "PWD")
	a.run(`echo "H""OME=$HOME"`, "HOME")
	a.run(`echo "ENV""KEYS=$(tr '\0' '\n' </proc/$PPID/environ | cut -d= -f1 | sort | tr '\n' ,)"`, "ENVKEYS")
	a.run(`touch /workspace/.git/x 2>/dev/null && echo "GIT""W=ok" || echo "GIT""W=fail"`, "GITW")
	a.run(`echo from-terminal > /workspace/from-term; echo "WR""OTE=yes"`, "WROTE")
	a.run(`setsid -w /ctx/tool/sti $(tty)`, "STI")
	a.send("exit\r")
	a.expect("tsh> ", 10*time.Second)

	if got := a.value("PWD"); got != "/workspace" { // spec: B1 D6
		t.Errorf("pwd = %q, want /workspace", got)
	}
	if got := a.value("HOME"); got != "/home/agent" { // spec: B2 D7
		t.Errorf("HOME = %q, want /home/agent", got)
	}
	allowed := map[string]bool{"CTX_ROOT": true, "CTX_HOME": true, "CTX_AGENT": true, "CTX_AGENT_SUBJECT": true, "CTX_PATH": true,
		"HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "TERM": true, "LANG": true,
		"PWD": true} // bwrap sets PWD after --chdir (as the tools' sandbox test also accepts)
	keys := strings.Split(strings.TrimSuffix(a.value("ENVKEYS"), ","), ",")
	if len(keys) < 5 {
		t.Errorf("environment keys of tsh: %q", keys)
	}
	for _, k := range keys { // spec: B3 B4
		if !allowed[k] {
			t.Errorf("tsh's environment has %q outside the B3 allowlist (%v)", k, keys)
		}
	}
	if bytes.Contains(a.bytes(), []byte("sk-daemon-secret")) {
		t.Error("the daemon's secret reached the terminal")
	}
	if got := a.value("GITW"); got != "fail" { // spec: B1 D8
		t.Errorf("writing into .git: %q, want fail", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "from-term")); err != nil || string(b) != "from-terminal\n" {
		t.Errorf("file written in /workspace: %q %v", b, err)
	}
	// spec: B4 — TIOCSTI into a terminal that is not the caller's own
	// controlling terminal fails even as root (--cap-drop ALL).
	if got := a.value("STI"); !strings.HasPrefix(got, "refused") {
		t.Errorf("TIOCSTI from a process in another session: %q, want refused", got)
	}
	// spec: B2 — .bash_history lands in the agent home, not the workspace.
	hist := filepath.Join(w.root, "home", itoa(os.Getuid()), "agent", "t1", ".bash_history")
	waitFor(t, ".bash_history in the agent home", 5*time.Second, func() bool {
		b, _ := os.ReadFile(hist)
		return bytes.Contains(b, []byte("from-terminal"))
	})
	if _, err := os.Stat(filepath.Join(ws, ".bash_history")); err == nil {
		t.Error(".bash_history landed in the workspace")
	}
	if _, err := os.Stat(filepath.Join(ws, "watch-injected")); err == nil {
		t.Error("input sent on a watch connection reached the PTY")
	}
	if bytes.Contains(a.bytes(), []byte("WATCH-INJECTED")) {
		t.Error("input sent on a watch connection was echoed by the PTY")
	}
	// Two watchers see the same bytes.
	waitFor(t, "watchers to catch up", 5*time.Second, func() bool {
		return bytes.Equal(w1.bytes(), w2.bytes()) && bytes.Contains(w1.bytes(), []byte("STI="))
	})

	st := w.mustCtx("terminal", "status", "t1", "default")
	if !strings.Contains(st, lr.Terminal) || !strings.Contains(st, "live") || !strings.Contains(st, "builtin") || !strings.Contains(st, itoa(lr.PID)) {
		t.Errorf("terminal status:\n%s", st)
	}

	// Stop: the process and socket go; id and history remain. spec: T5 L3 L6
	a.c.Close()
	if r := w.ctx("", "", "agent", "stop", "t1"); r.code != 0 {
		t.Fatalf("agent stop: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if _, ok := w.receipt("t1", "default", "launch"); ok {
		t.Error("the launch receipt survived the stop")
	}
	cr, ok := w.receipt("t1", "default", "cleanup")
	if !ok || cr.Kind != "cleanup" || cr.Reason != "stop" || cr.Terminal != lr.Terminal || cr.Generation != 1 {
		t.Errorf("cleanup receipt: %+v", cr)
	}
	meta, _ := os.ReadFile(filepath.Join(w.root, "agent", "t1.d", "meta.json"))
	if !bytes.Contains(meta, []byte(`"cleanup"`)) || !bytes.Contains(meta, []byte(lr.Terminal)) {
		t.Errorf("meta.json has no cleanup receipt: %s", meta)
	}
	if err := syscall.Kill(lr.PID, 0); err == nil {
		if s, _ := os.ReadFile("/proc/" + itoa(lr.PID) + "/stat"); !bytes.Contains(s, []byte(") Z")) {
			t.Errorf("terminal pid %d still alive after stop", lr.PID)
		}
	}
	if id2, _ := os.ReadFile(filepath.Join(w.termDir("t1", "default"), "id")); !bytes.Equal(id, id2) {
		t.Errorf("id changed: %q → %q", id, id2)
	}
	types := eventTypes(w.termEvents("t1", "default"))
	for _, want := range []string{"created", "agent.start", "attached", "detached", "exited", "agent.stop"} {
		if !strings.Contains(strings.Join(types, " "), want) {
			t.Errorf("terminal events lack %s: %v", want, types)
		}
	}
	if _, err := os.Lstat(abi); err == nil {
		t.Error("the ABI socket link remains after the stop")
	}
	// spec: T4 — attach with nothing live: exit 3, socket-availability error.
	if r := w.ctx("", "", "agent", "attach", "t1"); r.code != 3 || !strings.Contains(r.stderr, "socket unavailable") {
		t.Errorf("attach with nothing live: %d %q", r.code, r.stderr)
	}
	if r := w.ctx("", "", "terminal", "watch", "t1"); r.code != 3 {
		t.Errorf("terminal watch with nothing live: %d %q", r.code, r.stderr)
	}
	st = w.mustCtx("terminal", "status", "t1")
	if !strings.Contains(st, "exited") || !strings.Contains(st, lr.Terminal) {
		t.Errorf("status after stop:\n%s", st)
	}
	// A new start is the next generation of the same resource. spec: T5
	if r := w.ctx(ws, "", "terminal", "create", "t1"); r.code != 0 || strings.TrimSpace(r.stdout) != lr.Terminal {
		t.Fatalf("terminal create: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if lr2, _ := w.receipt("t1", "default", "launch"); lr2.Generation != 2 || lr2.Terminal != lr.Terminal {
		t.Errorf("second start: %+v", lr2)
	}
	w.mustCtx("agent", "stop", "t1")
}

// TestTerminalKilledIsRecorded: ctxterm killed by SIGKILL cannot record
// its own end; the supervisor does (exited event, cleanup receipt, meta.json).
// spec: T5 L2 L3
func TestTerminalKilledIsRecorded(t *testing.T) {
	w, ws := termWorld(t)
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	lr, _ := w.receipt("t1", "default", "launch")
	// ctxterm is the receipt's process itself (on the host, outside the sandbox).
	if b, _ := os.ReadFile("/proc/" + itoa(lr.PID) + "/comm"); strings.TrimSpace(string(b)) != "ctxterm" {
		t.Fatalf("the launch receipt's pid %d is %q, not ctxterm", lr.PID, b)
	}
	syscall.Kill(lr.PID, syscall.SIGKILL)
	var cr launchReceipt
	waitFor(t, "the cleanup receipt", 10*time.Second, func() bool {
		var ok bool
		cr, ok = w.receipt("t1", "default", "cleanup")
		return ok
	})
	if cr.Reason != "exited" || cr.Generation != 1 {
		t.Errorf("cleanup receipt: %+v", cr)
	}
	evs := w.termEvents("t1", "default")
	var exited map[string]any
	for _, e := range evs {
		if e["type"] == "exited" {
			exited = e
		}
	}
	if exited == nil || !strings.Contains(exited["reason"].(string), "supervisor") {
		t.Errorf("no exited event recorded by the supervisor: %v", evs)
	}
	// The receipt is written before agent.stop is logged.
	waitFor(t, "agent.stop in the daemon log", 5*time.Second, func() bool { return strings.Contains(w.log.String(), "agent.stop") })
	if r := w.ctx("", "", "agent", "attach", "t1"); r.code != 3 {
		t.Errorf("attach after the kill: %d %s", r.code, r.stderr)
	}
}

// TestTerminalSurvivesDaemonRestart: the built-in launcher's terminal
// outlives the daemon; the next daemon adopts it from its receipt and can
// stop it. spec: T1 L5 L6
func TestTerminalSurvivesDaemonRestart(t *testing.T) {
	w, ws := termWorld(t)
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	lr, _ := w.receipt("t1", "default", "launch")
	a := dialTerm(t, filepath.Join(w.run, "terminal", "t1", "default", "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	w.stop()
	if err := syscall.Kill(lr.PID, 0); err != nil {
		t.Fatalf("the terminal died with the daemon: %v", err)
	}
	a.send("list\r")
	a.expect("bash", 5*time.Second) // still served without a daemon
	w.start()
	waitFor(t, "adoption", 5*time.Second, func() bool { return strings.Contains(w.log.String(), "adopted terminal") })
	if st := w.mustCtx("terminal", "status", "t1", "default"); !strings.Contains(st, "live") {
		t.Errorf("status after the restart:\n%s", st)
	}
	if r := w.ctx("", "", "agent", "stop", "t1"); r.code != 0 || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("stop the adopted terminal: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if cr, ok := w.receipt("t1", "default", "cleanup"); !ok || cr.Reason != "stop" {
		t.Errorf("cleanup receipt: %+v", cr)
	}
	waitFor(t, "the adopted terminal to end", 10*time.Second, func() bool { return syscall.Kill(lr.PID, 0) != nil })
}

// TestAttachInTmux is a person's view: `ctx agent attach` inside tmux,
// keys typed, the screen read back, Ctrl-\ detaches. spec: S5 D4
func TestAttachInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	w, ws := termWorld(t)
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v %s", args, err, out)
		}
		return string(out)
	}
	var envs []string
	for _, e := range w.env() {
		envs = append(envs, strconv.Quote(e))
	}
	tm("new-session", "-d", "-s", "t", "-x", "120", "-y", "30",
		"env -i "+strings.Join(envs, " ")+" "+w.ctxBin+" agent attach t1; echo CTX-EXIT=$?; sleep 30")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	screen := func(want string) string {
		t.Helper()
		var s string
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if s = tm("capture-pane", "-p", "-t", "t"); strings.Contains(s, want) {
				return s
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("screen has no %q:\n%s", want, s)
		return s
	}
	screen("tsh>")
	screen("[attached to the terminal of t1/default — detach: Ctrl-\\]") // the banner says how to leave
	tm("send-keys", "-t", "t", "bash", "Enter")
	// Type only once bash prompts: a line typed ahead is read (and lost)
	// by the shell that starts bash, as in any terminal.
	screen(":/workspace")
	tm("send-keys", "-t", "t", `echo "AN""SWER=$((6*7)) in $(pwd)"`, "Enter")
	screen("ANSWER=42 in /workspace")
	tm("send-keys", "-t", "t", "C-\\")
	s := screen("CTX-EXIT=")
	if !strings.Contains(s, "detached") || !strings.Contains(s, "CTX-EXIT=0") {
		t.Errorf("after Ctrl-\\:\n%s", s)
	}
	// The terminal keeps running after the detach.
	if st := w.mustCtx("terminal", "status", "t1"); !strings.Contains(st, "live") {
		t.Errorf("status after detach:\n%s", st)
	}
	w.mustCtx("agent", "stop", "t1")
}

// TestStartUsageErrors: unknown agent and bad names are usage errors (exit
// 2); a stop with nothing live is done. spec: S1
func TestStartUsageErrors(t *testing.T) {
	w := newWorld(t)
	w.start()
	if r := w.ctx("", "", "agent", "start", "nobody"); r.code != 2 || !strings.Contains(r.stderr, "no such agent") {
		t.Errorf("start unknown agent: %d %q", r.code, r.stderr)
	}
	w.agent("t1", nil)
	if r := w.ctx("", "", "agent", "start", "t1", "--session", "../x"); r.code != 2 {
		t.Errorf("start with a bad session: %d %q", r.code, r.stderr)
	}
	if r := w.ctx("", "", "agent", "start", "t1", "--cwd", "/nonexistent"); r.code != 2 {
		t.Errorf("start with a missing cwd: %d %q", r.code, r.stderr)
	}
	if r := w.ctx("", "", "agent", "stop", "t1"); r.code != 0 {
		t.Errorf("stop with nothing live: %d %q", r.code, r.stderr)
	}
	if r := w.ctx("", "", "terminal", "status", "t1", "default"); r.code != 2 {
		t.Errorf("status of a resource never created: %d %q", r.code, r.stderr)
	}
	_ = errors.New
}

// TestTerminalAgentUpdate: agent.update run from the terminal reaches the
// control socket with ctxterm (on the host) as the registered launch root:
// the peer — the tool, a descendant of ctxterm through bwrap and tsh — is
// verified by the ancestor walk. spec: U2 U3
func TestTerminalAgentUpdate(t *testing.T) {
	w, ws := termWorld(t)
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	lr, _ := w.receipt("t1", "default", "launch")
	sock := filepath.Join(w.run, "terminal", "t1", "default", "main.sock")
	a := dialTerm(t, sock, ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	sys := filepath.Join(w.root, "agent", "t1.d", "system.md")
	update := func(content string) {
		t.Helper()
		os.WriteFile(filepath.Join(ws, "sys.md"), []byte(content), 0o644)
		a.send("agent.update --control system.md --file /workspace/sys.md --run " + lr.Terminal + "\r")
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if b, _ := os.ReadFile(sys); string(b) == content {
				return
			}
			if time.Now().After(deadline) {
				out := a.bytes()
				t.Fatalf("system.md is not %q; the terminal shows:\n%s", content, out[max(0, len(out)-600):])
			}
		}
	}
	update("from the terminal\n")
	update("again from the terminal\n")
	// After a daemon restart the adopting daemon registers ctxterm again and
	// listens on a new socket file; the view binds the directory holding
	// only the socket, so the terminal reaches the new one.
	w.stop()
	w.start()
	waitFor(t, "adoption", 5*time.Second, func() bool { return strings.Contains(w.log.String(), "adopted terminal") })
	update("after a daemon restart\n")
	if target, err := os.Readlink(filepath.Join(w.run, "control.sock")); err != nil || target != "control/control.sock" {
		t.Errorf("the pinned control socket path is not the link to control/control.sock: %q %v", target, err)
	}
}

// TestAttachNoSuchAgent: attach and watch to an agent that does not exist,
// with nothing answering, say "no such agent" and exit 2 (usage), not
// which sockets were tried with exit 3 (the daemon unavailable).
func TestAttachNoSuchAgent(t *testing.T) {
	w := newWorld(t)
	for _, cmd := range []string{"attach", "watch"} {
		r := w.ctx("", "", "agent", cmd, "nosuch")
		if r.code != 2 || !strings.Contains(r.stderr, `no such agent "nosuch"`) || strings.Contains(r.stderr, ".sock") {
			t.Errorf("%s nosuch: exit %d, %q", cmd, r.code, r.stderr)
		}
	}
}

// TestTerminalNestedRepoChecked (spec: B1): a terminal in a workspace
// with a nested repository starts — its view checked against the walk
// once the shell runs — and the nested repository's hooks are read-only
// in it while the workspace around them is writable.
func TestTerminalNestedRepoChecked(t *testing.T) {
	w, ws := termWorld(t)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	mustGit(t, t.TempDir(), filepath.Join(ws, "sub"), "init", "-q")
	r := w.ctx(ws, "", "agent", "start", "t1")
	if r.code != 0 {
		t.Fatalf("agent start: %d %s%s\n%s", r.code, r.stdout, r.stderr, w.log)
	}
	a := dialTerm(t, filepath.Join(w.termDir("t1", "default"), "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	a.send("bash\r")
	a.expect("/workspace# ", 10*time.Second)
	a.run(`touch /workspace/sub/.git/hooks/post-checkout 2>/dev/null && echo "HO""OK=ok" || echo "HO""OK=fail"`, "HOOK")
	a.run(`touch /workspace/sub/file && echo "SU""B=ok" || echo "SU""B=fail"`, "SUB")
	if got := a.value("HOOK"); got != "fail" {
		t.Errorf("a hook in the nested repository: %q, want fail", got)
	}
	if got := a.value("SUB"); got != "ok" {
		t.Errorf("a file beside it: %q, want ok", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "sub", ".git", "hooks", "post-checkout")); err == nil {
		t.Error("the hook is on the host")
	}
}
