package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
)

// secretTool is a tool the agent's policy denies: if it ever runs, it
// leaves a marker in the workspace (seen on the host).
const secretTool = "#!/bin/sh\necho SECRET-RAN >> /workspace/secret-ran\necho SECRET-RAN\n"

// TestSecurityTerminalHostOutside attacks the persistent terminal from a
// tool run at its prompt,,
// and checks the outcome on the host: no injected line is executed (TIOCSTI,
// also with high request bits), kill(-1) and kill(0) leave the terminal
// served and ctxterm alive, ctxterm is not visible (nor ptraceable) from
// inside, the resource's events.jsonl cannot be written from inside, and a
// policy-denied tool is absent from the terminal's view.
func TestSecurityTerminalHostOutside(t *testing.T) {
	w, ws := termWorld(t)
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.tool("secret", secretTool)
	if err := os.WriteFile(filepath.Join(w.root, "agent", "t1.d", "policy"), []byte("allow tool bash\nallow tool attack\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	lr, _ := w.receipt("t1", "default", "launch")
	sock := filepath.Join(w.run, "terminal", "t1", "default", "main.sock")
	a := dialTerm(t, sock, ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	events := filepath.Join(w.termDir("t1", "default"), "events.jsonl")
	uid := strconv.Itoa(os.Getuid())

	// served: the terminal still answers a new attach with its prompt, and
	// ctxterm (the receipt's process) is alive.
	served := func(what string) bool {
		t.Helper()
		if err := syscall.Kill(lr.PID, 0); err != nil {
			t.Errorf("%s: ctxterm (pid %d) is gone: %v", what, lr.PID, err)
			return false
		}
		c, err := ctxterm.DialHello(sock, ctxterm.Hello{Mode: ctxterm.ModeAttach, Cols: 100, Rows: 30})
		if err != nil {
			t.Errorf("%s: the terminal is no longer served: %v", what, err)
			return false
		}
		tc := &termConn{t: t, c: c, done: make(chan struct{})}
		go func() { defer close(tc.done); tc.c.CopyOutput(tc) }()
		defer func() { c.Close(); <-tc.done }()
		c.Write([]byte("\r"))
		for deadline := time.Now().Add(5 * time.Second); !bytes.Contains(tc.bytes(), []byte("tsh> ")); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%s: a new attach gets no prompt: %q", what, tc.bytes())
				return false
			}
		}
		return true
	}
	// sentinel runs a harmless line after an attack: anything the attack
	// pushed into the input queue runs before it.
	n := 0
	sentinel := func() {
		t.Helper()
		n++
		p := filepath.Join("/workspace", "sentinel-"+strconv.Itoa(n))
		a.send("attack mark " + p + "\r")
		waitFor(t, "the sentinel line "+p, 10*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(ws, filepath.Base(p)))
			return err == nil
		})
	}

	// The denied tool is absent from the terminal's view.
	a.run("attack see /ctx/tool /ctx/tool/secret", "EXEC1")
	if ls := a.value("LS0"); !strings.Contains(ls, "attack") || strings.Contains(ls, "secret") {
		t.Errorf("the terminal's /ctx/tool: %q (want attack, not the denied secret)", ls)
	}
	if ex := a.value("EXEC1"); strings.Contains(ex, "SECRET-RAN") {
		t.Errorf("a denied tool ran by path from the terminal: %q", ex)
	}

	// Events.jsonl cannot be written from inside.
	inside := "/ctx/home/" + uid + "/agent/t1/session/default/terminal/events.jsonl"
	a.run("attack append "+inside+" /run/cortexfs/terminal.events.jsonl", "APPEND1")
	if b, _ := os.ReadFile(events); bytes.Contains(b, []byte("FORGED-BY-TOOL")) {
		t.Errorf("a tool in the terminal forged its history:\n%s", b)
	}

	// ptrace: ctxterm is not in the sandbox's PID namespace.
	a.run("attack ptrace", "CTXTERM")
	if got := a.value("CTXTERM"); got != "none" {
		t.Errorf("ctxterm is visible from inside the terminal: %q", got)
	}
	if bytes.Contains(a.bytes(), []byte("=attached")) {
		t.Error("a tool ptraced the terminal host")
	}

	// TIOCSTI, plain and with high request bits: nothing injected runs.
	for _, mode := range []string{"plain", "high"} {
		marker := "/workspace/sti-" + mode
		a.send("attack tiocsti " + mode + " " + marker + "\r")
		sentinel()
		if _, err := os.Stat(filepath.Join(ws, "sti-"+mode)); err == nil {
			t.Errorf("TIOCSTI (%s) from a tool injected a line the terminal's shell ran", mode)
		}
	}
	if strings.Contains(string(a.bytes()), "STI=injected") {
		t.Errorf("TIOCSTI from a tool was accepted:\n%q", a.bytes())
	}

	// kill(0), then kill(-1), both SIGKILL: the terminal stays served.
	for _, target := range []string{"0", "-1"} {
		a.send("attack kill " + target + "\r")
		time.Sleep(300 * time.Millisecond)
		if !served("after kill(" + target + ")") {
			return
		}
		sentinel()
	}
	if b, err := os.ReadFile(filepath.Join(ws, "secret-ran")); err == nil {
		t.Errorf("the denied tool ran: %q", b)
	}
	if st := w.mustCtx("terminal", "status", "t1", "default"); !strings.Contains(st, "live") {
		t.Errorf("terminal status after the attacks:\n%s", st)
	}
}

