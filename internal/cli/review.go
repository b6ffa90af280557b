package cli

import (
	"errors"
	"fmt"

	"github.com/cortexfs/ctx/internal/review"
)

// DiffCmd is `ctx agent diff`: what a run changed in its workspace.
type DiffCmd struct {
	Name    string `arg:"" help:"Agent name."`
	RunID   string `arg:"" optional:"" name:"run" help:"Run id (default: the session's last run with a snapshot)."`
	Session string `default:"default" help:"Session name."`
	Scope   string `default:"private" enum:"private,shared" help:"private or shared."`
}

// Help is the long help of `ctx agent diff --help`.
func (c *DiffCmd) Help() string {
	return `A unified diff of what the run changed in its workspace — by any tool, bash
included: the workspace as the run found it against the workspace as it left
it (as it is now, while the run goes on). Recorded for a send run whose
workspace is in a git work tree, as git tree objects written through a
private index into the session's own object store (nothing of the
repository is written); files .gitignore excludes are not recorded. Undo it with
ctx agent undo.`
}

func (c *DiffCmd) Run(env *Env) error {
	r, err := loadReview(env, c.Name, c.Session, c.Scope, c.RunID)
	if err != nil {
		return err
	}
	return review.Diff(env.Ctx, r, env.Stdout)
}

// UndoCmd is `ctx agent undo`: put a run's workspace changes back.
type UndoCmd struct {
	Name    string `arg:"" help:"Agent name."`
	RunID   string `arg:"" optional:"" name:"run" help:"Run id (default: the session's last run with a snapshot)."`
	Session string `default:"default" help:"Session name."`
	Scope   string `default:"private" enum:"private,shared" help:"private or shared."`
}

// Help is the long help of `ctx agent undo --help`.
func (c *UndoCmd) Help() string {
	return `Put back the files the run changed (ctx agent diff shows them) as they were
before it: a file it added is removed, one it changed or deleted is written
again byte for byte with its mode. Refused, changing nothing, when one of
them changed again since the run ended — undo would lose that work.`
}

func (c *UndoCmd) Run(env *Env) error {
	r, err := loadReview(env, c.Name, c.Session, c.Scope, c.RunID)
	if err != nil {
		return err
	}
	cs, err := review.Undo(env.Ctx, r)
	if errors.Is(err, review.ErrChangedSince) {
		return Exit(ExitRunError, err)
	}
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		fmt.Fprintf(env.Stdout, "run %s changed nothing in %s\n", r.Run, r.Workspace)
		return nil
	}
	for _, ch := range cs {
		what := map[string]string{"A": "removed", "M": "restored", "D": "restored", "T": "restored"}[ch.Status]
		fmt.Fprintf(env.Stdout, "%s %s\n", what, ch.Rel)
	}
	fmt.Fprintf(env.Stdout, "undid run %s in %s (%d files)\n", r.Run, r.Workspace, len(cs))
	return nil
}

func loadReview(env *Env, agent, session, scope, run string) (review.Record, error) {
	if err := checkSession(agent, session); err != nil {
		return review.Record{}, err
	}
	r, err := review.Load(env.Layout.SessionDir(agent, scope, session), run)
	if errors.Is(err, review.ErrNone) {
		return r, Exit(ExitUsage, fmt.Errorf("%w (a snapshot is taken for a send run whose workspace is in a git work tree)", err))
	}
	return r, err
}
