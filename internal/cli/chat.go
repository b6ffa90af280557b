package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/cortexfs/ctx/internal/chatview"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/lineedit"
	"github.com/cortexfs/ctx/internal/sessions"
	"github.com/cortexfs/ctx/ipc"
)

// ChatCmd is `ctx agent chat`: the human chat UI (S3, A5). On a terminal it
// is a line editor (internal/lineedit: a pasted text of many lines is one
// message, Alt+Enter or Ctrl+J a newline, no cut below the request's
// bound, the history kept across chats). The line editor is idle during a run, so the run's
// output never corrupts the input line: rendered (chatview) when
// stdout is a terminal and NO_COLOR is unset, else the answer buffered and
// printed whole when the run ends. Lines starting with / are chat
// commands (/help). Ctrl+C when
// idle (or Ctrl+D on an empty line) exits; during a run Ctrl+C cancels that
// run and returns to the prompt.
type ChatCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Session string `default:"default"`
	Scope   string `default:"private" enum:"private,shared"`
}

func (c *ChatCmd) Run(env *Env) error {
	conn, err := connect(env, c.Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	wd, _ := os.Getwd()
	// Each run is followed on a connection of its own (the first is conn),
	// across drops: client.Follower. follow starts one.
	first := conn
	var lost func(error) // set on a terminal: says the chat is dialing again
	follow := func(req sendReq) (*client.Follower, error) {
		cn := first
		first = nil
		if cn == nil {
			var err error
			if cn, err = connect(env, c.Name); err != nil {
				return nil, err
			}
		}
		fw, err := client.Follow(env.Ctx, cn, req, redialer(env, c.Name))
		if err != nil {
			cn.Close()
			return nil, Exit(ExitUnavailable, err)
		}
		if lost != nil {
			fw.OnLost(lost)
		}
		return fw, nil
	}
	mk := func(line string) sendReq {
		return sendReq{Op: ipc.OpSend, ID: client.NewID("chat"), Session: c.Session, Scope: c.Scope, Workspace: wd, Input: &line}
	}
	fd := int(env.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return c.plain(env, follow, mk)
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return c.plain(env, follow, mk)
	}
	defer term.Restore(fd, old)

	keys := newKeyRouter()
	rules := callRules{} // a at a question: this session's calls allowed again (keyed by session: /clear and /resume leave them behind)
	// The output while no message is being typed: the run's lines, the
	// commands' output (raw mode: "\n" needs its "\r").
	t := crlf{env.Stdout}
	ed := lineedit.New(keys, env.Stdout, c.Name+"> ", 80)
	ed.History = lineedit.LoadHistory(env.Layout.ChatHistory(c.Name))
	io.WriteString(env.Stdout, lineedit.EnablePaste)
	defer io.WriteString(env.Stdout, lineedit.DisablePaste)
	go func() { // the one stdin reader; it never blocks on a consumer, so Ctrl+C is always seen
		buf := make([]byte, 32<<10) // a paste arrives in few reads
		for {
			n, err := env.Stdin.Read(buf)
			if err != nil {
				keys.close()
				return
			}
			keys.feed(buf[:n])
		}
	}()
	// Rendered when stdout is a terminal and NO_COLOR is
	// unset; otherwise the plain lines below, as before.
	var view *chatview.View
	if ok, width := prettyOut(env); ok {
		if v, err := newView(env, width, true); err == nil {
			view = v
		}
	}
	lost = func(err error) {
		fmt.Fprintf(t, "\nconnection to the daemon lost (%v); following the run again when it is back…\n", err)
	}
	fmt.Fprintf(t, "chat with %s (session %s) — Ctrl+C cancels a run, Ctrl+C or Ctrl+D at the prompt exits, /help\n", c.Name, c.Session)
	for {
		if w, _, err := term.GetSize(fd); err == nil {
			ed.SetWidth(w)
		}
		line, err := ed.ReadLine()
		if err != nil {
			return nil // Ctrl+C or Ctrl+D while idle: leave (A5)
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") && !strings.Contains(line, "\n") && !pastedFile(line) {
			if c.command(env, t, strings.TrimSpace(line)) == errLeave {
				return nil
			}
			continue
		}
		typed := line
		if strings.HasPrefix(line, "//") {
			line = line[1:] // "//x" sends "/x"
		}
		// @path: a workspace file attached; an image (mentioned or its path
		// pasted) goes to the session's blob store and by reference.
		msg, images, err := prepareInput(env.Layout, c.Name, c.Scope, c.Session, line, wd)
		if err != nil {
			fmt.Fprintf(t, "%v\n", err)
			ed.Prefill(typed) // given back to edit, not lost
			continue
		}
		req := mk(msg)
		req.Images = images
		if err := fitsRequest(req); err != nil {
			fmt.Fprintf(t, "%v\n", err)
			ed.Prefill(typed) // given back to edit, not lost
			continue
		}
		keys.setIdle(false)
		fw, err := follow(req)
		if err != nil {
			return err
		}
		if view != nil {
			err = c.runRendered(env, view, t, fw, keys.run, keys, req.Workspace, rules)
		} else {
			err = c.runOnTerminal(t, fw, keys.run, keys, rules)
		}
		fw.Close()
		if err != nil {
			// The daemon is gone for longer than a restart takes: say so
			// and stay; the next message starts it again, and the run's
			// end is in its session (/history).
			fmt.Fprintf(t, "%v\nthe run's outcome is in the session: /history shows it; the next message starts the daemon again\n", err)
		}
		keys.setIdle(true)
	}
}

// chatHelp lists the chat commands.
const chatHelp = `/sessions            the agent's sessions (ctx agent sessions)
/history [SESSION]   this session's transcript, or another's (ctx agent history)
/resume SESSION      go on in another session (its transcript first)
/clear               start a new session (the old one is kept)
/tool [N]            the whole result of this session's last tool call, or the Nth of its last run
/diff [RUN]          what the last run (or RUN) changed in the workspace (ctx agent diff)
/undo [RUN]          put that back (ctx agent undo)
/model [MODEL]       the agent's model, or set it (ctx agent set AGENT model)
/approval [auto|ask] the agent's approval mode, or set it
/cancel              cancel this session's active run, from any client (ctx agent cancel)
/prompt              the exact prompt the next run sends (ctx agent prompt)
/exit, /quit         leave (Ctrl+C or Ctrl+D at the prompt too)
/help                this list
@path attaches a workspace file (64 KiB of text at most) or image (PNG,
JPEG, GIF or WebP by its bytes; 5 MiB at most); so does a pasted or
dragged image path. Images are sent by reference, not in the text.
A line starting with // sends the rest starting with /. Enter sends,
Alt+Enter or Ctrl+J starts a new line; a paste is one message. Ctrl+C
cancels a run; at a question y allows once, a allows once and the same
call again without asking (until the chat leaves this session), n denies,
r denies and says why, Ctrl+C cancels the run.
`

// errLeave is /exit's: the chat ends.
var errLeave = errors.New("leave")

// command runs a chat command with its output on the
// terminal; errors are shown, never fatal to the chat.
func (c *ChatCmd) command(env *Env, t io.Writer, line string) error {
	words := strings.Fields(line)
	sub := &Env{Ctx: env.Ctx, Layout: env.Layout, Stdin: env.Stdin, Stdout: t, Stderr: t}
	var err error
	switch words[0] {
	case "/exit", "/quit":
		return errLeave
	case "/clear":
		c.Session = "chat-" + time.Now().Format("20060102-150405")
		fmt.Fprintf(t, "\x1b[H\x1b[2J")
		fmt.Fprintf(t, "new session %s; the one before is kept (/resume NAME, ctx agent history)\n", c.Session)
	case "/resume":
		if len(words) < 2 {
			fmt.Fprintln(t, "/resume SESSION; the sessions:")
			err = (&SessionsCmd{Name: c.Name}).Run(sub)
			break
		}
		if err = layout.CheckName("session", words[1]); err != nil {
			break
		}
		c.Session = words[1]
		err = (&HistoryCmd{Name: c.Name, Session: c.Session, Scope: c.Scope}).Run(sub)
		fmt.Fprintf(t, "now in session %s\n", c.Session)
	case "/tool":
		err = c.showTool(env, t, words[1:])
	case "/diff", "/undo":
		run := ""
		if len(words) > 1 {
			run = words[1]
		}
		if words[0] == "/diff" {
			err = (&DiffCmd{Name: c.Name, RunID: run, Session: c.Session, Scope: c.Scope}).Run(sub)
		} else {
			err = (&UndoCmd{Name: c.Name, RunID: run, Session: c.Session, Scope: c.Scope}).Run(sub)
		}
	case "/model", "/approval":
		control := strings.TrimPrefix(words[0], "/")
		if len(words) > 1 {
			err = (&AgentSetCmd{Name: c.Name, Control: control, Value: strings.Join(words[1:], " ")}).Run(sub)
			if err == nil {
				fmt.Fprintf(t, "%s set: the next run uses it\n", control)
			}
			break
		}
		err = (&AgentGetCmd{Name: c.Name, Control: control}).Run(sub)
	case "/help", "/?":
		fmt.Fprint(t, chatHelp)
	case "/sessions":
		err = (&SessionsCmd{Name: c.Name}).Run(sub)
	case "/history":
		h := &HistoryCmd{Name: c.Name, Session: c.Session, Scope: c.Scope}
		if len(words) > 1 {
			h.Session = words[1]
		}
		err = h.Run(sub)
	case "/cancel":
		err = (&CancelCmd{Name: c.Name, Session: c.Session, Scope: c.Scope}).Run(sub)
	case "/prompt":
		err = (&PromptCmd{Name: c.Name, Session: c.Session}).Run(sub)
	default:
		fmt.Fprintf(t, "unknown command %s; /help lists them (// sends a line starting with /)\n", words[0])
	}
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && ee.Err == nil {
			return nil
		}
		fmt.Fprintf(t, "%s: %v\n", words[0], err)
	}
	return nil
}

