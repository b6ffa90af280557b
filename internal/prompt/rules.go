package prompt

import (
	"errors"
	"fmt"
	"github.com/cortexfs/ctx/internal/pathin"
	"io/fs"
	"path/filepath"
	"strings"
)

// Rules discovery, as Codex users expect (spec: R1):
//
//   - global: CTX_HOME/AGENTS.md;
//   - then the project chain: from the repository root — the nearest ancestor
//     of the session cwd, inside the workspace, that holds a `.git` entry —
//     down to the cwd, one file per directory. Without a workspace, with a cwd
//     outside it, or without `.git`, the chain is the cwd alone.
//
// In each directory AGENTS.override.md is taken instead of AGENTS.md when it
// exists. Each file is capped at RulesFileCap bytes (cut with a visible marker
// and a warning); empty files are skipped. Files are merged most general
// first, each under a header naming its path as the agent sees it. Symlinked
// rule files are not followed (a workspace must not be able to pull a
// private file into the prompt). The search never leaves the workspace, so
// the prompt only holds files the agent's view can see too.
const RulesFileCap = 32 << 10

// ruleFileNames are tried in this order in each directory; the first present wins.
var ruleFileNames = []string{"AGENTS.override.md", "AGENTS.md"}

// projectChain lists the directories whose rule files apply, root first.
func projectChain(fsys fileSystem, cwd, workspace string) []string {
	cwd = filepath.Clean(cwd)
	if workspace == "" || !within(cwd, filepath.Clean(workspace)) {
		return []string{cwd}
	}
	ws := filepath.Clean(workspace)
	var up []string // cwd, parent, ..., ws
	for d := cwd; ; d = filepath.Dir(d) {
		up = append(up, d)
		if d == ws || d == filepath.Dir(d) {
			break
		}
	}
	for i, d := range up {
		if _, err := fsys.lstat(filepath.Join(d, ".git")); err == nil {
			chain := make([]string, 0, i+1)
			for j := i; j >= 0; j-- {
				chain = append(chain, up[j])
			}
			return chain
		}
	}
	return []string{cwd}
}

// within reports whether p is dir or below it (both clean).
func within(p, dir string) bool {
	return pathin.Inside(p, dir)
}

// collectRules returns {{rules}}: the merged rule files.
func collectRules(fsys fileSystem, in *Inputs) (text string, warnings []string) {
	var dirs []string
	if in.CtxHome.Host != "" {
		dirs = append(dirs, in.CtxHome.Host)
	}
	if in.Cwd != "" {
		dirs = append(dirs, projectChain(fsys, in.Cwd, in.Workspace.Host)...)
	}
	var parts []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			continue // CTX_HOME can also be the cwd
		}
		seen[d] = true
		for _, name := range ruleFileNames {
			host := filepath.Join(d, name)
			b, truncated, err := readBounded(fsys, host, RulesFileCap, true)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			view := in.viewPath(host)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("rules: %s: skipped: %v", view, err))
				break
			}
			body := strings.ToValidUTF8(string(b), "\uFFFD")
			if truncated {
				m := fmt.Sprintf("\n[… %s is longer than %d bytes; cut by ctx]", view, RulesFileCap)
				body = cutUTF8(body, RulesFileCap-len(m)) + m
				warnings = append(warnings, fmt.Sprintf("rules: %s: larger than %d bytes; cut", view, RulesFileCap))
			}
			body = strings.TrimRight(body, "\n")
			if strings.TrimSpace(body) != "" {
				parts = append(parts, "# AGENTS.md: "+view+"\n\n"+body)
			}
			break
		}
	}
	return strings.Join(parts, "\n\n"), warnings
}
