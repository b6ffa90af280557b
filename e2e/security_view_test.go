package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestSecurityViewHidesDeniedTools: a tool the agent's policy denies is not
// in a tool process's view (so it cannot be run around tsh and the host's
// checks), while allowed ones are; an agent step sees no tool files at all
// and cannot exec one by path.
func TestSecurityViewHidesDeniedTools(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.tool("secret", "#!/bin/sh\necho SECRET-TOOL-RAN\n")
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.agent("v", map[string]string{"tools": "attack\nsecret\n", "policy": "allow tool *\ndeny tool secret\n"})
	tr, _ := callTool(t, w, "v", t.TempDir(), "attack", "view", "secret", "clock")
	if strings.Contains(tr.Content, "SECRET-TOOL-RAN") || !strings.Contains(tr.Content, "exec_secret=refused") {
		t.Errorf("a tool ran a policy-denied tool directly:\n%s", tr.Content)
	}
	if !strings.Contains(tr.Content, "exec_clock=ran: tick") {
		t.Errorf("an allowed tool is not in the view:\n%s", tr.Content)
	}
	for _, l := range strings.Split(tr.Content, "\n") {
		if v, ok := strings.CutPrefix(l, "tools="); ok && strings.Contains(","+v+",", ",secret,") {
			t.Errorf("the denied tool is listed in the view: %s", v)
		}
	}
	// The host's own check still names the layer.
	if tr2, _ := callTool(t, w, "v", t.TempDir(), "secret"); tr2.Status != "denied" || tr2.Layer != "agent-policy" {
		t.Errorf("calling the denied tool: %s", tr2.raw)
	}
	r := w.ctx("", "", "agent", "send", "v", "view", "clock")
	if r.code != 0 || !strings.Contains(r.stdout, "view: seen= exec=") || strings.Contains(r.stdout, "exec=<nil>") {
		t.Errorf("an agent step sees tool files or ran one: %d %q %s", r.code, r.stdout, r.stderr)
	}
}