// showTool prints the whole result of a tool call of the session, read
// from its log: the last call, or the Nth (from 1) of the last run that
// made calls. Control characters are shown as U+FFFD.
func (c *ChatCmd) showTool(env *Env, t io.Writer, args []string) error {
	n := 0
	if len(args) > 0 {
		v, err := strconv.Atoi(args[0])
		if err != nil || v < 1 {
			return fmt.Errorf("want /tool or /tool N (N from 1), not %q", args[0])
		}
		n = v
	}
	type call struct {
		name    string
		args    []string
		status  string
		content string
	}
	var last []call // the last run's calls
	run := ""
	dir := env.Layout.SessionDir(c.Name, c.Scope, c.Session)
	_, err := sessions.ScanDir(dir, func(f *sessions.Frame) {
		switch f.Type {
		case ipc.TypeToolCall:
			if f.Run != run {
				run, last = f.Run, nil
			}
			last = append(last, call{name: f.Name, args: f.Args})
		case ipc.TypeToolResult:
			if f.Run == run && len(last) > 0 {
				for i := len(last) - 1; i >= 0; i-- {
					if last[i].status == "" {
						last[i].status, last[i].content = f.Status, f.Content
						break
					}
				}
			}
		}
	})
	if err != nil {
		return err
	}
	if len(last) == 0 {
		return errors.New("no tool call in this session yet")
	}
	i := len(last) - 1
	if n > 0 {
		if n > len(last) {
			return fmt.Errorf("the last run made %d calls", len(last))
		}
		i = n - 1
	}
	cl := last[i]
	fmt.Fprintf(t, "── %d/%d %s  %s\n%s\n", i+1, len(last), chatview.Label(cl.name, cl.args), cl.status,
		strings.TrimRight(sessions.Clean(cl.content), "\n"))
	return nil
}

