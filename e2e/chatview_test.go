package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// anthropicMarkdown answers texts as one turn that reports usage (input
// in message_start, output in message_delta, as the API streams them).
func anthropicMarkdown(in, out int64, texts ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		ev := []string{
			anthropicEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_md", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-sonnet-4-5",
				"usage": map[string]any{"input_tokens": in, "output_tokens": 1}}}),
			anthropicEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		}
		for _, t := range texts {
			ev = append(ev, anthropicEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": t}}))
		}
		ev = append(ev,
			anthropicEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
			anthropicEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": out}}),
			anthropicEvent("message_stop", map[string]any{"type": "message_stop"}))
		sse(w, ev...)
	}
}

// The answer's Markdown, cut into deltas mid-line and mid-fence as a
// model streams it.
var mdAnswer = []string{"# Fix", "ed\n\nThe bug:\n\n- add() sub", "tracted\n- now it adds\n\n```sh\nsh te", "st.sh\n```\n\nAll **green**."}

// tmuxSession runs a shell command line in a detached tmux session of
// its own server and returns a screen poller and a key sender.
type tmuxSession struct {
	t    *testing.T
	tmux string
	sock string
}

func newTmux(t *testing.T, cols, rows int, cmdline string) *tmuxSession {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	s := &tmuxSession{t: t, tmux: tmux, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	s.run("new-session", "-d", "-s", "t", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), cmdline)
	t.Cleanup(func() { exec.Command(tmux, "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.tmux, append([]string{"-S", s.sock}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v %s", args, err, out)
	}
	return string(out)
}

// answer presses key at an approval question: after the pause the
// question needs before a key answers it (a key typed on without one is
// typing, not an answer).
func (s *tmuxSession) answer(key string) {
	time.Sleep(700 * time.Millisecond)
	s.keys(key)
}

func (s *tmuxSession) keys(keys ...string) {
	s.t.Helper()
	s.run(append([]string{"send-keys", "-t", "t"}, keys...)...)
}

// screen waits until the pane (its scrollback included) satisfies ok.
func (s *tmuxSession) screen(what string, d time.Duration, ok func(string) bool) string {
	s.t.Helper()
	var sc string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if sc = s.run("capture-pane", "-p", "-S", "-200", "-t", "t"); ok(sc) {
			return sc
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("screen never showed %s:\n%s", what, sc)
	return sc
}

func (s *tmuxSession) contains(want string, d time.Duration) string {
	s.t.Helper()
	return s.screen(strconv.Quote(want), d, func(sc string) bool { return strings.Contains(sc, want) })
}

func shellEnv(w *world, extra ...string) string {
	var envs []string
	for _, e := range append(w.env(), extra...) {
		envs = append(envs, strconv.Quote(e))
	}
	return "env -i " + strings.Join(envs, " ")
}

// TestChatRenderedInTmux is a person's view of `ctx agent chat`
// each tool call is one line that runs with a spinner and ends
// with its status and duration, the approval of an edit shows the diff
// and is answered y, the answer's Markdown is rendered (heading, list,
// code block without their markup), the run ends with its usage and its
// cost from prices.tsv, and /sessions lists the session with that cost.
func TestChatRenderedInTmux(t *testing.T) {
	f := newFakeProvider(t,
		anthropicToolUse("toolu_1", "call", "read", "calc.sh"),
		anthropicToolUse("toolu_2", "call", "edit", "calc.sh", "$(( $1 - $2 ))", "$(( $1 + $2 ))"),
		anthropicToolUse("toolu_3", "call", "bash", "sleep 2; sh test.sh"),
		anthropicMarkdown(1000, 100, mdAnswer...))
	w := stdModelWorld(t, f)
	w.writeControl("m", "approval", "ask\n")
	repo := calcRepo(t, w)
	home := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()))
	os.MkdirAll(home, 0o755)
	if err := os.WriteFile(filepath.Join(home, "prices.tsv"), []byte("# model input output cache_read cache_write\nanthropic/claude-sonnet-4-5\t3\t15\t0.30\t3.75\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tm := newTmux(t, 100, 60, "cd "+repo+" && "+shellEnv(w, "TERM=xterm-256color")+" "+w.ctxBin+" agent chat m; echo CTX-EXIT=$?; sleep 30")
	tm.contains("\nm>", 10*time.Second)
	tm.keys("the test fails; fix it", "Enter")

	// read: asked (approval ask), no diff for a read.
	tm.contains("tool read with argv", 20*time.Second)
	tm.answer("y")
	// edit: the question shows the diff of calc.sh.
	sc := tm.contains("tool edit with argv", 20*time.Second)
	if !regexp.MustCompile(`--- calc\.sh\n\+\+\+ calc\.sh\n@@ -1,4 \+1,4 @@\n # calc\.sh: small arithmetic helpers\.\n add\(\) \{\n-\s+echo \$\(\( \$1 - \$2 \)\)\n\+\s+echo \$\(\( \$1 \+ \$2 \)\)\n \}\nAllow once\? \(y allows once, a always, n denies, r denies and says why, Ctrl\+C cancels the run\)`).MatchString(sc) {
		t.Errorf("the edit's question lacks its diff:\n%s", sc)
	}
	if !regexp.MustCompile(`✓ read calc\.sh  \d+ ms`).MatchString(sc) {
		t.Errorf("no finished line for read:\n%s", sc)
	}
	tm.answer("y")
	tm.contains(`tool bash with argv`, 20*time.Second)
	tm.answer("y")
	// While bash runs: one line with a spinner and the elapsed time.
	running := regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] bash "sleep 2; sh test.sh"  \d`)
	tm.screen("the running bash line", 20*time.Second, running.MatchString)
	sc = tm.screen("the end of the run", 30*time.Second, func(s string) bool { return strings.Contains(s, "── ok") })
	if running.MatchString(sc) {
		t.Errorf("the running line stayed:\n%s", sc)
	}
	for _, re := range []string{
		`✓ edit calc\.sh "\$\(\( \$1 - \$2 \)\)" "\$\(\( \$1 \+ \$2 \)\)"  \d+ ms`,
		`✓ bash "sleep 2; sh test\.sh"  2\.\d s`,
		`── ok · [\d.]+ (ms|s) · 1000 in · 100 out · \$0\.0045`,
	} {
		if !regexp.MustCompile(re).MatchString(sc) {
			t.Errorf("screen lacks %s:\n%s", re, sc)
		}
	}
	// Markdown rendered: no markup left, the text there.
	for _, want := range []string{"Fixed", "• add() subtracted", "• now it adds", "sh test.sh", "All green."} {
		if !strings.Contains(sc, want) {
			t.Errorf("rendered answer lacks %q:\n%s", want, sc)
		}
	}
	for _, markup := range []string{"# Fixed", "- add()", "```", "**green**"} {
		if strings.Contains(sc, markup) {
			t.Errorf("markup %q left in the answer:\n%s", markup, sc)
		}
	}
	t.Logf("the chat after the run:\n%s", sc)
	// /sessions inside chat, with the cost.
	tm.keys("/sessions", "Enter")
	// Wait for the row, not the header: the table's lines may reach the
	// screen apart.
	row := regexp.MustCompile(`default\s+private\s+idle\s+1\s+.*1000/100\s+\$0\.0045\s+the test fails; fix it`)
	tm.screen("the /sessions row", 10*time.Second, func(sc string) bool { return strings.Contains(sc, "COST") && row.MatchString(sc) })
	tm.keys("/help", "Enter")
	tm.contains("/cancel", 10*time.Second)
	tm.keys("C-d")
	if sc = tm.contains("CTX-EXIT=", 10*time.Second); !strings.Contains(sc, "CTX-EXIT=0") {
		t.Errorf("chat exit:\n%s", sc)
	}
	b, _ := os.ReadFile(filepath.Join(repo, "calc.sh"))
	if string(b) != strings.Replace(calcBuggy, "-", "+", 1) {
		t.Errorf("calc.sh: %q", b)
	}
	// The done frame names the model its usage came from.
	ev := w.events("m", "default")
	last := ev[len(ev)-1]
	if last.Type != "done" || !strings.Contains(last.raw, `"usage_by_model":{"anthropic/claude-sonnet-4-5":{"input":1000,"output":100}}`) {
		t.Errorf("done: %s", last.raw)
	}
	// history prints the run's cost beside its usage.
	if h := w.mustCtx("agent", "history", "m"); !strings.Contains(h, "usage input=1000 output=100 · $0.0045)") {
		t.Errorf("history:\n%s", h)
	}
	var js struct {
		Cost *float64 `json:"cost_usd"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(w.mustCtx("agent", "sessions", "m", "--json"), "\n", 2)[0]), &js); err != nil || js.Cost == nil || *js.Cost < 0.00449 || *js.Cost > 0.00451 {
		t.Errorf("sessions --json cost: %v %v", js.Cost, err)
	}
}

// TestSendPlainWhenNoColorOrPiped: `send` on a terminal renders the
// Markdown; with NO_COLOR set, or piped, it prints the text exactly as
// streamed.
func TestSendPlainWhenNoColorOrPiped(t *testing.T) {
	f := newFakeProvider(t, anthropicText(mdAnswer...), anthropicText(mdAnswer...), anthropicText(mdAnswer...))
	w := stdModelWorld(t, f)
	raw := strings.Join(mdAnswer, "")
	// Piped: exactly the deltas.
	if r := w.ctx("", "", "agent", "send", "m", "--session", "piped", "hi"); r.code != 0 || r.stdout != raw+"\n" {
		t.Errorf("piped send: %d %q", r.code, r.stdout)
	}
	// NO_COLOR on a terminal: the raw Markdown, no live lines.
	tm := newTmux(t, 100, 40, shellEnv(w, "TERM=xterm-256color", "NO_COLOR=1")+" "+w.ctxBin+" agent send m --session nc hi; echo CTX-EXIT=$?; sleep 30")
	sc := tm.contains("CTX-EXIT=", 20*time.Second)
	for _, want := range []string{"# Fixed", "- add() subtracted", "```sh", "All **green**.", "CTX-EXIT=0"} {
		if !strings.Contains(sc, want) {
			t.Errorf("NO_COLOR send lacks %q:\n%s", want, sc)
		}
	}
	if strings.Contains(sc, "──") || strings.Contains(sc, "•") {
		t.Errorf("NO_COLOR send was rendered:\n%s", sc)
	}
	// On a terminal: rendered.
	tm2 := newTmux(t, 100, 40, shellEnv(w, "TERM=xterm-256color")+" "+w.ctxBin+" agent send m --session tty hi; echo CTX-EXIT=$?; sleep 30")
	sc = tm2.contains("CTX-EXIT=", 20*time.Second)
	for _, want := range []string{"• add() subtracted", "── ok", "CTX-EXIT=0"} {
		if !strings.Contains(sc, want) {
			t.Errorf("terminal send lacks %q:\n%s", want, sc)
		}
	}
	if strings.Contains(sc, "```") || strings.Contains(sc, "# Fixed") {
		t.Errorf("terminal send not rendered:\n%s", sc)
	}
}
