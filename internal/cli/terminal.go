package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/layout"
	terminal "github.com/cortexfs/ctx/internal/termres"
	"github.com/cortexfs/ctx/ipc"
)

// StartCmd is `ctx agent start`: start the agent's persistent terminal
// (T1) with the current directory (or --cwd) bound at /workspace (B1).
type StartCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
	Cwd     string `help:"Directory bound at /workspace (default: the current directory)."`
}

func (c *StartCmd) Run(env *Env) error {
	st, already, err := startTerminal(env, c.Name, c.Session, c.Cwd)
	if err != nil {
		return err
	}
	verb := "started"
	if already {
		verb = "already running"
	}
	fmt.Fprintf(env.Stdout, "terminal %s %s/%s %s (%s launcher, pid %d)\n", st.ID, st.Agent, st.Session, verb, st.Launcher, st.PID)
	fmt.Fprintf(env.Stdout, "attach: ctx agent attach %s --session %s   (detach: Ctrl-\\)\n", st.Agent, st.Session)
	return nil
}

// StopCmd is `ctx agent stop`.
type StopCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
	Cwd     string `help:"Accepted for symmetry with start; ignored." hidden:""`
}

func (c *StopCmd) Run(env *Env) error {
	if err := checkNames(env, c.Name, c.Session); err != nil {
		return err
	}
	reply, err := terminalOp(env, ipc.TerminalRequest{Op: ipc.OpTerminalStop, Agent: c.Name, Session: c.Session})
	if err != nil {
		return err
	}
	if reply.Type == ipc.TypeError {
		if reply.Code == ipc.CodeNotRunning {
			// Stopping what is not running is done, as with systemctl stop.
			fmt.Fprintf(env.Stderr, "ctx: no live terminal for %s/%s\n", c.Name, c.Session)
			return nil
		}
		return replyError(reply)
	}
	cl := reply.Cleanup
	status := "unknown"
	if cl != nil && cl.Status != nil {
		status = strconv.Itoa(*cl.Status)
	}
	if cl != nil {
		fmt.Fprintf(env.Stdout, "terminal %s %s/%s stopped (generation %d, status %s)\n", cl.Terminal, c.Name, c.Session, cl.Generation, status)
	}
	return nil
}

// WatchCmd is `ctx agent watch` and `ctx terminal watch`: read-only (S5).
type WatchCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
}

func (c *WatchCmd) Run(env *Env) error { return join(env, c.Name, c.Session, ctxterm.ModeWatch) }

// AttachCmd is `ctx agent attach` and `ctx terminal attach`: read-write (S5).
type AttachCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
}

func (c *AttachCmd) Run(env *Env) error { return join(env, c.Name, c.Session, ctxterm.ModeAttach) }

// TerminalCreateCmd is `ctx terminal create` (spec: S1): start the agent session's
// terminal and record the resource; prints the resource id.
type TerminalCreateCmd struct {
	Agent   string `arg:"" help:"Agent name."`
	Session string `default:"default"`
}

func (c *TerminalCreateCmd) Run(env *Env) error {
	st, _, err := startTerminal(env, c.Agent, c.Session, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, st.ID)
	return nil
}

// TerminalStatusCmd is `ctx terminal status`: read from the resource files
// and receipts alone (no daemon needed).
type TerminalStatusCmd struct {
	Agent   string `arg:"" optional:"" help:"Agent name (default: all)."`
	Session string `arg:"" optional:"" help:"Session name (default: all)."`
	JSON    bool   `help:"One JSON object per terminal."`
}