// runRendered follows one run with the chat rendered (chatview): tool
// calls as live lines, Markdown as its blocks close, the approval
// question with the diff.
func (c *ChatCmd) runRendered(env *Env, view *chatview.View, t io.Writer, fw *client.Follower, keys <-chan byte, typed *keyRouter, workspace string, rules callRules) error {
	tick := time.NewTicker(chatview.TickEvery)
	defer tick.Stop()
	defer view.Pause()
	view.Begin()
	var run string
	cancelled := false
	var pending *question // approval waiting for its answer
	var lastKey time.Time
	for {
		select {
		case <-tick.C:
			if pending == nil {
				view.Tick()
			}
		case k, ok := <-keys:
			if !ok {
				return nil
			}
			if k != 3 { // typed ahead for the next message, or a question's answer
				if pending != nil && answer(t, fw, typed, pending, k, lastKey, rules, c.Session) {
					pending = nil
				}
				lastKey = time.Now()
				continue
			}
			// Ctrl+C during a run, at a question too: cancel the run (S3).
			if run != "" && !cancelled {
				cancelled = true
				view.Pause()
				fmt.Fprintf(t, "^C cancelling %s\n", run)
				_ = fw.Cancel(run)
			}
		case it := <-fw.Items():
			if it.Err != nil {
				return Exit(ExitUnavailable, it.Err)
			}
			f := it.Frame
			if run == "" && f.Run != "" {
				run = f.Run
			}
			if f.Type == ipc.TypeApprovalRequest {
				view.Pause()
				if rules.answers(t, c.Session, f) {
					_ = fw.Approve(f.Run, f.ID, ipc.DecisionAllowOnce)
					continue
				}
				pending = &question{f: f, shown: time.Now()}
				if m := f.MCP; m != nil {
					fmt.Fprintf(t, "? allow tool %s of MCP server %s with arguments %s once? (%s) ", m.Tool, m.Server, m.Arguments, questionKeys)
				} else {
					fmt.Fprint(t, chatview.Question(f.Name, f.Args, workspace, true))
				}
				continue
			}
			view.Frame(f)
			if err := view.Err(); err != nil {
				return Exit(ExitUnavailable, fmt.Errorf("writing to the terminal: %w", err))
			}
			if f.Type == ipc.TypeDone || (f.Type == ipc.TypeError && f.Run == "") {
				return nil
			}
		}
	}
}

