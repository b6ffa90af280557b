package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
)

// TestSecurityTerminalInjection: a tool run from the persistent terminal,
// in the terminal's own session (its controlling terminal), tries TIOCSTI —
// plain and with high bits in the request — to make the shell run a
// command; and ptrace, as it would against the terminal host. The filter
// refuses each and the injected command never runs.
func TestSecurityTerminalInjection(t *testing.T) {
	w, ws := termWorld(t)
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	a := dialTerm(t, filepath.Join(w.termDir("t1", "default"), "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	a.send("bash\r")
	a.expect("/workspace# ", 10*time.Second)
	// inject types "touch /workspace/INJECTED\n" into its controlling terminal.
	a.run(`/ctx/tool/attack inject /dev/tty "touch /workspace/INJECTED"; echo "INJ""DONE=1"`, "INJDONE")
	a.run(`echo "SYS""CALLS=$(/ctx/tool/attack syscalls | tr '\n' ' ')"`, "SYSCALLS")
	time.Sleep(300 * time.Millisecond) // an injected line, had there been one, runs by now
	if _, err := os.Stat(filepath.Join(ws, "INJECTED")); err == nil {
		t.Error("TIOCSTI from a terminal tool injected a command the shell ran")
	}
	out := string(a.bytes())
	for _, want := range []string{"tiocsti=EPERM", "tiocsti_high=EPERM"} {
		if !strings.Contains(out, want) {
			t.Errorf("inject: no %q in the terminal output:\n%s", want, out)
		}
	}
	for _, want := range []string{"ioctl_tiocsti=EPERM", "ptrace=EPERM", "unshare_newuser=EPERM"} {
		if !strings.Contains(out, want) {
			t.Errorf("syscalls: no %q in the terminal output", want)
		}
	}
}

// TestSecurityTerminalPlaceholders: from the persistent terminal, the
// auto-executed files a workspace lacks cannot be created (placeholders,
// as in a run's view), and once the terminal is stopped the host's
// workspace is left as it was. protected paths in every view
func TestSecurityTerminalPlaceholders(t *testing.T) {
	w, ws := termWorld(t)
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	a := dialTerm(t, filepath.Join(w.termDir("t1", "default"), "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	a.send("bash\r")
	a.expect("/workspace# ", 10*time.Second)
	a.run(`echo '{"mcpServers":{}}' > /workspace/.mcp.json 2>/dev/null && echo "MC""P=written" || echo "MC""P=refused"`, "MCP")
	a.run(`mkdir -p /workspace/.vscode/x 2>/dev/null && echo "VS""C=made" || echo "VS""C=refused"`, "VSC")
	a.run(`echo hook > /workspace/.git/hooks/pre-commit 2>/dev/null && echo "HO""OK=written" || echo "HO""OK=refused"`, "HOOK")
	for k, want := range map[string]string{"MCP": "refused", "VSC": "refused", "HOOK": "refused"} {
		if got := a.value(k); got != want {
			t.Errorf("%s from the terminal: %s, want %s", k, got, want)
		}
	}
	if r := w.ctx("", "", "agent", "stop", "t1"); r.code != 0 {
		t.Fatalf("agent stop: %d %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the placeholders to go", 10*time.Second, func() bool {
		_, e1 := os.Lstat(filepath.Join(ws, ".mcp.json"))
		_, e2 := os.Lstat(filepath.Join(ws, ".vscode"))
		return os.IsNotExist(e1) && os.IsNotExist(e2)
	})
}