func (c *TerminalStatusCmd) Run(env *Env) error {
	l := env.Layout
	var keys [][2]string
	switch {
	case c.Agent != "" && c.Session != "":
		if err := checkNames(env, c.Agent, c.Session); err != nil {
			return err
		}
		keys = [][2]string{{c.Agent, c.Session}}
	case c.Agent != "":
		if err := layout.CheckName("agent", c.Agent); err != nil {
			return Exit(ExitUsage, err)
		}
		keys = terminal.List(l, c.Agent)
	default:
		keys = terminal.List(l, "")
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	if !c.JSON {
		fmt.Fprintln(tw, "AGENT\tSESSION\tID\tSTATE\tLAUNCHER\tPID\tCLIENTS\tSOCKET")
	}
	for _, k := range keys {
		st, err := terminal.Describe(l, k[0], k[1])
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return Exit(ExitUsage, fmt.Errorf("no terminal resource for %s/%s (start one with: ctx agent start %s --session %s)", k[0], k[1], k[0], k[1]))
			}
			return err
		}
		if c.JSON {
			b, _ := json.Marshal(st)
			fmt.Fprintln(env.Stdout, string(b))
			continue
		}
		pid, sock := "-", "-"
		if st.State == terminal.StateLive {
			pid, sock = strconv.Itoa(st.PID), st.ABISocket
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", st.Agent, st.Session, st.ID, st.State, dash(st.Launcher), pid, st.Clients, sock)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func checkNames(env *Env, agent, session string) error {
	if err := layout.CheckName("agent", agent); err != nil {
		return Exit(ExitUsage, err)
	}
	if err := layout.CheckName("session", session); err != nil {
		return Exit(ExitUsage, err)
	}
	return nil
}

// startTerminal asks the daemon (started if need be) to start the terminal.
func startTerminal(env *Env, agent, session, cwd string) (terminal.Status, bool, error) {
	if err := checkNames(env, agent, session); err != nil {
		return terminal.Status{}, false, err
	}
	if !client.AgentExists(env.Layout, agent) {
		return terminal.Status{}, false, Exit(ExitUsage, fmt.Errorf("no such agent: %s", agent))
	}
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return terminal.Status{}, false, Exit(ExitUsage, fmt.Errorf("current directory: %w", err))
		}
		cwd = wd
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return terminal.Status{}, false, Exit(ExitUsage, err)
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return terminal.Status{}, false, Exit(ExitUsage, fmt.Errorf("--cwd %s: not a directory", cwd))
	}
	reply, err := terminalOp(env, ipc.TerminalRequest{Op: ipc.OpTerminalStart, Agent: agent, Session: session, Workspace: cwd})
	if err != nil {
		return terminal.Status{}, false, err
	}
	if reply.Type == ipc.TypeError || reply.Status == nil {
		return terminal.Status{}, false, replyError(reply)
	}
	return *reply.Status, reply.Already, nil
}

func replyError(r *ipc.TerminalReply) error {
	err := fmt.Errorf("%s (%s)", r.Message, r.Code)
	switch r.Code {
	case ipc.CodeUnknownAgent, ipc.CodeBadRequest, ipc.CodeBadName, ipc.CodeAgentInvalid:
		return Exit(ExitUsage, err)
	}
	return Exit(ExitRunError, err)
}

// terminalOp sends one terminal op to the daemon's system socket.
func terminalOp(env *Env, req ipc.TerminalRequest) (*ipc.TerminalReply, error) {
	if err := client.EnsureDaemon(env.Ctx, env.Layout); err != nil {
		return nil, Exit(ExitUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(env.Ctx, 45*time.Second)
	defer cancel()
	conn, err := ipc.Dial(ctx, env.Layout.SystemSocket())
	if err != nil {
		return nil, Exit(ExitUnavailable, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, Exit(ExitUnavailable, err)
	}
	line, err := ipc.NewLineReader(conn).Next()
	if err != nil {
		return nil, Exit(ExitUnavailable, fmt.Errorf("%s: no answer from the daemon: %w", req.Op, err))
	}
	var reply ipc.TerminalReply
	if err := json.Unmarshal(line, &reply); err != nil {
		return nil, fmt.Errorf("%s: bad answer %.200q: %w", req.Op, line, err)
	}
	return &reply, nil
}

// join is watch and attach: the ABI path, then the runtime path (T4);
// exit 3 when neither answers. Ctrl-\ detaches.
func join(env *Env, agent, session string, mode ctxterm.Mode) error {
	if err := checkNames(env, agent, session); err != nil {
		return err
	}
	l := env.Layout
	paths := []string{terminal.ABISocket(l, agent, session), l.RuntimeTerminalSocket(agent, session)}
	var errs []error
	for _, p := range paths { // spec: T4
		status, err := ctxterm.RunClientWith(env.Ctx, p, mode, env.Stdin, env.Stdout, func() {
			what := "attached to"
			if mode == ctxterm.ModeWatch {
				what = "watching (read-only)"
			}
			fmt.Fprintf(env.Stderr, "[%s the terminal of %s/%s — detach: Ctrl-\\]\r\n", what, agent, session)
		})
		switch {
		case errors.Is(err, ctxterm.ErrUnavailable):
			errs = append(errs, err)
			continue
		case errors.Is(err, ctxterm.ErrDetached):
			fmt.Fprintf(env.Stderr, "\r\n[detached from %s/%s; the terminal keeps running]\r\n", agent, session)
			return nil
		case err != nil:
			return Exit(ExitUnavailable, fmt.Errorf("terminal %s/%s: %w", agent, session, err))
		}
		fmt.Fprintf(env.Stderr, "\r\n[the terminal of %s/%s exited with status %d]\r\n", agent, session, status)
		return nil
	}
	if _, err := os.Lstat(l.AgentObject(agent)); errors.Is(err, fs.ErrNotExist) {
		// Nothing answers and there is no such agent: say so, not which
		// sockets were tried (a removed agent's live terminal still
		// answers above).
		return Exit(ExitUsage, fmt.Errorf("no such agent %q (ctx agent list shows them)", agent))
	}
	return Exit(ExitUnavailable, fmt.Errorf("terminal socket unavailable for %s/%s: nothing answers at %s or %s (start it with: ctx agent start %s --session %s): %w",
		agent, session, paths[0], paths[1], agent, session, errors.Join(errs...)))
}