// runOnTerminal follows one run: tool activity is shown as it happens, the
// answer is buffered and written when the run ends.
func (c *ChatCmd) runOnTerminal(t io.Writer, fw *client.Follower, keys <-chan byte, typed *keyRouter, rules callRules) error {
	var text strings.Builder
	var run string
	cancelled := false
	var pending *question // approval waiting for its answer
	var lastKey time.Time
	for {
		select {
		case k, ok := <-keys:
			if !ok {
				return nil
			}
			if k != 3 { // typed ahead for the next message, or a question's answer
				if pending != nil && answer(t, fw, typed, pending, k, lastKey, rules, c.Session) {
					pending = nil
				}
				lastKey = time.Now()
				continue
			}
			// Ctrl+C during a run, at a question too: cancel the run (S3).
			if run != "" && !cancelled {
				cancelled = true
				fmt.Fprintf(t, "^C cancelling %s\n", run)
				_ = fw.Cancel(run)
			}
		case it := <-fw.Items():
			if it.Err != nil {
				return Exit(ExitUnavailable, it.Err)
			}
			f := it.Frame
			if run == "" && f.Run != "" {
				run = f.Run
			}
			switch f.Type {
			case ipc.TypeDelta:
				text.WriteString(f.Text)
			case ipc.TypeToolCall:
				fmt.Fprintf(t, "  · %s %s\n", f.Name, strings.Join(f.Args, " "))
			case ipc.TypeToolResult:
				if f.Status == "error" { // where a failure says why: its last lines
					fmt.Fprintf(t, "  · error\n")
					for _, l := range chatview.Tail(f.Content, chatview.TailLines) {
						fmt.Fprintf(t, "    %s\n", l)
					}
					break
				}
				fmt.Fprintf(t, "  · %s: %s\n", f.Status, firstLine(f.Content))
			case ipc.TypeApprovalRequest:
				if rules.answers(t, c.Session, f) {
					_ = fw.Approve(f.Run, f.ID, ipc.DecisionAllowOnce)
					break
				}
				pending = &question{f: f, shown: time.Now()}
				fmt.Fprintf(t, "  ? allow tool %s with argv %q once? (%s) ", f.Name, f.Args, questionKeys)
			case ipc.TypeError:
				fmt.Fprintf(t, "error %s: %s\n", f.Code, f.Message)
				if f.Run == "" {
					return nil
				}
			case ipc.TypeCancelled:
				fmt.Fprintf(t, "(cancelled)\n")
			case ipc.TypeDone:
				if s := text.String(); s != "" && !cancelled {
					if !strings.HasSuffix(s, "\n") {
						s += "\n"
					}
					fmt.Fprint(t, s)
				}
				return nil
			}
		}
	}
}

// plain is chat without a terminal: one message per input line. SIGINT
// during a run cancels that run and goes on with the next line; when idle
// it exits, as on a terminal (spec: A5, S3).
func (c *ChatCmd) plain(env *Env, follow func(sendReq) (*client.Follower, error), mk func(string) sendReq) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	lines := make(chan string)
	scanErr := make(chan error, 1)
	go func() { // ends at EOF; the process exits with it otherwise
		sc := bufio.NewScanner(env.Stdin)
		sc.Buffer(make([]byte, 64<<10), ipc.MaxInput)
		for sc.Scan() {
			lines <- sc.Text()
		}
		scanErr <- sc.Err()
	}()
	for {
		var line string
		select {
		case <-sig:
			return Exit(ExitCancelled, nil)
		case err := <-scanErr:
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		case line = <-lines:
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		fw, err := follow(mk(line))
		if err != nil {
			return err
		}
		err = c.plainRun(env, fw, sig)
		fw.Close()
		if err != nil {
			return err
		}
	}
}

