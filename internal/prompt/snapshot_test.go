package prompt

import (
	"os"
	"path/filepath"
	"testing"
)

// spec: R5 — AGENTS.md = {{rules}}, SKILLS.md = {{skills}}; failure is an error, not a panic.
func TestWriteSnapshots(t *testing.T) {
	in, _ := fixture(t)
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteSnapshots(dir, r.Rules, r.Skills); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, RulesSnapshot))
	s, _ := os.ReadFile(filepath.Join(dir, SkillsSnapshot))
	if string(a) != r.Rules || string(s) != RenderSkills(r.Skills) || len(s) == 0 {
		t.Errorf("snapshots differ: %q %q", a, s)
	}
	ro := t.TempDir()
	os.Chmod(ro, 0o500)
	defer os.Chmod(ro, 0o700)
	if os.Geteuid() != 0 {
		if err := WriteSnapshots(ro, "x", nil); err == nil {
			t.Error("read-only session dir: want error")
		}
	}
	if err := WriteSnapshots(filepath.Join(dir, "missing"), "x", nil); err == nil {
		t.Error("missing dir: want error")
	}
	if err := WriteSnapshots("", "", nil); err == nil {
		t.Error("empty dir: want error")
	}
}