// TestSecurityViewIsTheAuthority: an agent step sees no tool files at all,
// and a tool process sees only the tools the agent's policy allows: the
// denied tool can be neither listed nor run by path.
func TestSecurityViewIsTheAuthority(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.tool("secret", secretTool)
	userTools := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "tool")
	os.MkdirAll(userTools, 0o755)
	os.WriteFile(filepath.Join(userTools, "mine"), []byte(secretTool), 0o755)
	w.agent("v", map[string]string{"tools": "attack\n", "policy": "allow tool attack\n"})
	ws := t.TempDir()
	userDir := "/ctx/home/" + strconv.Itoa(os.Getuid()) + "/tool"

	// A tool process: the allowed tool only.
	tr, _ := callTool(t, w, "v", ws, "attack", "see", "/ctx/tool", userDir, "/ctx/tool/secret", userDir+"/mine")
	if got := kvs(tr.Content, "LS0"); got != "/ctx/tool [attack]" {
		t.Errorf("a tool process's /ctx/tool: %q, want only the allowed tool:\n%s", got, tr.Content)
	}
	if got := kvs(tr.Content, "LS1"); got != userDir+" []" {
		t.Errorf("a tool process's user tool directory: %q, want it empty:\n%s", got, tr.Content)
	}
	for _, k := range []string{"EXEC2", "EXEC3"} {
		if got := kvs(tr.Content, k); got == "" || strings.Contains(got, " none ") || strings.Contains(got, "SECRET-RAN") {
			t.Errorf("a tool process ran a denied tool by path (%s): %q\n%s", k, got, tr.Content)
		}
	}

	// An agent step: no tool file at all, not even allowed ones.
	c := w.dial("v")
	c.send(sendReq("see-1", "see /ctx/tool /ctx/tool/attack /ctx/tool/secret "+userDir+" "+userDir+"/mine", "workspace", ws))
	var text string
	for _, f := range c.until("done", 20*time.Second) {
		if f.Type == "delta" {
			text += f.Text
		}
	}
	if !strings.HasPrefix(text, "see: ") || strings.Contains(text, "ls /ctx/tool") || strings.Contains(text, "ls "+userDir) ||
		strings.Contains(text, "SECRET-RAN") || strings.Contains(text, "<nil>") {
		t.Errorf("an agent step saw or ran tool files:\n%s", text)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "secret-ran")); err == nil {
		t.Errorf("a denied tool ran: %q", b)
	}
}

// kvs is the value of the KEY=VALUE line key in out ("" if none).
func kvs(out, key string) string {
	v, _ := kv(out, key)
	return v
}