// plainRun follows one run of the plain chat: SIGINT cancels it.
func (c *ChatCmd) plainRun(env *Env, fw *client.Follower, sig <-chan os.Signal) error {
	run, cancelSent := "", false
	for {
		var it client.Item
		select {
		case <-sig:
			if run != "" && !cancelSent {
				cancelSent = true
				_ = fw.Cancel(run)
			}
			continue
		case it = <-fw.Items():
		}
		if it.Err != nil {
			return Exit(ExitUnavailable, it.Err)
		}
		f := it.Frame
		if run == "" && f.Run != "" && (f.Type == ipc.TypeUser || f.Type == ipc.TypeStart) {
			run = f.Run
		}
		switch f.Type {
		case ipc.TypeAssistant:
			fmt.Fprintln(env.Stdout, strings.TrimSuffix(f.Text, "\n"))
		case ipc.TypeApprovalRequest:
			fmt.Fprintln(env.Stderr, "ctx: approval needed but there is no terminal to ask; denied")
			_ = fw.Approve(f.Run, f.ID, ipc.DecisionDeny)
		case ipc.TypeCancelled:
			fmt.Fprintln(env.Stderr, "ctx: cancelled")
		case ipc.TypeError:
			fmt.Fprintf(env.Stderr, "ctx: %s: %s\n", f.Code, f.Message)
			if f.Run == "" {
				return nil
			}
		case ipc.TypeDone:
			return nil
		}
	}
}

// keyRouter owns stdin's bytes. Every byte but a run's Ctrl+C goes to
// the line editor's buffer, at the prompt and typed ahead during a run
// alike, so nothing typed is lost whatever its size (up to
// maxTypeahead); during a run each key is also shown to the run (for
// Ctrl+C and an approval's answer, which it then takes back: take). The
// switch and the routing happen under one lock, so no byte falls between
// them.
type keyRouter struct {
	mu   sync.Mutex
	more *sync.Cond
	buf  []byte // the line editor's bytes, type-ahead first
	idle bool
	eof  bool
	// capture: during a run, keys are the run's alone (a deny's reason
	// being typed), not typed ahead.
	capture bool
	run     chan byte // during a run, the keys as they come; closed at end of input
}

// maxTypeahead bounds what is kept for the line editor: above a 1 MiB
// paste with its markers, which the editor refuses with its size.
const maxTypeahead = 4 << 20

func newKeyRouter() *keyRouter {
	k := &keyRouter{idle: true, run: make(chan byte, 1024)}
	k.more = sync.NewCond(&k.mu)
	return k
}

// feed routes bytes read from stdin.
func (k *keyRouter) feed(p []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range p {
		if !k.idle && (b == 3 || k.capture) {
			select { // Ctrl+C during a run is the run's alone, so is a reason's key
			case k.run <- b:
			default:
			}
			continue
		}
		if len(k.buf) < maxTypeahead {
			k.buf = append(k.buf, b)
		}
		if !k.idle {
			select { // shown, never waited for: the keys themselves are in buf
			case k.run <- b:
			default:
			}
		}
	}
	k.more.Broadcast()
}

// close marks the end of input: the line editor reads EOF, the run's
// channel closes.
func (k *keyRouter) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.eof = true
	close(k.run)
	k.more.Broadcast()
}

