package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/cortexfs/ctx/internal/chatview"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/prices"
	"github.com/cortexfs/ctx/internal/sessions"
	terminal "github.com/cortexfs/ctx/internal/termres"
	"github.com/cortexfs/ctx/ipc"
)

// Finding sessions. `sessions` and `history` read the
// session logs as plain files, read-only, and never start the daemon;
// they only ask whether one answers, which decides between the live
// states (idle, running, waiting-approval) and the passivated ones.

// SessionsCmd is `ctx agent sessions`.
type SessionsCmd struct {
	Name string `arg:"" help:"Agent name."`
	JSON bool   `name:"json" help:"One JSON object per session."`
}

// Help is the long help of `ctx agent sessions --help`.
func (c *SessionsCmd) Help() string {
	return `Every session of the agent, private and shared, the most recently active
first: scope, state, number of runs, last activity, tokens (where done frames
carry usage) and the first user message as a title. Read from the logs; the
daemon is not started.

States: idle · running · waiting-approval (a tool call waits for an answer) ·
passivated (no daemon is running: the session is its files alone) ·
interrupted (no daemon, and the log ends inside a run, which the daemon
concludes as interrupted when it next starts).`
}

func (c *SessionsCmd) Run(env *Env) error {
	l := env.Layout
	if err := layout.CheckName("agent", c.Name); err != nil {
		return Exit(ExitUsage, err)
	}
	up := client.Ping(env.Ctx, l) == nil
	list, err := sessions.List(l, c.Name, up)
	if err != nil {
		return err
	}
	if len(list) == 0 && !client.AgentExists(l, c.Name) {
		return Exit(ExitUsage, fmt.Errorf("no such agent: %s", c.Name))
	}
	table, err := prices.Load(prices.Path(l))
	if err != nil {
		return Exit(ExitUsage, err)
	}
	for i := range list {
		s := &list[i]
		if s.UsageRuns > 0 && s.UnattributedRuns == 0 && table != nil {
			if usd, ok := table.CostByModel(s.UsageByModel); ok {
				s.CostUSD = &usd
			}
		}
	}
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	if c.JSON {
		for _, s := range list {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			out.Write(append(b, '\n'))
		}
		return out.Flush()
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// COST only with a price table (prices.tsv): without one the table
	// is as it always was.
	cost := table != nil
	if cost {
		fmt.Fprintln(tw, "SESSION\tSCOPE\tSTATE\tRUNS\tLAST ACTIVITY\tTOKENS\tCOST\tTITLE")
	} else {
		fmt.Fprintln(tw, "SESSION\tSCOPE\tSTATE\tRUNS\tLAST ACTIVITY\tTOKENS\tTITLE")
	}
	for _, s := range list {
		state := s.State
		if s.Approval != nil && s.State == sessions.StateWaitingApproval {
			state += " (" + sessions.Clean(sessions.Command(s.Approval.Name, s.Approval.Args)) + ")"
		}
		costCell := ""
		if cost {
			costCell = "-\t"
			if s.CostUSD != nil {
				costCell = prices.Format(*s.CostUSD) + "\t"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s%s\n", s.Session, s.Scope, state, s.Runs, localTime(s.LastActivity), tokensCell(s.Usage), costCell, dash(s.Title))
	}
	return tw.Flush()
}

// localTime shows a frame's ts in the local zone, to the minute.
func localTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return dash(ts)
	}
	return t.Local().Format("2006-01-02 15:04")
}

// tokensCell is "INPUT/OUTPUT" from the usage keys that name them (input,
// input_tokens, …), or every key when none does, or "-" without usage.
// --json has every key.
func tokensCell(u map[string]int64) string {
	if len(u) == 0 {
		return "-"
	}
	var in, out int64
	found := false
	keys := make([]string, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case k == "input" || k == "input_tokens":
			in, found = in+u[k], true
		case k == "output" || k == "output_tokens":
			out, found = out+u[k], true
		}
	}
	if !found {
		return sessions.UsageText(u)
	}
	return strconv.FormatInt(in, 10) + "/" + strconv.FormatInt(out, 10)
}

// HistoryCmd is `ctx agent history`.
type HistoryCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default" help:"Session name."`
	Scope   string `default:"private" enum:"private,shared" help:"private or shared."`
	JSON    bool   `name:"json" help:"One JSON object per transcript entry (kind: run user tool assistant partial error cancelled warning candidate done open)."`
	Full    bool   `name:"full" help:"Each tool call's whole stored result below its line (16 KiB at most each, as stored), not only its first line."`
}

// Help is the long help of `ctx agent history --help`.
func (c *HistoryCmd) Help() string {
	return `The session's transcript: each run's user message, its tool calls with
their status and the first line of their result, and the answer. Read from
events.jsonl as a plain file (read-only, in bounded memory); the daemon is
not started. Control characters in stored text are shown as U+FFFD.`
}

