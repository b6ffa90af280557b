package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spec: R1 — global, then the project chain from the repository root to the cwd.
func TestRulesChain(t *testing.T) {
	in, root := fixture(t)
	ws := in.Workspace.Host
	write(t, filepath.Join(ws, "sub", "deeper", "AGENTS.md"), "deepest\n")
	write(t, filepath.Join(ws, "sub", "AGENTS.override.md"), "override wins\n")
	write(t, filepath.Join(root, "AGENTS.md"), "outside the workspace\n")
	in.Cwd = filepath.Join(ws, "sub", "deeper")
	rules, w := collectRules(osFS{}, &in)
	want := "# AGENTS.md: /ctx/home/1000/AGENTS.md\n\nAnswer in English.\n\n" +
		"# AGENTS.md: /workspace/AGENTS.md\n\nRun `make test` before you finish.\n\n" +
		"# AGENTS.md: /workspace/sub/AGENTS.override.md\n\noverride wins\n\n" +
		"# AGENTS.md: /workspace/sub/deeper/AGENTS.md\n\ndeepest"
	if rules != want || len(w) != 0 {
		t.Errorf("got %q, warnings %v", rules, w)
	}

	// No .git: the cwd alone.
	os.RemoveAll(filepath.Join(ws, ".git"))
	rules, _ = collectRules(osFS{}, &in)
	if strings.Contains(rules, "make test") || !strings.Contains(rules, "deepest") {
		t.Errorf("without .git: %q", rules)
	}
	// .git above the workspace is not looked for.
	os.MkdirAll(filepath.Join(root, ".git"), 0o755)
	rules, _ = collectRules(osFS{}, &in)
	if strings.Contains(rules, "outside") {
		t.Errorf("left the workspace: %q", rules)
	}
	// A nested repo root (a .git file, as in worktrees) is the nearest ancestor.
	write(t, filepath.Join(ws, "sub", ".git"), "gitdir: elsewhere\n")
	rules, _ = collectRules(osFS{}, &in)
	if strings.Contains(rules, "make test") || !strings.Contains(rules, "override wins") {
		t.Errorf("nested root: %q", rules)
	}
}

func TestRulesCapAndSymlink(t *testing.T) {
	in, _ := fixture(t)
	ws := in.Workspace.Host
	write(t, filepath.Join(ws, "AGENTS.md"), strings.Repeat("é", RulesFileCap)) // 2 bytes each
	secret := filepath.Join(t.TempDir(), "id_rsa")
	write(t, secret, "PRIVATE KEY")
	os.Remove(filepath.Join(ws, "sub", "AGENTS.md"))
	os.Symlink(secret, filepath.Join(ws, "sub", "AGENTS.md"))
	rules, w := collectRules(osFS{}, &in)
	if strings.Contains(rules, "PRIVATE") {
		t.Fatal("followed a symlink")
	}
	if len(w) != 2 || !strings.Contains(w[0], "larger than") || !strings.Contains(w[1], "symlink") {
		t.Errorf("warnings %v", w)
	}
	i := strings.Index(rules, "/workspace/AGENTS.md\n\n")
	if i < 0 || len(rules) > RulesFileCap+200 || !strings.Contains(rules, "cut by ctx") {
		t.Errorf("cap not applied: %d bytes", len(rules))
	}
}

func TestRulesNoWorkspace(t *testing.T) {
	in, _ := fixture(t)
	in.Workspace = Dir{}
	in.Cwd = in.AgentHome.Host
	write(t, filepath.Join(in.AgentHome.Host, "AGENTS.md"), "agent home rules\n")
	rules, _ := collectRules(osFS{}, &in)
	if !strings.HasSuffix(rules, "# AGENTS.md: /home/agent/AGENTS.md\n\nagent home rules") {
		t.Errorf("%q", rules)
	}
}