// setIdle switches the owner; keys shown to a run and not looked at are
// forgotten (they are in buf).
func (k *keyRouter) setIdle(idle bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.idle, k.capture = idle, false
	for {
		select {
		case _, ok := <-k.run:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// setCapture makes the run's keys its own (true) or typed ahead again.
func (k *keyRouter) setCapture(on bool) {
	k.mu.Lock()
	k.capture = on
	k.mu.Unlock()
}

// take removes b from the end of the type-ahead: the run used that key
// (an approval's answer, the newest key when it is taken).
func (k *keyRouter) take(b byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := len(k.buf); n > 0 && k.buf[n-1] == b {
		k.buf = k.buf[:n-1]
	}
}

// Read gives the line editor its bytes, waiting for more.
func (k *keyRouter) Read(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(k.buf) == 0 && !k.eof {
		k.more.Wait()
	}
	if len(k.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, k.buf)
	k.buf = k.buf[n:]
	return n, nil
}

// settle is how long a question must have been shown, and the keyboard
// quiet, before a key answers it: keys typed on without a pause (a
// message typed ahead as the question appeared) answer nothing.
const settle = 500 * time.Millisecond

// question is an approval request waiting for its answer.
type question struct {
	f      *ipc.Frame
	shown  time.Time
	reason *[]byte // after r: the reason being typed
}

// answerKey is the decision a key makes at a question, or "": only y, n
// a and r answer, and only after the question and the keyboard settled (a
// key within settle of the previous one is typing). r is denyReason: the
// person then types why. Ctrl+C is the caller's: it cancels the run.
func answerKey(k byte, shown, lastKey, now time.Time) string {
	if now.Sub(shown) < settle || now.Sub(lastKey) < settle {
		return ""
	}
	switch k {
	case 'y', 'Y':
		return ipc.DecisionAllowOnce
	case 'n', 'N':
		return ipc.DecisionDeny
	case 'r', 'R':
		return denyReason
	case 'a', 'A':
		return allowRule
	}
	return ""
}

// allowRule is answerKey's "allow once, and this same call again without
// asking" (callRules).
const allowRule = "allow-rule"

// denyReason is answerKey's "deny, and say why".
const denyReason = "deny-with-reason"

// questionKeys is the prompt of a question in chat and send.
const questionKeys = chatview.QuestionKeys

// answer handles key k at question q: an answer is sent, printed and
// taken back from the type-ahead; after r, the keys up to Enter are the
// reason (taken back too); anything else stays typed ahead. It reports
// whether q was answered.
func answer(t io.Writer, fw *client.Follower, typed *keyRouter, q *question, k byte, lastKey time.Time, rules callRules, session string) bool {
	if q.reason != nil {
		switch {
		case k == '\r' || k == '\n':
			typed.setCapture(false)
			fmt.Fprint(t, "\n")
			_ = fw.Deny(q.f.Run, q.f.ID, string(*q.reason))
			return true
		case k == 0x7f || k == 8:
			if r := *q.reason; len(r) > 0 {
				_, size := utf8.DecodeLastRune(r)
				*q.reason = r[:len(r)-size]
				fmt.Fprint(t, "\b \b")
			}
		case k >= 0x20 && len(*q.reason) < ipc.MaxReason:
			*q.reason = append(*q.reason, k)
			t.Write([]byte{k})
		}
		return false
	}
	d := answerKey(k, q.shown, lastKey, time.Now())
	if d == "" {
		return false
	}
	typed.take(k)
	if d == denyReason {
		q.reason = new([]byte)
		typed.setCapture(true)
		fmt.Fprint(t, "deny — why (Enter sends it to the model): ")
		return false
	}
	if d == allowRule {
		rules.add(session, q.f)
		d = ipc.DecisionAllowOnce
		fmt.Fprintf(t, "%s, and this same call again without asking in this chat\n", d)
		_ = fw.Approve(q.f.Run, q.f.ID, d)
		return true
	}
	fmt.Fprintf(t, "%s\n", d)
	_ = fw.Approve(q.f.Run, q.f.ID, d)
	return true
}

// crlf writes to a terminal in raw mode: each "\n" becomes "\r\n".
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') < 0 {
		return c.w.Write(p)
	}
	var b bytes.Buffer
	for i, ch := range p {
		if ch == '\n' && (i == 0 || p[i-1] != '\r') {
			b.WriteByte('\r')
		}
		b.WriteByte(ch)
	}
	if _, err := c.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// fitsRequest refuses, with the sizes, a message the daemon would refuse:
// over the input bound, or a request line over the line bound once
// encoded (quotes, backslashes and newlines take two bytes).
func fitsRequest(req sendReq) error {
	if n := len(*req.Input); n > ipc.MaxInput {
		return fmt.Errorf("message of %d bytes not sent: a message holds at most %d bytes", n, ipc.MaxInput)
	}
	b, err := client.Encode(req)
	if err != nil {
		return err
	}
	if len(b) > ipc.MaxLine {
		return fmt.Errorf("message not sent: encoded it is %d bytes, over the request bound of %d", len(b), ipc.MaxLine)
	}
	return nil
}
