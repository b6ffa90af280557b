package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/envelope"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/cortexfs/ctx/internal/chatview"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/ipc"
)

// SendCmd is `ctx agent send`: non-interactive, streams assistant deltas. spec: S4
type SendCmd struct {
	Name    string   `arg:"" help:"Agent name."`
	Session string   `default:"default" help:"Session name."`
	Scope   string   `default:"private" enum:"private,shared" help:"private or shared."`
	ID      string   `help:"Request id (a repeated id replays the stored result)."`
	JSON    bool     `name:"json" help:"Print the raw frames."`
	Approve []string `name:"approve" sep:"," placeholder:"TOOL" help:"Without a terminal to ask (CI): allow the calls of these tools once each when an ask agent asks (the tool name as the question names it: bash, read, SERVER.TOOL; * for every tool); every other call is denied. Each decision is printed on stderr and recorded as an approval frame."`
	Input   []string `arg:"" help:"Message words; - reads stdin."`
}

type sendReq = client.Request

func (c *SendCmd) Run(env *Env) error {
	input := strings.Join(c.Input, " ")
	if len(c.Input) == 1 && c.Input[0] == "-" {
		b, err := io.ReadAll(io.LimitReader(env.Stdin, ipc.MaxInput+1))
		if err != nil {
			return err
		}
		input = string(b)
	}
	id := c.ID
	if id == "" {
		id = client.NewID("msg")
	}
	conn, err := connect(env, c.Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	wd, _ := os.Getwd()
	var images []ipc.Image
	if len(c.Input) != 1 || c.Input[0] != "-" { // words typed, not a piped text: @path attaches a workspace file, a pasted image path the image
		if input, images, err = prepareInput(env.Layout, c.Name, c.Scope, c.Session, input, wd); err != nil {
			return Exit(ExitUsage, err)
		}
	}
	req := sendReq{Op: ipc.OpSend, ID: id, Session: c.Session, Scope: c.Scope, Workspace: wd, Input: &input, Images: images}
	ask := newAsker(env)
	if len(c.Approve) > 0 {
		ask = &asker{policy: c.Approve, log: env.Stderr}
	}
	return stream(env, c.Name, conn, req, c.JSON, ask)
}

// stream sends a send/tsh request and renders its frames until done.
// SIGINT cancels the run (the frames then end with cancelled and done).
//
// A connection dropped mid-run (slow_client, or ended) is followed again
// (client.Follower).
func stream(env *Env, agent string, conn *client.Conn, req sendReq, raw bool, ask *asker) error {
	fw, err := client.Follow(env.Ctx, conn, req, redialer(env, agent))
	if err != nil {
		return Exit(ExitUnavailable, err)
	}
	defer fw.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	var run string
	printed, endsNL, cancelSent := false, false, false
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	// A send on a terminal is rendered (chatview); a tsh
	// op, --json, a pipe or NO_COLOR print exactly the plain output.
	var view *chatview.View
	var tick <-chan time.Time
	if ok, width := prettyOut(env); ok && !raw && req.Op == ipc.OpSend {
		if v, err := newView(env, width, false); err == nil {
			view = v
			t := time.NewTicker(chatview.TickEvery)
			defer t.Stop()
			tick = t.C
			view.Begin()
			ask.workspace, ask.color = req.Workspace, true
		}
	}
	for {
		var it client.Item
		select {
		case <-tick:
			view.Tick()
			continue
		case <-sig:
			if !cancelSent && run != "" {
				cancelSent = true
				_ = fw.Cancel(run)
				continue
			}
			if run == "" {
				return Exit(ExitCancelled, fmt.Errorf("interrupted"))
			}
			continue
		case it = <-fw.Items():
		}
		if it.Err != nil {
			out.Flush()
			return Exit(ExitUnavailable, it.Err)
		}
		f := it.Frame
		if raw {
			out.Write(it.Line)
			out.WriteByte('\n')
			out.Flush()
		}
		if f.Run != "" && run == "" && (f.Type == ipc.TypeUser || f.Type == ipc.TypeStart) {
			run = f.Run
		}
		if view != nil {
			if f.Type == ipc.TypeApprovalRequest && !f.Replay {
				view.Pause()
			}
			if f.Type != ipc.TypeApprovalRequest {
				view.Frame(f)
			}
			if err := view.Err(); err != nil {
				return Exit(ExitUnavailable, fmt.Errorf("writing the answer: %w", err))
			}
		}
		switch f.Type {
		case ipc.TypeDelta:
			if !raw && view == nil {
				out.WriteString(f.Text)
				out.Flush()
				if f.Text != "" {
					printed, endsNL = true, strings.HasSuffix(f.Text, "\n")
				}
			}
		case ipc.TypeAssistant:
			if view != nil {
				continue
			}
			if !raw && !printed && f.Text != "" {
				out.WriteString(f.Text)
				printed, endsNL = true, strings.HasSuffix(f.Text, "\n")
			}
			if !raw && printed && !endsNL {
				out.WriteString("\n") // what was printed ends the line (the assistant text may be cut)
			}
		case ipc.TypeToolResult:
			if !raw && req.Op == ipc.OpTsh {
				out.WriteString(f.Content)
			}
			if !raw && view == nil && f.Status == envelope.StatusDenied {
				fmt.Fprintf(env.Stderr, "ctx: tool %s denied: %s\n", f.Name, f.Content)
			}
		case ipc.TypeApprovalRequest:
			if f.Replay {
				continue
			}
			out.Flush()
			decision, why := ask.ask(f)
			if decision == "" { // Ctrl+C at the question: the run is cancelled, as the question says
				fmt.Fprintf(env.Stderr, "ctx: cancelling %s\n", f.Run)
				_ = fw.Cancel(f.Run)
				continue
			}
			if why != "" {
				fmt.Fprintln(env.Stderr, "ctx: "+why)
			}
			if decision == ipc.DecisionDeny && ask.reason != "" {
				_ = fw.Deny(f.Run, f.ID, ask.reason)
				ask.reason = ""
				break
			}
			_ = fw.Approve(f.Run, f.ID, decision)
		case ipc.TypeError:
			if !raw && view == nil {
				fmt.Fprintf(env.Stderr, "ctx: %s: %s\n", f.Code, f.Message)
			}
			if f.Run == "" {
				switch f.Code {
				case ipc.CodeBadRequest, ipc.CodeTooLarge, ipc.CodeIDConflict, ipc.CodeBadName, ipc.CodeUnknownAgent:
					return Exit(ExitUsage, nil)
				default:
					return Exit(ExitRunError, nil)
				}
			}
		case ipc.TypeDone:
			out.Flush()
			switch f.Status {
			case ipc.StatusOK:
				return nil
			case ipc.StatusCancelled:
				return Exit(ExitCancelled, nil)
			default:
				return Exit(ExitRunError, nil)
			}
		}
	}
}

// redialer dials agent again after a drop, without starting a daemon: one
// that went away is reported, not replaced.
func redialer(env *Env, agent string) func(context.Context) (*client.Conn, error) {
	return func(ctx context.Context) (*client.Conn, error) { return client.DialAgentOnce(ctx, env.Layout, agent) }
}

// asker asks the person at the terminal to approve a tool call (A2). With
// no terminal it fails closed.
type asker struct {
	tty *os.File
	err error
	// policy (--approve) answers without a terminal: the tools it names
	// are allowed once each, every other call denied; log hears each.
	policy []string
	log    io.Writer
	// reason is the last deny's reason (r at the question), for Deny.
	reason string
	// workspace and color are set when the output is rendered
	// the question then shows the change a write, edit or
	// apply_patch would make to the workspace, coloured.
	workspace string
	color     bool
	// rules are the calls allowed with a for the rest of this send.
	rules callRules
	// last is the request being asked about (for a).
	last *ipc.Frame
}

func newAsker(env *Env) *asker {
	if term.IsTerminal(int(env.Stdin.Fd())) {
		return &asker{tty: env.Stdin}
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return &asker{err: err}
	}
	return &asker{tty: tty}
}

func (a *asker) ask(f *ipc.Frame) (decision, why string) {
	if a.policy != nil {
		return a.byPolicy(f)
	}
	if a.tty == nil {
		return ipc.DecisionDeny, fmt.Sprintf("tool %s %q needs approval but there is no terminal to ask; denied", f.Name, f.Args)
	}
	if a.rules.answers(a.tty, "", f) {
		return ipc.DecisionAllowOnce, ""
	}
	a.last = f
	if m := f.MCP; m != nil {
		// Server, tool and arguments; the hints are the server's
		// claims, shown as such.
		hints := ""
		if m.ReadOnly {
			hints += " read-only"
		}
		if m.Destructive != nil && *m.Destructive {
			hints += " destructive"
		}
		if hints != "" {
			hints = "\n  the server says:" + hints + " (a hint, not a guarantee)"
		}
		fmt.Fprintf(a.tty, "\nctx: the agent wants to call tool %s of MCP server %s with arguments %s%s\nAllow once? (%s) ", m.Tool, m.Server, m.Arguments, hints, questionKeys)
	} else if a.color {
		fmt.Fprint(a.tty, chatview.Question(f.Name, f.Args, a.workspace, true))
	} else {
		fmt.Fprintf(a.tty, "\nctx: the agent wants to run tool %s with argv %q\nAllow once? (%s) ", f.Name, f.Args, questionKeys)
	}
	return a.key()
}

// key reads the answer as chat does (answerKey): one key, no Enter; what
// was typed before the question is flushed and answers nothing, keys
// typed on without a pause answer nothing; Ctrl+C returns "" (the caller
// cancels the run). Where the terminal cannot be made raw, a line: y or
// yes allows, anything else denies.
func (a *asker) key() (decision, why string) {
	fd := int(a.tty.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		line, err := bufio.NewReader(a.tty).ReadString('\n')
		if err != nil {
			return ipc.DecisionDeny, "no answer; denied"
		}
		if s := strings.ToLower(strings.TrimSpace(line)); s == "y" || s == "yes" {
			return ipc.DecisionAllowOnce, ""
		}
		return ipc.DecisionDeny, ""
	}
	defer term.Restore(fd, old)
	_ = unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
	shown := time.Now()
	var last time.Time
	b := make([]byte, 1)
	for {
		if n, err := a.tty.Read(b); err != nil || n == 0 {
			fmt.Fprint(a.tty, "\r\n")
			return ipc.DecisionDeny, "no answer; denied"
		}
		if b[0] == 3 {
			fmt.Fprint(a.tty, "^C\r\n")
			return "", ""
		}
		if d := answerKey(b[0], shown, last, time.Now()); d == denyReason {
			// The reason is a line: typed with the terminal's own editing.
			_ = term.Restore(fd, old)
			fmt.Fprint(a.tty, "deny — why (Enter sends it to the model): ")
			line, _ := bufio.NewReader(a.tty).ReadString('\n')
			a.reason = strings.TrimSpace(line)
			_, _ = term.MakeRaw(fd)
			return ipc.DecisionDeny, ""
		} else if d == allowRule {
			if a.rules == nil {
				a.rules = callRules{}
			}
			a.rules.add("", a.last)
			fmt.Fprintf(a.tty, "%s, and this same call again without asking in this send\r\n", ipc.DecisionAllowOnce)
			return ipc.DecisionAllowOnce, ""
		} else if d != "" {
			fmt.Fprintf(a.tty, "%s\r\n", d)
			return d, ""
		}
		last = time.Now()
	}
}

// ResumeCmd is `ctx agent resume`.
type ResumeCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
	Scope   string `default:"private" enum:"private,shared"`
	JSON    bool   `name:"json"`
}

