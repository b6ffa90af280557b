package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// chatPTY starts `ctx agent chat AGENT` on a real PTY of 120 columns and
// waits for its prompt.
func chatPTY(t *testing.T, w *world, agent string) (write func(string), out *ptyOut, exited chan error) {
	t.Helper()
	cmd := exec.Command(w.ctxBin, "agent", "chat", agent)
	cmd.Env = append(w.env(), "TERM=xterm")
	cmd.Dir = t.TempDir()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); f.Close() })
	out = &ptyOut{}
	go func() { _, _ = bytesCopy(out, f) }()
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, "the prompt", 10*time.Second, func() bool { return strings.Contains(out.String(), agent+"> ") })
	// A paste of 1 MiB is more than the PTY's buffer: write it from a
	// goroutine of its own so the test reads on.
	write = func(s string) {
		done := make(chan struct{})
		go func() { f.Write([]byte(s)); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("writing %d bytes to the chat's terminal blocked", len(s))
		}
	}
	return write, out, exited
}

// userTexts is the text of every user frame of the session, in order.
func userTexts(w *world, agent string) []string {
	var out []string
	if _, err := os.Stat(w.sessionDir(agent, "default") + "/events.jsonl"); err != nil {
		return nil
	}
	for _, f := range w.events(agent, "default") {
		if f.Type == "user" {
			out = append(out, f.Text)
		}
	}
	return out
}

func waitUsers(t *testing.T, w *world, agent string, n int) []string {
	t.Helper()
	var got []string
	waitFor(t, "the runs", 20*time.Second, func() bool {
		got = userTexts(w, agent)
		if len(got) < n || len(got) == 0 {
			return false
		}
		ev := w.events(agent, "default")
		return ev[len(ev)-1].Type == "done"
	})
	return got
}

// TestChatInputIsNeverLostOrMultiplied drives the chat's line editor on a
// real PTY: a bracketed paste of three lines is one message and one run;
// Alt+Enter puts a newline in the message and eats nothing; a 400 KiB
// paste is sent whole; a 1 MiB paste is refused with its size, starts no
// run and loses what was typed before it; the history is there in the
// next chat. spec: S3
func TestChatInputIsNeverLostOrMultiplied(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("ci", nil)
	write, out, exited := chatPTY(t, w, "ci")

	write("\x1b[200~echo one\r\ntwo\rthree\x1b[201~\r")
	got := waitUsers(t, w, "ci", 1)
	if len(got) != 1 || got[0] != "echo one\ntwo\nthree" {
		t.Fatalf("a 3-line paste: user frames %q, want one with the three lines", got)
	}

	write("echo a\x1b\rb\r")
	got = waitUsers(t, w, "ci", 2)
	if len(got) != 2 || got[1] != "echo a\nb" {
		t.Fatalf("Alt+Enter: user frames %q", got)
	}

	big := "echo " + strings.Repeat("0123456789abcdef\n", 400<<10/17)
	write("\x1b[200~" + big + "\x1b[201~\r")
	got = waitUsers(t, w, "ci", 3)
	if len(got) != 3 || got[2] != big {
		t.Fatalf("400 KiB paste: %d user frames, the last %d bytes, want %d", len(got), len(got[len(got)-1]), len(big))
	}

	write("keep ")
	write("\x1b[200~" + strings.Repeat("x", 1<<20) + "\x1b[201~")
	waitFor(t, "the refusal", 20*time.Second, func() bool {
		return strings.Contains(out.String(), "paste of 1,048,576 bytes refused: a message holds at most 524,288 bytes")
	})
	write("this\r")
	got = waitUsers(t, w, "ci", 4)
	if len(got) != 4 || got[3] != "keep this" {
		t.Fatalf("after the refused paste: user frames %d, last %q", len(got), got[len(got)-1])
	}

	leaveChat(t, write, exited)

	// The next chat: ↑ goes back through this one's lines ("/exit", "keep
	// this", then "echo a\nb"; the 400 KiB one is over the history's entry
	// bound).
	write, _, exited = chatPTY(t, w, "ci")
	write("\x1b[A\x1b[A\x1b[A\r")
	got = waitUsers(t, w, "ci", 5)
	if len(got) != 5 || got[4] != "echo a\nb" {
		t.Fatalf("history across chats: user frames %d, last %q", len(got), got[len(got)-1])
	}
	leaveChat(t, write, exited)
}

