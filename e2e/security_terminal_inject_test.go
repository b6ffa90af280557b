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
// refuses each and the injected command never runs. issue 11 item 5
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
