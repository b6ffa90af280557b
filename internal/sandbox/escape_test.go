package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
)

// spec: B1 V3 — an agent that can write /workspace/.git (no .git existed) forges a worktree
// pointer; the next sandbox of the view binds an arbitrary host dir read-only.
func TestForgedGitFileMountsNothing(t *testing.T) {
	base := t.TempDir()
	secret := filepath.Join(base, "host-secrets")
	os.MkdirAll(secret, 0o700)
	os.WriteFile(filepath.Join(secret, "anthropic"), []byte("sk-SECRET\n"), 0o600)
	ws := filepath.Join(base, "ws")
	os.MkdirAll(ws, 0o755)
	// What the agent writes from inside the sandbox (/workspace/.git):
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+secret+"\n"), 0o644)

	l := layout.Layout{Root: filepath.Join(base, "root"), Runtime: filepath.Join(base, "rt"), UID: os.Getuid()}
	def := &agentdef.Def{Name: "a", Kind: agentdef.KindModel, CTXPath: "/ctx/tool"}
	v := View{Layout: l, Def: def, Session: "s", Scope: "private", Run: "run-1", Workspace: ws}
	spec := v.Spec([]string{"/bin/cat", secret + "/anthropic"}, map[string]string{"PATH": "/usr/bin:/bin"})
	for _, m := range spec.Mounts {
		if m.Src == secret {
			t.Logf("forged mount present: %+v", m)
		}
	}
	envf, err := spec.PassEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer envf.Close()
	args, err := spec.Args()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bwrap", args...)
	cmd.ExtraFiles = spec.Files
	out, err := cmd.CombinedOutput()
	t.Logf("sandbox output: %q err=%v", out, err)
	if strings.Contains(string(out), "sk-SECRET") {
		t.Errorf("ESCAPE: the sandbox read a host file outside its view via a forged /workspace/.git")
	}
}