// TestChatQuestionNeedsADeliberateKey drives an approval question in chat
// on a real PTY: a message typed on as the question appears ("run the
// tests⏎", an n in it) answers nothing and is the next message, not lost;
// n after a pause denies; r denies with a reason typed next, which reaches
// the model as the call's result; at the next question Ctrl+C cancels the
// run, as the question says. spec: A2 A3 S3
func TestChatQuestionNeedsADeliberateKey(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.agent("q", map[string]string{"tools": "clock\n", "policy": "allow tool *\n", "approval": "ask\n"})
	write, out, exited := chatPTY(t, w, "q")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat's terminal:\n%s", out.String())
		}
	})

	write("tool clock\r")
	waitFor(t, "the question", 20*time.Second, func() bool { return strings.Contains(out.String(), "wants to run tool clock") })
	// Typed on without a pause, as if the question had not been seen.
	for _, c := range "echo run the tests\r" {
		write(string(c))
		time.Sleep(30 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for _, f := range w.events("q", "default") {
		if f.Type == "approval" {
			t.Fatalf("typing ahead answered the question: %s", f.Decision)
		}
	}
	time.Sleep(700 * time.Millisecond)
	write("n")
	got := waitUsers(t, w, "q", 2) // the denied run ends; the typed-ahead message is the next run
	var decisions []string
	var results []string
	for _, f := range w.events("q", "default") {
		switch f.Type {
		case "approval":
			decisions = append(decisions, f.Decision)
		case "tool_result":
			results = append(results, f.Status)
		}
	}
	if len(decisions) != 1 || decisions[0] != "deny" || len(results) != 1 || results[0] != "denied" {
		t.Fatalf("approvals %q, tool results %q; want one deny", decisions, results)
	}
	if got[1] != "echo run the tests" {
		t.Fatalf("the typed-ahead message: %q", got[1])
	}

	// r: deny, and say why — the reason reaches the model as the result.
	write("tool clock\r")
	waitFor(t, "the second question", 20*time.Second, func() bool {
		return strings.Count(out.String(), "wants to run tool clock") >= 2
	})
	time.Sleep(700 * time.Millisecond)
	write("r")
	waitFor(t, "the reason's prompt", 10*time.Second, func() bool { return strings.Contains(out.String(), "deny — why") })
	write("use the date tool\r")
	waitFor(t, "the denied call", 20*time.Second, func() bool {
		for _, f := range w.events("q", "default") {
			if f.Type == "tool_result" && strings.Contains(f.Content, "the person says: use the date tool") {
				return true
			}
		}
		return false
	})
	got = waitUsers(t, w, "q", 3)
	if strings.Contains(strings.Join(got, "|"), "date tool") {
		t.Fatalf("the reason leaked into a message: %q", got)
	}

	write("tool clock\r")
	waitFor(t, "the third question", 20*time.Second, func() bool {
		return strings.Count(out.String(), "wants to run tool clock") >= 3
	})
	write("\x03")
	waitFor(t, "the run cancelled", 20*time.Second, func() bool {
		ev := w.events("q", "default")
		l := ev[len(ev)-1]
		return l.Type == "done" && l.Status == "cancelled"
	})
	select {
	case err := <-exited:
		t.Fatalf("Ctrl+C at the question ended the chat: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	for _, f := range w.events("q", "default") {
		if f.Type == "tool_result" && f.Status == "ok" {
			t.Fatal("a cancelled question's call ran")
		}
	}
	leaveChat(t, write, exited)
}

// TestChatAllowsTheSameCallAgain: a at a question allows that call once
// and answers the same call (tool and argv) allow_once when it is asked
// again later in the chat; the daemon still asks every time and records
// each answer (A3: only allow_once runs one call), and a call with other
// arguments is asked as before. spec: A2 A3
func TestChatAllowsTheSameCallAgain(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick \"$@\"\n")
	w.agent("q", map[string]string{"tools": "clock\n", "policy": "allow tool *\n", "approval": "ask\n"})
	write, out, exited := chatPTY(t, w, "q")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat's terminal:\n%s", out.String())
		}
	})
	asked := func() int { return strings.Count(out.String(), "wants to run tool clock") }

	write("tool clock fast\r")
	waitFor(t, "the question", 20*time.Second, func() bool { return asked() == 1 })
	time.Sleep(700 * time.Millisecond)
	write("a")
	waitUsers(t, w, "q", 1)

	write("tool clock fast\r") // the same call: answered by the rule
	waitFor(t, "the rule's answer", 20*time.Second, func() bool { return strings.Contains(out.String(), "allowed once by your rule (a): clock fast") })
	waitUsers(t, w, "q", 2)
	if asked() != 1 {
		t.Fatalf("the same call was asked again (%d questions)", asked())
	}

	write("tool clock slow\r") // other arguments: asked
	waitFor(t, "the second question", 20*time.Second, func() bool { return asked() == 2 })
	time.Sleep(700 * time.Millisecond)
	write("n")
	waitUsers(t, w, "q", 3)

	var requests int
	var decisions, results []string
	for _, f := range w.events("q", "default") {
		switch f.Type {
		case "approval_request":
			requests++
		case "approval":
			decisions = append(decisions, f.Decision)
		case "tool_result":
			results = append(results, f.Status)
		}
	}
	if requests != 3 || strings.Join(decisions, ",") != "allow_once,allow_once,deny" || strings.Join(results, ",") != "ok,ok,denied" {
		t.Fatalf("approval requests %d, decisions %q, results %q; want 3, allow_once twice then deny", requests, decisions, results)
	}
	leaveChat(t, write, exited)
}

