package tsh

import (
	"path/filepath"
	"testing"
)

// Regression: inside a real sandbox /ctx/agent/<name>.d is not mounted
// (sandbox.View.Spec binds only bin/, tool/, home/<uid>/tool and, for
// executable agents, the agent object), so tsh's agent-policy layer reads
// "no file" and allows. In the persistent terminal (ctxterm -> tsh) tsh is
// the only authority check, so .d/policy "deny tool grep" is not enforced.
// spec: V3 K3
func TestAgentPolicyInvisibleFailsClosed(t *testing.T) {
	view, tools := t.TempDir(), t.TempDir() // view = CTX_ROOT as the sandbox sees it: no agent/coder.d
	mkTool(t, tools, "grep", "", 0o755)
	m := map[string]string{"CTX_ROOT": view, "CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "1:coder:s", "CTX_PATH": tools}
	sh, _, errb, fe := shell(t, m)
	code := sh.Run([]string{"call", "grep", "x"})
	if fe.path == filepath.Join(tools, "grep") {
		t.Errorf("tsh executed grep although the agent's control dir (and so its policy) is invisible: fail-open (code %d)", code)
	} else {
		t.Logf("refused (fixed): %d %s", code, errb)
	}
}
