package run

import (
	"errors"
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

// TestAuditDroppedByARunThatEnded: a definition that arrives after its
// run concluded (a cancel during the load) closes the audit's held
// directories instead of leaving them to the garbage collector.
func TestAuditDroppedByARunThatEnded(t *testing.T) {
	base := t.TempDir()
	l := layout.Layout{Root: filepath.Join(base, "root"), Runtime: filepath.Join(base, "run"), UID: os.Getuid()}
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	au := takeAudit(l, &agentdef.Def{Name: "a"}, ws)
	if au == nil || len(au.open) == 0 {
		t.Fatal("no audit of the workspace")
	}
	d := au.open[0]
	a := &Actor{phase: phaseConcluded}
	a.onDefLoaded(nil, &defLoaded{def: &agentdef.Def{Name: "a"}, audit: au})
	if au.open != nil {
		t.Error("the audit's directories are still held")
	}
	if err := d.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the workspace's descriptor was not closed (a second Close: %v)", err)
	}
}