// TestChatSurvivesADaemonRestart: the daemon SIGKILLed in the middle of a
// chat's run and started again: the chat says it lost the connection,
// follows the run again — its host-written conclusion (interrupted) and
// done — keeps what it had shown, and the next message runs. spec: P4 L4 S3
func TestChatSurvivesADaemonRestart(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("r", nil)
	write, out, exited := chatPTY(t, w, "r")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat's terminal:\n%s", out.String())
		}
	})
	write("sleep 30\r")
	waitFor(t, "the run to start", 20*time.Second, func() bool { return strings.Contains(out.String(), "sleeping") })
	w.kill()
	waitFor(t, "the chat to notice", 10*time.Second, func() bool { return strings.Contains(out.String(), "connection to the daemon lost") })
	w.start()
	waitFor(t, "the run's conclusion", 20*time.Second, func() bool {
		ev := w.events("r", "default")
		return len(ev) > 0 && ev[len(ev)-1].Type == "done"
	})
	waitFor(t, "the prompt again", 20*time.Second, func() bool {
		s := out.String()
		i := strings.LastIndex(s, "connection to the daemon lost")
		return i >= 0 && strings.Contains(s[i:], "r> ")
	})
	select {
	case err := <-exited:
		t.Fatalf("the chat ended: %v", err)
	default:
	}
	if !strings.Contains(out.String(), "sleeping") {
		t.Fatal("what was shown before the restart is gone")
	}
	if !strings.Contains(out.String(), "the daemon stopped while this run was active") {
		t.Fatal("the run's conclusion is not shown")
	}
	write("echo after the restart\r")
	waitFor(t, "the next answer", 20*time.Second, func() bool { return strings.Contains(out.String(), "echo: after the restart") })
	if n := starts(w, "r"); n != 2 {
		t.Fatalf("%d runs started, want 2 (the interrupted one never again)", n)
	}
	leaveChat(t, write, exited)
}

