package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/runprep"
)

// PromptCmd is `ctx agent prompt NAME [--session S]` (spec: R4): it renders
// the prompt the next run of the session would send, through the same
// runprep.Prepare the run calls, without a daemon. The input and time are
// shown as placeholders; the history and tool context are the session's.
type PromptCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default" help:"Session whose history and tool context are used."`
}

func (c *PromptCmd) Run(env *Env) error {
	if err := layout.CheckName("agent", c.Name); err != nil {
		return Exit(ExitUsage, err)
	}
	if err := layout.CheckName("session", c.Session); err != nil {
		return Exit(ExitUsage, err)
	}
	def, err := agentdef.Load(env.Layout, c.Name)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	sess := env.Layout.SessionDir(c.Name, layout.ScopePrivate, c.Session)
	in := runprep.Input{Layout: env.Layout, Def: def, Placeholders: true}
	if st, err := os.Stat(sess); err == nil && st.IsDir() {
		in.SessionDir = sess // snapshots (R5) only into a session that exists
	}
	if in.History, err = runprep.ReadHistory(sess); err != nil {
		fmt.Fprintf(env.Stderr, "ctx: warning: %v; history shown as a placeholder\n", err)
		in.HistoryAbsent = true
	}
	if in.ToolState, err = runprep.ToolState(sess); err != nil {
		fmt.Fprintf(env.Stderr, "ctx: warning: %v; tool context left empty\n", err)
	}
	// ctx sends the directory it runs in as the request's workspace.
	in.Workspace, _ = os.Getwd()

	p, err := runprep.Prepare(in)
	if err != nil {
		var we *runprep.WindowError
		if errors.As(err, &we) {
			for _, cand := range we.Candidates {
				if !cand.Usable && cand.Reason != "" {
					fmt.Fprintf(env.Stderr, "candidate %s: unusable: %s\n", cand.Model, cand.Reason)
				}
			}
		}
		if errors.Is(err, runprep.ErrLimitExceeded) {
			return Exit(ExitRunError, err) // a run would end in error (limit_exceeded)
		}
		return Exit(ExitUsage, err) // window_invalid, agent_invalid: fix the definition
	}
	if p.SnapshotErr != nil && !errors.Is(p.SnapshotErr, fs.ErrNotExist) {
		fmt.Fprintf(env.Stderr, "ctx: warning: %v\n", p.SnapshotErr)
	}
	return printPrompt(env, p)
}

// printPrompt writes the messages, the per-section sizes, the window, the
// warnings and the hash.
func printPrompt(env *Env, p *runprep.Prepared) error {
	out := &strings.Builder{}
	for i, m := range p.Prompt.Messages() {
		fmt.Fprintf(out, "=== message %d: %s ===\n%s\n", i+1, m.Role, strings.TrimSuffix(m.Content, "\n"))
		for _, im := range m.Images {
			fmt.Fprintln(out, im.Line()) // a reference, never the bytes
		}
	}
	out.WriteString("\n")
	fmt.Fprintf(out, "%-10s %10s\n", "section", "chars")
	for _, s := range p.Prompt.Sections {
		fmt.Fprintf(out, "%-10s %10d\n", s.Name, s.Chars)
	}
	out.WriteString("\n")
	model := ""
	if p.Model != "" {
		model = " (model " + p.Model + ")"
	}
	if p.Known {
		fmt.Fprintf(out, "window: %d tokens%s; input budget %d chars\n", p.Tokens, model, p.Prompt.BudgetChars)
	} else {
		fmt.Fprintf(out, "window: unknown%s; legacy sub-budgets apply\n", model)
	}
	for _, cand := range p.Skipped {
		fmt.Fprintf(out, "candidate %s: unusable: %s\n", cand.Model, cand.Reason)
	}
	if n := p.Prompt.HistoryOmitted; n > 0 {
		fmt.Fprintf(out, "history: %d older messages left out of the view (kept in the session)\n", n)
	}
	for _, w := range p.Prompt.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	fmt.Fprintf(out, "hash: %s\n", p.PromptHash())
	_, err := fmt.Fprint(env.Stdout, out.String())
	return err
}
