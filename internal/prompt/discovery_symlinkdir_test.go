package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The workspace and the agent home are writable from inside the sandbox, and
// a symlink planted there is resolved by the host, not by the sandbox. Rule
// and skill discovery must therefore refuse symlinks in every component below
// those roots, not only in the last one: otherwise `.agents -> /home/me/...`
// (or a symlinked cwd component) pulls host files the agent cannot see into
// the prompt and into the agent-readable SKILLS.md / AGENTS.md snapshots.
// spec: R1 R2 V2
func TestDiscoveryDoesNotFollowSymlinkedDirectoriesOutOfItsRoots(t *testing.T) {
	outside := t.TempDir()
	mk := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(outside, "skills", "private", "SKILL.md"), "---\nname: private\ndescription: HOST-ONLY-SKILL\n---\n")
	mk(filepath.Join(outside, "AGENTS.md"), "HOST-ONLY-RULES\n")

	ws := t.TempDir()
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, ".agents")); err != nil { // .agents/skills -> outside/skills
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil { // cwd /workspace/sub
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "skills"), filepath.Join(home, "skills")); err != nil {
		t.Fatal(err)
	}
	r, err := Build(Inputs{
		Cwd:       filepath.Join(ws, "sub"),
		Workspace: Dir{Host: ws, View: "/workspace"},
		AgentHome: Dir{Host: home, View: "/home/agent"},
		Input:     "hi",
		Time:      time.Unix(0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	all := string(r.JSON())
	for _, leak := range []string{"HOST-ONLY-SKILL", "HOST-ONLY-RULES"} {
		if strings.Contains(all, leak) {
			t.Errorf("prompt holds %s from outside the workspace/agent home", leak)
		}
	}
}
