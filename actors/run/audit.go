package run

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/review"
	"github.com/cortexfs/ctx/internal/workspace"
)

// audit is what a run's writable host directories held at its start that
// runs code on the host (hooks, git config, repositories, granted
// protected names), compared at its end.
type audit struct {
	g     workspace.Grants
	label []string // how the warning names each: the workspace, then rw .d/mount sources
	snaps []*workspace.Snapshot
	// open: each directory as opened and checked at the start, compared
	// at the end through the same descriptor — the directory the run had,
	// even if its path now names another — and closed by changes (or
	// close, for a run that never concludes here).
	open []*workspace.Dir
	// readOnly: one warning per directory bound read-only for the run
	// because its protected paths could not all be found.
	readOnly []string
	// rev is the workspace's git snapshot at the start (review: what the
	// run changed, and its undo), saved in revDir; nil without git.
	rev    *review.Record
	revDir string
}

// takeReview records the workspace's git snapshot at a send run's start
// (internal/review), before its first step can write: the record is in
// the session at once, so `ctx agent diff` works while the run goes on.
// Outside a git work tree the session's private repository holds it (a
// too-large workspace gets a record saying why); with no git, nothing.
func (a *audit) takeReview(sessionDir, run, ws string, log *slog.Logger) {
	r, err := review.Start(context.Background(), sessionDir, run, ws)
	if err != nil {
		if !errors.Is(err, review.ErrNoRepo) {
			log.Warn("workspace snapshot not taken: no diff or undo for this run", "err", err)
		}
		return
	}
	if err := review.Save(sessionDir, r); err != nil {
		log.Warn("workspace snapshot not saved: no diff or undo for this run", "err", err)
		return
	}
	a.rev, a.revDir = &r, sessionDir
}

// endReview records the workspace as the run left it.
func (a *audit) endReview(log *slog.Logger) {
	if a.rev == nil {
		return
	}
	if err := a.rev.End(context.Background()); err != nil {
		log.Warn("workspace snapshot at the run's end not taken: diff shows the workspace as it is now", "err", err)
		return
	}
	if err := review.Save(a.revDir, *a.rev); err != nil {
		log.Warn("workspace snapshot at the run's end not saved", "err", err)
	}
}

// takeAudit snapshots the workspace and the writable mount sources. It
// walks directories: call it off the actor. nil when there is nothing.
func takeAudit(l layout.Layout, def *agentdef.Def, ws string) *audit {
	a := &audit{g: def.Protect}
	add := func(p, label string) {
		d, err := workspace.Open(p, workspace.Options{Layout: l, Grants: def.Protect, Homes: []string{}})
		if err != nil {
			return // refused or gone: the start fails on it, nothing to compare
		}
		a.open = append(a.open, d)
		a.label = append(a.label, label)
		// The same judgement the view makes when it binds the directory
		// (sandbox.View.build), so the run can say why it is read-only and
		// which grant lifts it. The view walks again at every sandbox start
		// and binds by its own walk.
		prot := workspace.Protect(d, def.Protect)
		if len(def.Protect.Writable) == 0 {
			// One walk for both: it found what the snapshot's would.
			a.snaps = append(a.snaps, workspace.TakeFound(d.File, def.Protect, prot.Found))
		} else {
			a.snaps = append(a.snaps, workspace.Take(d.File, def.Protect, d.Hide))
		}
		if w := prot.Warning(d, label, def.Name); w != "" {
			a.readOnly = append(a.readOnly, w)
		}
	}
	if ws != "" {
		add(ws, layout.SandboxWorkspace)
	}
	for _, m := range def.Mounts {
		if m.Write {
			add(m.Src, m.Dst)
		}
	}
	if len(a.open) == 0 {
		return nil
	}
	return a
}

// changes compares each directory with its snapshot, naming paths as the
// sandbox saw them; incomplete names the directories whose comparison a
// cut-short walk left partial (it is said, never taken for "nothing").
func (a *audit) changes() (changes, incomplete []string) {
	defer a.close()
	for i, d := range a.open {
		after := workspace.Take(d.File, a.g, d.Hide)
		changes = append(changes, a.snaps[i].Changes(after, a.label[i])...)
		if w := a.snaps[i].Incomplete(after, a.label[i]); w != "" {
			incomplete = append(incomplete, w)
		}
	}
	return changes, incomplete
}

// close closes the directories held since the start.
func (a *audit) close() {
	for _, d := range a.open {
		d.Close()
	}
	a.open = nil
}

// dropAudit closes the directories of an audit no run will take (the
// run stopped or concluded before its definition arrived).
func (m *defLoaded) dropAudit() {
	if m.audit != nil {
		m.audit.close()
		m.audit = nil
	}
}
