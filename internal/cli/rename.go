package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sessions"
	terminal "github.com/cortexfs/ctx/internal/termres"
	"github.com/cortexfs/ctx/ipc"
)

// RenameSessionCmd is `ctx agent rename-session`.
type RenameSessionCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `arg:"" help:"The session's name."`
	New     string `arg:"" help:"Its new name."`
	Scope   string `default:"private" enum:"private,shared" help:"private or shared."`
}

// Help is the long help of `ctx agent rename-session --help`.
func (c *RenameSessionCmd) Help() string {
	return `Gives a session another name: one atomic rename of its directory, never over
an existing session. Refused while a run of the session is active or waiting
(cancel it first) and while its terminal is live (stop it first). With a
daemon running, the daemon closes the session's log and renames it; without
one, ctx renames the directory. The frames recorded before keep the name they
were recorded under.`
}

func (c *RenameSessionCmd) Run(env *Env) error {
	l := env.Layout
	if err := checkSession(c.Name, c.Session); err != nil {
		return err
	}
	if err := layout.CheckName("session", c.New); err != nil {
		return Exit(ExitUsage, err)
	}
	what := fmt.Sprintf("%s session %s of agent %s", c.Scope, c.Session, c.Name)
	if st, err := os.Lstat(l.SessionDir(c.Name, c.Scope, c.Session)); err != nil || !st.IsDir() {
		return Exit(ExitUsage, fmt.Errorf("no %s", what))
	}
	if c.Scope == layout.ScopePrivate {
		if ts, err := terminal.Describe(l, c.Name, c.Session); err == nil && ts.State == terminal.StateLive {
			return Exit(ExitRunError, fmt.Errorf("%s has a live terminal (pid %d); stop it first: ctx agent stop %s --session %s", what, ts.PID, c.Name, c.Session))
		}
	}
	var err error
	if client.Ping(env.Ctx, l) == nil && client.AgentExists(l, c.Name) {
		err = c.viaDaemon(env, what) // the daemon holds the session's log
	} else {
		err = sessions.Rename(l, c.Name, c.Scope, c.Session, c.New)
	}
	switch {
	case errors.Is(err, sessions.ErrExists):
		return Exit(ExitUsage, fmt.Errorf("rename %s: session %s exists", what, c.New))
	case errors.Is(err, sessions.ErrNotFound):
		return Exit(ExitUsage, fmt.Errorf("no %s", what))
	case err != nil:
		return err
	}
	fmt.Fprintf(env.Stdout, "renamed %s to %s\n", what, c.New)
	return nil
}

func (c *RenameSessionCmd) viaDaemon(env *Env, what string) error {
	req := client.Request{Op: ipc.OpRename, Session: c.Session, Scope: c.Scope, Args: []string{c.New}}
	return sessionOp(env, c.Name, c.Session, c.Scope, what, req, func(msg string) error {
		return Exit(ExitUsage, fmt.Errorf("rename %s: %s", what, msg))
	})
}
