package sandbox

import (
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
)

// A git worktree's own git directories, bound read-only beside the
// workspace so git works in it and cannot be turned against the host.

// worktreeGitDirs binds read-only the git directories a worktree's ".git"
// file points to ("gitdir: DIR", then DIR/commondir), each at the path the
// sandbox resolves it to: its own host path, or under /workspace when it
// lies inside the workspace (which is bound writable).
//
// The workspace is writable by the agent, so ".git" may be agent data: a
// directory outside the workspace is bound only when it is a real worktree
// admin directory (<common>/worktrees/<name> whose "gitdir" file names this
// workspace's .git), its common dir is exactly <common>, and neither lies
// under CTX_ROOT. Files are read without following symlinks or blocking.
func worktreeGitDirs(l layout.Layout, workspace string) []bwrap.Mount {
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil
	}
	gitFile := filepath.Join(ws, ".git")
	b, err := readSmall(gitFile)
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	dir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return nil
	}
	dir = strings.TrimSpace(dir)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ws, dir)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil
	}
	inside := func(d, parent string) bool {
		rel, err := filepath.Rel(parent, d)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	root, err := filepath.EvalSymlinks(l.Root)
	if err != nil {
		root = l.Root
	}
	dirs := []string{dir}
	if !inside(dir, ws) {
		back, err := readSmall(filepath.Join(dir, "gitdir"))
		if err != nil || filepath.Base(filepath.Dir(dir)) != "worktrees" ||
			filepath.Clean(strings.TrimSpace(string(back))) != gitFile || inside(dir, root) {
			return nil
		}
		dirs = append(dirs, filepath.Dir(filepath.Dir(dir))) // the only common dir accepted
	} else if c, err := readSmall(filepath.Join(dir, "commondir")); err == nil {
		common := strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(dir, common)
		}
		if common, err = filepath.EvalSymlinks(common); err == nil && inside(common, ws) {
			dirs = append(dirs, common)
		}
	}
	var out []bwrap.Mount
	for _, d := range dirs {
		dst := d
		if inside(d, ws) {
			rel, _ := filepath.Rel(ws, d)
			dst = filepath.Join(layout.SandboxWorkspace, rel)
		} else if inside(d, root) {
			continue
		}
		out = append(out, bwrap.Mount{Src: d, Dst: dst, Try: true})
	}
	return out
}

// readSmall reads at most 4 KiB of a regular file without following a
// symlink in its last component and without blocking on a FIFO.
func readSmall(path string) ([]byte, error) {
	return safefs.ReadRegular(path, 4<<10)
}
