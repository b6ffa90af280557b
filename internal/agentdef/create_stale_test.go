package agentdef

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// A `ctx agent create --exec` that fails reading the executable must leave
// nothing behind that a later create of the same name inherits: here a stale
// .d/abi turned the next `create --model` into an executable agent whose
// "executable" is the model description text.
// spec: X1 V1
func TestCreateFailureLeavesNoControlFilesForTheNextCreate(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: 1000}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	unreadable := t.TempDir() // a directory: open succeeds, read fails
	if err := Create(l, "a", CreateOptions{Exec: unreadable, Tools: []string{"x"}}); err == nil {
		t.Fatal("create with an unreadable executable succeeded")
	}
	for _, c := range []string{"abi", "tools", "window"} {
		if _, err := os.Lstat(filepath.Join(l.AgentControl("a"), c)); err == nil {
			t.Errorf("failed create left .d/%s behind", c)
		}
	}
	if err := Create(l, "a", CreateOptions{Models: []string{"openai/gpt-4o"}}); err != nil {
		t.Fatal(err)
	}
	d, err := Load(l, "a")
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindModel || len(d.Tools) != 0 {
		t.Fatalf("create --model made kind %q tools %v: stale control files were inherited", d.Kind, d.Tools)
	}
}
