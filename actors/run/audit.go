package run

import (
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/workspace"
)

// audit is what a run's writable host directories held at its start that
// runs code on the host (hooks, git config, repositories, granted
// protected names), compared at its end (issue 11).
type audit struct {
	l     layout.Layout
	g     workspace.Grants
	dirs  []string // host paths: the workspace, then rw .d/mount sources
	label []string // how the warning names each
	snaps []*workspace.Snapshot
}

// takeAudit snapshots the workspace and the writable mount sources. It
// walks directories: call it off the actor. nil when there is nothing.
func takeAudit(l layout.Layout, def *agentdef.Def, ws string) *audit {
	a := &audit{l: l, g: def.Protect}
	add := func(p, label string) {
		d, err := workspace.Open(p, workspace.Options{Layout: l, Grants: def.Protect, Homes: []string{}})
		if err != nil {
			return // refused or gone: the start fails on it, nothing to compare
		}
		defer d.Close()
		a.dirs = append(a.dirs, p)
		a.label = append(a.label, label)
		a.snaps = append(a.snaps, workspace.Take(d.File, def.Protect, d.Hide))
	}
	if ws != "" {
		add(ws, layout.SandboxWorkspace)
	}
	for _, m := range def.Mounts {
		if m.Write {
			add(m.Src, m.Dst)
		}
	}
	if len(a.dirs) == 0 {
		return nil
	}
	return a
}

// changes compares each directory with its snapshot, naming paths as the
// sandbox saw them.
func (a *audit) changes() []string {
	var out []string
	for i, p := range a.dirs {
		d, err := workspace.Open(p, workspace.Options{Layout: a.l, Grants: a.g, Homes: []string{}})
		if err != nil {
			continue
		}
		after := workspace.Take(d.File, a.g, d.Hide)
		d.Close()
		out = append(out, a.snaps[i].Changes(after, a.label[i])...)
	}
	return out
}
