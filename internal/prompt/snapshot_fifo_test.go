package prompt

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A sandboxed agent can write its own session directory (it is bound
// writable at the CTX_AGENT_SUBJECT path). A FIFO or a symlink planted at
// AGENTS.md / SKILLS.md must not hang or feed an unbounded read into the
// host's best-effort snapshot write (R5), and must be replaced, not followed.
// spec: R5 X7
func TestSnapshotsDoNotFollowAgentPlantedFIFOOrSymlink(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, RulesSnapshot), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "private")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, SkillsSnapshot)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- WriteSnapshots(dir, "rules", []Skill{{Name: "a", Description: "b", Path: "/p"}}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WriteSnapshots: %v", err)
		}
	case <-time.After(3 * time.Second):
		// Unblock the goroutine so the test binary can exit.
		if f, err := os.OpenFile(filepath.Join(dir, RulesSnapshot), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("WriteSnapshots blocked on an agent-planted FIFO (daemon run hangs)")
	}
	for _, n := range []string{RulesSnapshot, SkillsSnapshot} {
		st, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("%s: want a regular file, got %v %v", n, st, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Fatalf("symlink target changed: %q", b)
	}
}
