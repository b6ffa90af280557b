package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/workspace"
)

// BenchmarkBuild: a run start's mount preparation (View.Build: safe opens,
// the protected-path walk, placeholders, descriptors) on a workspace of
// 10,000 files and 50 nested repositories.
func BenchmarkBuild(b *testing.B) {
	dir := b.TempDir()
	l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: 1000}
	ws := filepath.Join(dir, "ws")
	for i := 0; i < 50; i++ {
		os.MkdirAll(filepath.Join(ws, "repos", strconv.Itoa(i), ".git", "hooks"), 0o755)
	}
	for i := 0; i < 10000; i++ {
		d := filepath.Join(ws, "src", strconv.Itoa(i/100), strconv.Itoa(i/10%10))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, strconv.Itoa(i)), nil, 0o644)
	}
	def := &agentdef.Def{Name: "a", Kind: agentdef.KindExec, Object: l.AgentObject("a"), CTXPath: l.DefaultCTXPath()}
	v := View{Layout: l, Def: def, Session: "s", Run: "r", Workspace: ws, Placeholders: workspace.NewRegistry()}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, h, err := v.Build([]string{"/x"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Files) < 60 {
			b.Fatalf("%d descriptors", len(s.Files))
		}
		h.Started()
		h.Ended()
	}
}

// BenchmarkBuildEmpty: View.Build on an empty workspace, where the
// placeholders of the 17 absent protected names are most of the work:
// created, bound (an absent source over each), removed at the end.
func BenchmarkBuildEmpty(b *testing.B) {
	dir := b.TempDir()
	l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: 1000}
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	def := &agentdef.Def{Name: "a", Kind: agentdef.KindExec, Object: l.AgentObject("a"), CTXPath: l.DefaultCTXPath()}
	v := View{Layout: l, Def: def, Session: "s", Run: "r", Workspace: ws, Placeholders: workspace.NewRegistry()}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, h, err := v.Build([]string{"/x"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Files) < len(workspace.Protected) {
			b.Fatalf("%d descriptors", len(s.Files))
		}
		h.Started()
		h.Ended()
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		b.Fatalf("placeholders left: %d", len(ents))
	}
}