func (c *HistoryCmd) Run(env *Env) error {
	l := env.Layout
	if err := checkSession(c.Name, c.Session); err != nil {
		return err
	}
	dir := l.SessionDir(c.Name, c.Scope, c.Session)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return Exit(ExitUsage, fmt.Errorf("agent %s has no %s session %q (list them: ctx agent sessions %s)", c.Name, c.Scope, c.Session, c.Name))
	}
	up := client.Ping(env.Ctx, l) == nil
	table, err := prices.Load(prices.Path(l))
	if err != nil {
		return Exit(ExitUsage, err)
	}
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	tw := &sessions.TextWriter{W: out, Full: c.Full}
	if ok, width := prettyOut(env); ok && !c.JSON {
		if md, err := chatview.NewMarkdown(width); err == nil {
			tw.Markdown = md.Render
		}
	}
	var werr error
	emit := func(e sessions.Entry) {
		if e.Kind == sessions.KindDone && len(e.Usage) > 0 && table != nil {
			if usd, ok := table.CostByModel(e.UsageByModel); ok {
				e.CostUSD = &usd
			}
		}
		if !c.JSON {
			tw.Write(e)
			return
		}
		b, err := json.Marshal(e)
		if err == nil {
			_, err = out.Write(append(b, '\n'))
		}
		if werr == nil {
			werr = err
		}
	}
	t := &sessions.Transcript{Emit: emit}
	st, err := sessions.ScanDir(dir, t.Frame)
	if err != nil {
		return err
	}
	t.End(up)
	if st.Skipped > 0 {
		fmt.Fprintf(env.Stderr, "ctx: %d unreadable line(s) of %s skipped\n", st.Skipped, dir)
	}
	if err := errors.Join(werr, tw.Err()); err != nil {
		return err
	}
	return out.Flush()
}

// RmSessionCmd is `ctx agent rm-session`.
type RmSessionCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `arg:"" help:"Session name."`
	Scope   string `default:"private" enum:"private,shared" help:"private or shared."`
}

// Help is the long help of `ctx agent rm-session --help`.
func (c *RmSessionCmd) Help() string {
	return `Removes a session's files. Refused while a run of the session is active or
waiting (cancel it first) and while its terminal is live (stop it first).
With a daemon running, the daemon itself checks and removes (it holds the
log); without one, ctx removes the files. Either way the directory is first
renamed into the scope's session/.trash/ (one atomic rename: the session
vanishes whole) and then deleted; a crash in between leaves it in .trash,
which the next removal empties.`
}

func (c *RmSessionCmd) Run(env *Env) error {
	l := env.Layout
	if err := checkSession(c.Name, c.Session); err != nil {
		return err
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
	if client.Ping(env.Ctx, l) == nil && client.AgentExists(l, c.Name) {
		// The daemon holds the session's log: only it may close and remove it.
		if err := c.viaDaemon(env, what); err != nil {
			return err
		}
	} else if err := sessions.Remove(l, c.Name, c.Scope, c.Session); err != nil {
		if errors.Is(err, sessions.ErrNotFound) {
			return Exit(ExitUsage, fmt.Errorf("no %s", what))
		}
		return err
	}
	fmt.Fprintf(env.Stdout, "removed %s\n", what)
	return nil
}

func (c *RmSessionCmd) viaDaemon(env *Env, what string) error {
	return sessionOp(env, c.Name, c.Session, c.Scope, what, client.Remove(c.Session, c.Scope), func(msg string) error {
		return Exit(ExitUnavailable, fmt.Errorf("remove %s: the running daemon does not know this request (%s); restart it", what, msg))
	})
}

// sessionOp sends req — a remove or rename of an idle session — to the
// daemon, which holds the session's log, and waits for its ack; badRequest
// says what a bad_request answer means for this op.
func sessionOp(env *Env, agent, session, scope, what string, req client.Request, badRequest func(msg string) error) error {
	conn, err := client.DialAgent(env.Ctx, env.Layout, agent)
	if err != nil {
		return Exit(ExitUnavailable, err)
	}
	defer conn.Close()
	if err := conn.Send(req); err != nil {
		return Exit(ExitUnavailable, err)
	}
	for {
		f, _, err := conn.Next()
		if err != nil {
			return Exit(ExitUnavailable, fmt.Errorf("%s %s: %w", req.Op, what, err))
		}
		switch {
		case f.Type == ipc.TypeAck && f.Op == req.Op:
			return nil
		case f.Type != ipc.TypeError:
			continue
		case f.Code == ipc.CodeBusy:
			return Exit(ExitRunError, fmt.Errorf("%s: %s (ctx agent cancel %s --session %s --scope %s)", what, f.Message, agent, session, scope))
		case f.Code == ipc.CodeNotFound:
			return Exit(ExitUsage, fmt.Errorf("no %s", what))
		case f.Code == ipc.CodeBadRequest:
			return badRequest(f.Message)
		default:
			return Exit(ExitRunError, fmt.Errorf("%s %s: %s: %s", req.Op, what, f.Code, f.Message))
		}
	}
}

func checkSession(agent, session string) error {
	if err := layout.CheckName("agent", agent); err != nil {
		return Exit(ExitUsage, err)
	}
	if err := layout.CheckName("session", session); err != nil {
		return Exit(ExitUsage, err)
	}
	return nil
}
