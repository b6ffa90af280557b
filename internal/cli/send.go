package cli

import (
	"bufio"
	"fmt"
	"github.com/cortexfs/ctx/internal/envelope"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

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
	Input   []string `arg:"" help:"Message words; - reads stdin."`
}

type sendReq struct {
	Op        string   `json:"op"`
	ID        string   `json:"id,omitempty"`
	Session   string   `json:"session,omitempty"`
	Scope     string   `json:"scope,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	Input     *string  `json:"input,omitempty"`
	Args      []string `json:"args,omitempty"`
}

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
	req := sendReq{Op: ipc.OpSend, ID: id, Session: c.Session, Scope: c.Scope, Workspace: wd, Input: &input}
	return stream(env, c.Name, conn, req, c.JSON, newAsker(env))
}

// stream sends a send/tsh request and renders its frames until done.
// SIGINT cancels the run (the frames then end with cancelled and done).
//
// A connection dropped mid-run (slow_client, or ended) is followed again:
// see reattach.
func stream(env *Env, agent string, conn *client.Conn, req sendReq, raw bool, ask *asker) error {
	if err := conn.Send(req); err != nil {
		return Exit(ExitUnavailable, err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	l := newLink(conn)
	defer func() {
		l.stop()
		if l.conn != conn {
			l.conn.Close() // a reattach's; the caller closes conn
		}
	}()
	var run string
	var lastSeq int64 // the newest recorded frame handled: a reattach skips up to it
	reattached := 0   // reattaches since the last new frame
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
		var fe frameOrErr
		select {
		case <-tick:
			view.Tick()
			continue
		case <-sig:
			if !cancelSent && run != "" {
				cancelSent = true
				_ = l.conn.Send(map[string]string{"op": "cancel", "session": req.Session, "scope": req.Scope, "id": run})
				continue
			}
			if run == "" {
				return Exit(ExitCancelled, fmt.Errorf("interrupted"))
			}
			continue
		case fe = <-l.frames:
		}
		dropped := fe.err == nil && fe.f.Type == ipc.TypeError && fe.f.Run == "" && fe.f.Code == ipc.CodeSlowClient
		if fe.err != nil || dropped {
			out.Flush()
			why := fmt.Errorf("dropped by the daemon for not keeping up")
			if fe.err != nil {
				why = fe.err
			}
			if reattached >= maxReattach || fe.badFrame {
				return Exit(ExitUnavailable, fmt.Errorf("connection to the daemon lost before the run finished: %w", why))
			}
			reattached++
			nl, err := reattach(env, agent, l, req, cancelSent, run)
			if err != nil {
				return Exit(ExitUnavailable, fmt.Errorf("connection to the daemon lost before the run finished (%v), and it could not be followed again: %w", why, err))
			}
			l = nl
			continue
		}
		f := fe.f
		if f.Seq != 0 {
			if f.Seq <= lastSeq {
				continue // shown before the reattach
			}
			lastSeq, reattached = f.Seq, 0
		}
		if raw {
			out.Write(fe.line)
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
			if why != "" {
				fmt.Fprintln(env.Stderr, "ctx: "+why)
			}
			_ = l.conn.Send(map[string]string{"op": "approve", "run": f.Run, "id": f.ID, "decision": decision})
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

type frameOrErr struct {
	f        *ipc.Frame
	line     []byte
	err      error
	badFrame bool // the daemon sent a line that is not a frame
}

func readFrames(conn *client.Conn, out chan<- frameOrErr) { readFramesUntil(conn, out, nil) }

// readFramesUntil reads conn's frames into out until an error, or until
// done is closed.
func readFramesUntil(conn *client.Conn, out chan<- frameOrErr, done <-chan struct{}) {
	for {
		f, line, err := conn.Next()
		fe := frameOrErr{f: f, line: line, err: err, badFrame: err != nil && line != nil}
		select {
		case out <- fe:
		case <-done:
			return
		}
		if err != nil {
			return
		}
	}
}

// maxReattach bounds the reattaches in a row that bring no new frame.
const maxReattach = 5

// link is one connection that stream reads frames from.
type link struct {
	conn   *client.Conn
	frames chan frameOrErr
	done   chan struct{}
}

func newLink(conn *client.Conn) *link {
	l := &link{conn: conn, frames: make(chan frameOrErr, 64), done: make(chan struct{})}
	go readFramesUntil(conn, l.frames, l.done)
	return l
}

// stop ends the reader (the caller closes the connection it was given).
func (l *link) stop() { close(l.done) }

// reattach follows a request again after its connection was dropped (a
// client that fell behind a flood of frames gets slow_client) or ended:
// it dials the agent again — without starting a daemon: one that went away
// is reported, not replaced — and sends the same request. Its id replays
// what was recorded and then follows the live run (P4), so nothing runs
// twice; the caller skips the frames it already showed (seq). A cancel
// asked before the drop is asked again. spec: P4
func reattach(env *Env, agent string, old *link, req sendReq, cancelSent bool, run string) (*link, error) {
	old.stop()
	old.conn.Close()
	var conn *client.Conn
	var err error
	for i := 0; i < 10; i++ { // a daemon restarting under its unit comes back within a moment
		if conn, err = client.DialAgentOnce(env.Ctx, env.Layout, agent); err == nil {
			break
		}
		select {
		case <-env.Ctx.Done():
			return nil, env.Ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, err
	}
	if err := conn.Send(req); err != nil {
		conn.Close()
		return nil, err
	}
	if cancelSent && run != "" {
		_ = conn.Send(map[string]string{"op": "cancel", "session": req.Session, "scope": req.Scope, "id": run})
	}
	return newLink(conn), nil
}

// asker asks the person at the terminal to approve a tool call (A2). With
// no terminal it fails closed.
type asker struct {
	tty *os.File
	err error
	// workspace and color are set when the output is rendered
	// the question then shows the change a write, edit or
	// apply_patch would make to the workspace, coloured.
	workspace string
	color     bool
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
	if a.tty == nil {
		return ipc.DecisionDeny, fmt.Sprintf("tool %s %q needs approval but there is no terminal to ask; denied", f.Name, f.Args)
	}
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
		fmt.Fprintf(a.tty, "\nctx: the agent wants to call tool %s of MCP server %s with arguments %s%s\nAllow once? [y/N] ", m.Tool, m.Server, m.Arguments, hints)
	} else if a.color {
		fmt.Fprint(a.tty, chatview.Question(f.Name, f.Args, a.workspace, true))
	} else {
		fmt.Fprintf(a.tty, "\nctx: the agent wants to run tool %s with argv %q\nAllow once? [y/N] ", f.Name, f.Args)
	}
	line, err := bufio.NewReader(a.tty).ReadString('\n')
	if err != nil {
		return ipc.DecisionDeny, "no answer; denied"
	}
	if s := strings.ToLower(strings.TrimSpace(line)); s == "y" || s == "yes" {
		return ipc.DecisionAllowOnce, ""
	}
	return ipc.DecisionDeny, ""
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
	if err := conn.Send(map[string]string{"op": "resume", "session": c.Session, "scope": c.Scope}); err != nil {
		return Exit(ExitUnavailable, err)
	}
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	var following string
	caught := false
	for {
		f, line, err := conn.Next()
		if err != nil {
			return Exit(ExitUnavailable, err)
		}
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
}

// renderHistory prints a frame for a person reading a session.
func renderHistory(w *bufio.Writer, f *ipc.Frame) {
	switch f.Type {
	case ipc.TypeUser:
		fmt.Fprintf(w, "> %s\n", f.Text)
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
	if err := conn.Send(map[string]string{"op": "cancel", "session": c.Session, "scope": c.Scope, "id": c.RunID}); err != nil {
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