func (c *ResumeCmd) Run(env *Env) error {
	conn, err := connect(env, c.Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	// A drop is followed again: the resume is sent again and what was
	// shown is skipped by seq (client.Follower).
	fw, err := client.Follow(env.Ctx, conn, client.Resume(c.Session, c.Scope), redialer(env, c.Name))
	if err != nil {
		return Exit(ExitUnavailable, err)
	}
	defer fw.Close()
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	var following string
	caught := false
	for it := range fw.Items() {
		if it.Err != nil {
			return Exit(ExitUnavailable, it.Err)
		}
		f, line := it.Frame, it.Line
		if c.JSON {
			out.Write(line)
			out.WriteByte('\n')
			out.Flush()
		} else {
			renderHistory(out, f)
		}
		switch {
		case f.Type == ipc.TypeCaughtUp:
			caught = true
			if f.ActiveRun == nil {
				return nil
			}
			following = *f.ActiveRun
		case f.Type == ipc.TypeError && f.Run == "":
			return Exit(ExitRunError, nil)
		case caught && f.Type == ipc.TypeDone && f.Run == following:
			return nil
		}
	}
	return nil // closed: not reached, the follower ends with an item
}

// renderHistory prints a frame for a person reading a session.
func renderHistory(w *bufio.Writer, f *ipc.Frame) {
	switch f.Type {
	case ipc.TypeUser:
		fmt.Fprintf(w, "> %s\n", f.Text)
		for _, im := range f.Images {
			fmt.Fprintf(w, "  %s\n", im.Line())
		}
	case ipc.TypeDelta:
		w.WriteString(f.Text)
	case ipc.TypeAssistant:
		w.WriteString("\n")
	case ipc.TypeToolCall:
		fmt.Fprintf(w, "\n[tool %s %s]\n", f.Name, strings.Join(f.Args, " "))
	case ipc.TypeToolResult:
		fmt.Fprintf(w, "[%s: %s]\n", f.Status, firstLine(f.Content))
	case ipc.TypeError:
		fmt.Fprintf(w, "\n[error %s: %s]\n", f.Code, f.Message)
	case ipc.TypeCancelled:
		w.WriteString("\n[cancelled]\n")
	}
	w.Flush()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// CancelCmd is `ctx agent cancel`.
type CancelCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
	Scope   string `default:"private" enum:"private,shared"`
	RunID   string `arg:"" optional:"" name:"run" help:"Run id (default: the session's active run)."`
}

func (c *CancelCmd) Run(env *Env) error {
	conn, err := connect(env, c.Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Send(client.Cancel(c.Session, c.Scope, c.RunID)); err != nil {
		return Exit(ExitUnavailable, err)
	}
	f, _, err := conn.Next()
	if err != nil {
		return Exit(ExitUnavailable, err)
	}
	if f.Type == ipc.TypeAck {
		fmt.Fprintf(env.Stdout, "cancelled %s\n", f.Run)
		return nil
	}
	return Exit(ExitRunError, fmt.Errorf("%s: %s", f.Code, f.Message))
}

// TshCmd is `ctx agent tsh` (the P2 "tsh" op).
type TshCmd struct {
	Name    string   `arg:"" help:"Agent name."`
	Session string   `default:"default"`
	ID      string   `help:"Request id."`
	JSON    bool     `name:"json"`
	Args    []string `arg:"" passthrough:"" help:"tsh arguments (after --)."`
}

func (c *TshCmd) Run(env *Env) error {
	args := c.Args
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return Exit(ExitUsage, fmt.Errorf("tsh needs arguments: ctx agent tsh %s -- list", c.Name))
	}
	id := c.ID
	if id == "" {
		id = client.NewID("tool")
	}
	conn, err := connect(env, c.Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	wd, _ := os.Getwd()
	return stream(env, c.Name, conn, sendReq{Op: ipc.OpTsh, ID: id, Session: c.Session, Workspace: wd, Args: args}, c.JSON, newAsker(env))
}

// byPolicy is --approve: the call's tool (an MCP call's SERVER.TOOL; a
// model's `tsh call NAME …` is NAME) allowed when the policy names it or
// holds *, else denied; each decision said on the log, with the call.
func (a *asker) byPolicy(f *ipc.Frame) (decision, why string) {
	tool, argv := chatview.Unwrap(f.Name, f.Args)
	if m := f.MCP; m != nil {
		tool, argv = m.Server+"."+m.Tool, []string{string(m.Arguments)}
	}
	d := ipc.DecisionDeny
	for _, p := range a.policy {
		if p == "*" || p == tool {
			d = ipc.DecisionAllowOnce
			break
		}
	}
	fmt.Fprintf(a.log, "ctx: --approve: %s %s\n", d, chatview.Label(tool, argv))
	return d, ""
}
