package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
)

// TestAuditComparesTheDirectoryTheRunHad: the end-of-run check compares
// the workspace the run started in (held open since the start), not
// whatever its path names by then: a repository the run made shows in the
// warning though the directory was moved and another put at its path.
func TestAuditComparesTheDirectoryTheRunHad(t *testing.T) {
	base := t.TempDir()
	l := layout.Layout{Root: filepath.Join(base, "root"), Runtime: filepath.Join(base, "run"), UID: os.Getuid()}
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	a := takeAudit(l, &agentdef.Def{Name: "a"}, ws)
	if a == nil {
		t.Fatal("no audit of the workspace")
	}
	moved := filepath.Join(base, "moved")
	if err := os.Rename(ws, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(moved, "sub", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(moved, "sub", ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil { // another directory at the path, unchanged
		t.Fatal(err)
	}
	changes, incomplete := a.changes()
	if len(incomplete) > 0 {
		t.Errorf("incomplete: %v", incomplete)
	}
	if !strings.Contains(strings.Join(changes, "\n"), "sub/.git") {
		t.Errorf("the repository the run made is not reported: %q", changes)
	}
	if a.open != nil {
		t.Error("the directories are still held after the comparison")
	}
}
