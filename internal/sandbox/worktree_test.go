package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
)

// A worktree's .git is a file naming its gitdir; that gitdir and its
// commondir are bound read-only too. spec: B1 D8
func TestWorktreeGitDirs(t *testing.T) {
	base := t.TempDir()
	main := filepath.Join(base, "main", ".git")
	gitdir := filepath.Join(main, "worktrees", "wt")
	os.MkdirAll(gitdir, 0o755)
	os.WriteFile(filepath.Join(gitdir, "commondir"), []byte("../..\n"), 0o644)
	ws := filepath.Join(base, "wt")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+gitdir+"\n"), 0o644)
	os.WriteFile(filepath.Join(gitdir, "gitdir"), []byte(filepath.Join(ws, ".git")+"\n"), 0o644)
	got := worktreeGitDirs(layout.Layout{Root: filepath.Join(base, "ctxroot")}, ws)
	want := []bwrap.Mount{{Src: gitdir, Dst: gitdir, Try: true}, {Src: main, Dst: main, Try: true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("mounts %+v, want %+v", got, want)
	}
	// A gitdir inside the workspace is bound read-only at its /workspace path.
	ws2 := filepath.Join(base, "ws2")
	os.MkdirAll(filepath.Join(ws2, "gd"), 0o755)
	os.WriteFile(filepath.Join(ws2, ".git"), []byte("gitdir: gd\n"), 0o644)
	if got := worktreeGitDirs(layout.Layout{Root: filepath.Join(base, "ctxroot")}, ws2); len(got) != 1 || got[0].Dst != "/workspace/gd" || got[0].Write {
		t.Errorf("inside gitdir: %+v", got)
	}
	if got := worktreeGitDirs(layout.Layout{Root: filepath.Join(base, "ctxroot")}, base); got != nil {
		t.Errorf("no .git: %+v", got)
	}
}
