package sandbox

import (
	"github.com/cortexfs/ctx/internal/bwrap"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
)

func view(t *testing.T) View {
	t.Helper()
	dir := t.TempDir()
	l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: 1000}
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	def := &agentdef.Def{Name: "a", Kind: agentdef.KindExec, Object: l.AgentObject("a"), CTXPath: l.DefaultCTXPath(),
		Env: []agentdef.KV{{Key: "FOO", Value: "1"}, {Key: "HOME", Value: "/evil"}}}
	return View{Layout: l, Def: def, Session: "s", Run: "run-1", Workspace: ws}
}

// argsOf is s's bwrap argv, its environment passed by descriptor (as
// internal/proc does): the values are never on argv.
func argsOf(s bwrap.Spec) ([]string, error) {
	f, err := s.PassEnv()
	if err != nil {
		return nil, err
	}
	if f != nil {
		defer f.Close()
	}
	return s.Args()
}

// TestSpecView: the workspace is writable at /workspace with .git
// read-only over it; the session log is read-only; other sessions hidden. spec: B1 B2 X7
func TestSpecView(t *testing.T) {
	v := view(t)
	v.Tsh = true
	a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	ws := v.Workspace
	for _, want := range []string{
		"--bind " + ws + " /workspace --ro-bind " + ws + "/.git /workspace/.git",
		"--bind " + v.Layout.AgentHome("a") + " /home/agent",
		"--tmpfs /home/agent/session",
		"--ro-bind-try " + v.Layout.SessionDir("a", "private", "s") + "/events.jsonl /ctx/home/1000/agent/a/session/s/events.jsonl",
		"--chdir /workspace",
		"--unshare-net",
	} {
		if !strings.Contains(j, want) {
			t.Errorf("missing %q in\n%s", want, j)
		}
	}
}

// TestSpecViewWithoutTsh: an agent step or a checked tool the host runs
// directly sees no session directory and no .d/, yet other sessions stay
// hidden. spec: X7
func TestSpecViewWithoutTsh(t *testing.T) {
	v := view(t)
	a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	if !strings.Contains(j, "--tmpfs /home/agent/session") {
		t.Errorf("other sessions not hidden:\n%s", j)
	}
	if strings.Contains(j, "/session/s") || strings.Contains(j, "/ctx/agent/a.d") {
		t.Errorf("session or .d bound without tsh:\n%s", j)
	}
}

// TestEnvs: tools get exactly the B3 allowlist (+ CTX_RUN, CTX_CONTROL_SOCKET);
// agents get .d/env, then runtime-held variables that .d/env cannot override. spec: B3 X11
func TestEnvs(t *testing.T) {
	v := view(t)
	var keys []string
	for k := range v.ToolEnv() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"CTX_AGENT", "CTX_AGENT_SUBJECT", "CTX_CONTROL_SOCKET", "CTX_HOME", "CTX_PATH", "CTX_ROOT", "CTX_RUN", "HOME", "LANG", "LOGNAME", "SHELL", "TERM", "USER"}
	if !slices.Equal(keys, want) {
		t.Errorf("tool env %v", keys)
	}
	env := v.AgentEnv(3)
	if env["HOME"] != "/home/agent" || env["FOO"] != "1" || env["CTX_STEP"] != "3" || env["CTX_RUN"] != "run-1" {
		t.Errorf("agent env %v", env)
	}
	if _, ok := env["PATH"]; ok {
		t.Error("PATH leaked into the agent environment")
	}
}
