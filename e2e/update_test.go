package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentUpdateFromInsideTheSandbox: the agent.update tool, run by a real
// run in a real sandbox, replaces the agent's own system.md through the
// control socket; an invalid control or oversize content is refused; no
// other setting changes. spec: U1 U2 U3 U4 U6
func TestAgentUpdateFromInsideTheSandbox(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("self", nil)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "sys.md"), []byte("You are careful.\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "big.md"), []byte(strings.Repeat("x", 8193)), 0o644)
	before, _ := os.ReadFile(filepath.Join(w.root, "agent", "self.d", "window"))

	tr, _ := callTool(t, w, "self", ws, "tsh", "call", "agent.update", "--control", "system.md", "--file", "/workspace/sys.md")
	if tr.Status != "ok" || !strings.Contains(tr.Content, `"ok":true`) {
		t.Fatalf("update: %s", tr.raw)
	}
	got, err := os.ReadFile(filepath.Join(w.root, "agent", "self.d", "system.md"))
	if err != nil || string(got) != "You are careful.\n" {
		t.Fatalf("system.md = %q %v", got, err)
	}
	tr, _ = callTool(t, w, "self", ws, "tsh", "call", "agent.update", "--control", "policy", "--file", "/workspace/sys.md")
	if tr.Status != "error" || !strings.Contains(tr.Content, "EINVAL") {
		t.Errorf("control policy: %s", tr.raw)
	}
	tr, _ = callTool(t, w, "self", ws, "tsh", "call", "agent.update", "--control", "system.md", "--file", "/workspace/big.md")
	if tr.Status != "error" || !strings.Contains(tr.Content, "E2BIG") {
		t.Errorf("8 KiB + 1: %s", tr.raw)
	}
	tr, _ = callTool(t, w, "self", ws, "tsh", "call", "agent.update", "--control", "system.md", "--file", "/workspace/sys.md", "--agent", "other")
	if tr.Status != "error" || !strings.Contains(tr.Content, "EPERM") {
		t.Errorf("another agent: %s", tr.raw)
	}
	if _, err := os.Stat(filepath.Join(w.root, "agent", "self.d", "policy")); err == nil {
		t.Error("a policy file appeared")
	}
	// U6: the next prompt build shows the change.
	if out := w.mustCtx("agent", "prompt", "self"); !strings.Contains(out, "You are careful.") {
		t.Errorf("the next prompt does not show the new system.md:\n%s", out)
	}
	after, _ := os.ReadFile(filepath.Join(w.root, "agent", "self.d", "window"))
	if string(before) != string(after) {
		t.Error("window changed")
	}
	// A request id seen once is refused (EALREADY) with no second write.
	os.WriteFile(filepath.Join(ws, "sys2.md"), []byte("Second.\n"), 0o644)
	tr, _ = callTool(t, w, "self", ws, "tsh", "call", "agent.update", "--control", "system.md", "--file", "/workspace/sys2.md", "--request-id", "fixed-1")
	if tr.Status != "ok" {
		t.Fatalf("fixed id: %s", tr.raw)
	}
	w.stop()
	w.start()
	os.WriteFile(filepath.Join(ws, "sys3.md"), []byte("Third.\n"), 0o644)
	tr, _ = callTool(t, w, "self", ws, "tsh", "call", "agent.update", "--control", "system.md", "--file", "/workspace/sys3.md", "--request-id", "fixed-1")
	if !strings.Contains(tr.Content, "EALREADY") {
		t.Errorf("replayed id after restart: %s", tr.raw)
	}
	if got, _ := os.ReadFile(filepath.Join(w.root, "agent", "self.d", "system.md")); string(got) != "Second.\n" {
		t.Errorf("system.md after the replay = %q", got)
	}
}