// TestChatCommands drives the chat's commands on a real PTY: a failed
// call's line is followed by its result's last lines and /tool shows the
// whole result; /approval reads and sets the control; /clear goes on in a
// new session and /resume comes back; /exit leaves with 0.
func TestChatCommands(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("fail", "#!/bin/sh\necho total 36\nfor i in 1 2 3 4 5 6 7 8; do echo line $i; done\necho FAIL add: got -1, want 3\nexit 1\n")
	w.agent("k", map[string]string{"tools": "fail\n", "policy": "allow tool *\n"})
	write, out, exited := chatPTY(t, w, "k")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat's terminal:\n%s", out.String())
		}
	})
	write("tool fail\r")
	waitFor(t, "the failed call", 20*time.Second, func() bool { return strings.Contains(out.String(), "│ FAIL add: got -1, want 3") })
	if s := out.String(); strings.Contains(s, "│ total 36") || !strings.Contains(s, "│ line 8") {
		t.Fatalf("the failed call's lines are not its tail")
	}
	write("/tool\r")
	waitFor(t, "the whole result", 10*time.Second, func() bool {
		s := out.String()
		i := strings.Index(s, "── 1/1 fail")
		return i >= 0 && strings.Contains(s[i:], "total 36") && strings.Contains(s[i:], "line 1\r\n")
	})
	write("/approval\r")
	waitFor(t, "the approval mode", 10*time.Second, func() bool { return strings.Contains(out.String(), "auto") })
	write("/approval ask\r")
	waitFor(t, "the approval set", 10*time.Second, func() bool { return strings.Contains(out.String(), "approval set") })
	if b, err := os.ReadFile(w.root + "/agent/k.d/approval"); err != nil || string(b) != "ask\n" {
		t.Fatalf("approval control: %q %v", b, err)
	}
	w.writeControl("k", "approval", "auto\n")
	write("/clear\r")
	waitFor(t, "the new session", 10*time.Second, func() bool { return strings.Contains(out.String(), "new session chat-") })
	write("echo in the new one\r")
	waitFor(t, "its answer", 20*time.Second, func() bool { return strings.Contains(out.String(), "echo: in the new one") })
	for _, f := range w.events("k", "default") {
		if f.Type == "user" && strings.Contains(f.Text, "new one") {
			t.Fatal("/clear: the message went to the old session")
		}
	}
	write("/resume default\r")
	waitFor(t, "back in default", 10*time.Second, func() bool { return strings.Contains(out.String(), "now in session default") })
	write("echo back\r")
	waitFor(t, "its answer", 20*time.Second, func() bool { return strings.Contains(out.String(), "echo: back") })
	if got := userTexts(w, "k"); got[len(got)-1] != "echo back" {
		t.Fatalf("/resume: default's messages %q", got)
	}
	write("/exit\r")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("/exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("/exit did not leave")
	}
}

// leaveChat types /exit — kept as type-ahead if the chat has not yet come
// back to its prompt after a run (a Ctrl+C then would be the run's) — and
// waits for the chat to end.
func leaveChat(t *testing.T, write func(string), exited chan error) {
	t.Helper()
	write("/exit\r")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("chat did not leave on /exit")
	}
}

// TestMentionReachesTheProvider: `@notes.txt` in a message attaches that
// workspace file: its text is in the model's request; a mention of a file
// outside the workspace (a link out of it) sends nothing. spec: S3
func TestMentionReachesTheProvider(t *testing.T) {
	f := newFakeProvider(t, anthropicText("read it"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("the MENTIONED-CONTENT line\n"), 0o644)
	out := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(out, []byte("OUTSIDE-CANARY\n"), 0o600)
	os.Symlink(out, filepath.Join(ws, "link"))
	r := w.ctx(ws, "", "agent", "send", "m", "what do", "@notes.txt", "say?")
	if r.code != 0 || !strings.Contains(r.stdout, "read it") {
		t.Fatalf("send: %d %s %s", r.code, r.stdout, r.stderr)
	}
	reqs := f.requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0], "MENTIONED-CONTENT") || !strings.Contains(reqs[0], `\u003cfile path=\"notes.txt\"\u003e`) && !strings.Contains(reqs[0], `<file path=\"notes.txt\">`) {
		t.Fatalf("the provider's request lacks the file: %q", reqs)
	}
	r = w.ctx(ws, "", "agent", "send", "m", "and", "@link")
	if r.code != 2 || !strings.Contains(r.stderr, "@link") || len(f.requests()) != 1 {
		t.Fatalf("a link out of the workspace: %d %s; %d requests", r.code, r.stderr, len(f.requests()))
	}
	for _, rq := range f.requests() {
		if strings.Contains(rq, "OUTSIDE-CANARY") {
			t.Fatal("a file outside the workspace reached the provider")
		}
	}
}
