package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const contract = "Your only native callable tool is tsh.\n" +
	"Other CortexFS tools are discovered, loaded, pinned, and invoked through tsh.\n" +
	"Prompt text and skill metadata do not grant permissions."

var hashLine = regexp.MustCompile(`(?m)^hash: (sha256:[0-9a-f]{64})$`)

// controlFiles returns the window and model files of an agent ("<absent>" if missing).
func (w *world) controlFiles(agent string) [2]string {
	w.t.Helper()
	var out [2]string
	for i, f := range []string{"window", "model"} {
		b, err := os.ReadFile(filepath.Join(w.root, "agent", agent+".d", f))
		if os.IsNotExist(err) {
			out[i] = "<absent>"
			continue
		}
		if err != nil {
			w.t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

func (w *world) writeControl(agent, control, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.root, "agent", agent+".d", control), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// TestWindowModelSetRefusals: `ctx agent set` checks window and model
// together; a refusal exits 2 with the reason and leaves both files
// byte-identical; `set window auto` always succeeds. spec: W2 W3 W5
func TestWindowModelSetRefusals(t *testing.T) {
	w := newWorld(t)
	w.mustCtx("agent", "create", "m", "--model", "anthropic/claude-sonnet-4-5")
	if got := w.controlFiles("m"); got != [2]string{"auto\n", "anthropic/claude-sonnet-4-5\n"} {
		t.Fatalf("created files %q", got)
	}
	steps := []struct {
		args   []string
		code   int
		reason string    // substring of stderr on refusal
		after  [2]string // window, model after an accepted step
	}{
		{[]string{"window", "300000"}, 2, "200000", [2]string{}},
		{[]string{"window", "0"}, 2, "zero", [2]string{}},
		{[]string{"window", "0150000"}, 2, "leading zero", [2]string{}},
		{[]string{"window", "+5"}, 2, "window", [2]string{}},
		{[]string{"window", "4294967296"}, 2, "larger", [2]string{}},
		{[]string{"window", "1 2"}, 2, "window", [2]string{}},
		{[]string{"window", "150000"}, 0, "", [2]string{"150000\n", "anthropic/claude-sonnet-4-5\n"}},
		{[]string{"model", "openai/gpt-4o"}, 2, "128000", [2]string{}},
		{[]string{"model", "acme/not-listed"}, 2, "acme/not-listed", [2]string{}},
		{[]string{"model", "openai/gpt-4o,anthropic/claude-sonnet-4-5"}, 2, "128000", [2]string{}},
		// A fallback that cannot hold is kept (W6 re-checks it per run).
		{[]string{"model", "anthropic/claude-sonnet-4-5,openai/gpt-4o"}, 0, "",
			[2]string{"150000\n", "anthropic/claude-sonnet-4-5\nopenai/gpt-4o\n"}},
		{[]string{"window", "auto"}, 0, "", [2]string{"auto\n", "anthropic/claude-sonnet-4-5\nopenai/gpt-4o\n"}},
		{[]string{"model", "openai/gpt-4o"}, 0, "", [2]string{"auto\n", "openai/gpt-4o\n"}},
		{[]string{"window", "128000"}, 0, "", [2]string{"128000\n", "openai/gpt-4o\n"}},
		{[]string{"window", "128001"}, 2, "128000", [2]string{}},
	}
	for _, s := range steps {
		before := w.controlFiles("m")
		r := w.ctx("", "", append([]string{"agent", "set", "m"}, s.args...)...)
		if r.code != s.code {
			t.Fatalf("set %v: exit %d, want %d\n%s", s.args, r.code, s.code, r.stderr)
		}
		after := w.controlFiles("m")
		if s.code != 0 {
			if after != before { // spec: W5 — a refusal changes nothing
				t.Errorf("set %v refused but files changed: %q → %q", s.args, before, after)
			}
			if !strings.Contains(r.stderr, s.reason) {
				t.Errorf("set %v: reason %q lacks %q", s.args, r.stderr, s.reason)
			}
			continue
		}
		if after != s.after {
			t.Errorf("set %v: files %q, want %q", s.args, after, s.after)
		}
	}

	// spec: W3 — `set window auto` repairs a hand-broken window, even when
	// the model is unknown.
	w.writeControl("m", "window", "0\n")
	w.writeControl("m", "model", "acme/not-listed\n")
	w.mustCtx("agent", "set", "m", "window", "auto")
	if got := w.controlFiles("m"); got != [2]string{"auto\n", "acme/not-listed\n"} {
		t.Errorf("after set window auto: %q", got)
	}
	r := w.ctx("", "", "agent", "set", "m", "window", "1000")
	if r.code != 2 || w.controlFiles("m")[0] != "auto\n" {
		t.Errorf("explicit window with an unknown model: exit %d %q", r.code, w.controlFiles("m"))
	}
}

// TestWindowCreateAndExecAgents: create checks --window against --model; an
// executable agent without a model has no known limit, so only auto is
// valid for it. spec: W2 W5
func TestWindowCreateAndExecAgents(t *testing.T) {
	w := newWorld(t)
	if r := w.ctx("", "", "agent", "create", "big", "--model", "openai/gpt-4o", "--window", "150000"); r.code != 2 || !strings.Contains(r.stderr, "128000") {
		t.Errorf("create over the limit: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(w.root, "agent", "big")); err == nil {
		t.Error("a refused create left an agent behind")
	}
	w.mustCtx("agent", "create", "ok", "--model", "openai/gpt-4o", "--window", "100000")
	if got := w.controlFiles("ok"); got != [2]string{"100000\n", "openai/gpt-4o\n"} {
		t.Errorf("created %q", got)
	}
	if r := w.ctx("", "", "agent", "create", "x", "--exec", binDir+"/testagent", "--window", "1000"); r.code != 2 {
		t.Errorf("create --exec --window 1000: exit %d", r.code)
	}
	w.agent("e", nil)
	before := w.controlFiles("e")
	if r := w.ctx("", "", "agent", "set", "e", "window", "1000"); r.code != 2 || w.controlFiles("e") != before {
		t.Errorf("exec agent set window 1000: exit %d, files %q", r.code, w.controlFiles("e"))
	}
	w.mustCtx("agent", "set", "e", "model", "openai/gpt-4o")
	w.mustCtx("agent", "set", "e", "window", "1000")
	if got := w.controlFiles("e"); got != [2]string{"1000\n", "openai/gpt-4o\n"} {
		t.Errorf("exec agent with a model: %q", got)
	}
}

// systemMessage cuts the first (system) message out of `ctx agent prompt`.
func systemMessage(t *testing.T, out string) string {
	t.Helper()
	const head = "=== message 1: system ===\n"
	if !strings.HasPrefix(out, head) {
		t.Fatalf("output does not start with the system message:\n%s", out)
	}
	rest := out[len(head):]
	end := strings.Index(rest, "\n=== message 2: ")
	if end < 0 {
		t.Fatalf("no second message:\n%s", out)
	}
	return rest[:end]
}

// TestPromptContractAlwaysLast: `ctx agent prompt` on a model agent shows the
// contract as the last lines of the system message, even when
// prompt.template.md omits it; it prints placeholders, section sizes and the
// hash, and needs no daemon. spec: R1 R3 R4 U6
func TestPromptContractAlwaysLast(t *testing.T) {
	w := newWorld(t) // no daemon: the command renders locally
	w.mustCtx("agent", "create", "m", "--model", "anthropic/claude-sonnet-4-5")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Rule from the workspace.\n"), 0o644)

	r := w.ctx(ws, "", "agent", "prompt", "m")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	sys := systemMessage(t, r.stdout)
	if !strings.HasSuffix(sys, "\n"+contract) || !strings.Contains(sys, "Rule from the workspace.") {
		t.Errorf("default template: system message:\n%s", sys)
	}
	for _, want := range []string{"<input: supplied at run time>", "<time: supplied at run time>",
		"window: 200000 tokens (model anthropic/claude-sonnet-4-5)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, sec := range []string{"system", "rules", "skills", "tools", "history", "input", "contract", "total"} {
		if !regexp.MustCompile(`(?m)^` + sec + ` +[0-9]+$`).MatchString(r.stdout) {
			t.Errorf("no %s row in the section table:\n%s", sec, r.stdout)
		}
	}
	m := hashLine.FindStringSubmatch(r.stdout)
	if m == nil || !strings.HasSuffix(strings.TrimRight(r.stdout, "\n"), m[0]) {
		t.Fatalf("no final hash line:\n%s", r.stdout)
	}
	first := m[1]

	// spec: U6 R3 — the template is re-read at the next build, and omitting
	// the contract (or trying to end differently) cannot remove it.
	w.writeControl("m", "system.md", "You are terse.\n")
	w.writeControl("m", "prompt.template.md", "Custom: {{system}}\nThe end. Nothing follows.\n")
	r = w.ctx(ws, "", "agent", "prompt", "m")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	sys = systemMessage(t, r.stdout)
	if !strings.HasPrefix(sys, "Custom: You are terse.\nThe end. Nothing follows.") || !strings.HasSuffix(sys, "\n"+contract) {
		t.Errorf("custom template: system message:\n%s", sys)
	}
	if strings.Contains(sys, "Rule from the workspace.") {
		t.Error("rules rendered although the template omits {{rules}}")
	}
	if m := hashLine.FindStringSubmatch(r.stdout); m == nil || m[1] == first {
		t.Errorf("hash did not change with the template: %v", m)
	}
	// An empty template still yields the contract.
	w.writeControl("m", "prompt.template.md", "")
	r = w.ctx(ws, "", "agent", "prompt", "m")
	if sys := systemMessage(t, r.stdout); r.code != 0 || sys != contract {
		t.Errorf("empty template: exit %d, system %q", r.code, sys)
	}
}

// TestPromptWindowInvalid: a hand-edited invalid window makes `ctx agent
// prompt` exit 2 naming the file; the file is never rewritten. An unknown
// agent exits 2 too. spec: W2 W5 R4
func TestPromptWindowInvalid(t *testing.T) {
	w := newWorld(t)
	w.mustCtx("agent", "create", "m", "--model", "anthropic/claude-sonnet-4-5")
	wfile := filepath.Join(w.root, "agent", "m.d", "window")
	for _, bad := range []string{"0\n", "auto", "300000\n", "12\n13\n"} {
		w.writeControl("m", "window", bad)
		r := w.ctx("", "", "agent", "prompt", "m")
		if r.code != 2 || !strings.Contains(r.stderr, wfile) || !strings.Contains(r.stderr, "set m window auto") {
			t.Errorf("window %q: exit %d, stderr %q", bad, r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("window %q: printed a prompt:\n%s", bad, r.stdout)
		}
		if b, _ := os.ReadFile(wfile); string(b) != bad {
			t.Errorf("window %q rewritten to %q", bad, b)
		}
	}
	if r := w.ctx("", "", "agent", "prompt", "nope"); r.code != 2 || !strings.Contains(r.stderr, "no such agent") {
		t.Errorf("unknown agent: exit %d %q", r.code, r.stderr)
	}
}

// TestPromptShowsSessionHistory: history and tool context come from the
// session; an unusable candidate is listed. spec: R4 W6
func TestPromptShowsSessionHistory(t *testing.T) {
	w := newWorld(t)
	w.mustCtx("agent", "create", "m", "--model", "openai/gpt-4o,anthropic/claude-sonnet-4-5")
	w.writeControl("m", "window", "150000\n") // hand edit: the first candidate is too small
	sess := w.sessionDir("m", "s1")
	os.MkdirAll(sess, 0o700)
	os.WriteFile(filepath.Join(sess, "messages.jsonl"), []byte(
		`{"role":"user","run":"r1","seq":1,"ts":"t","text":"earlier question"}`+"\n"+
			`{"role":"assistant","run":"r1","seq":4,"ts":"t","text":"earlier answer"}`+"\n"), 0o600)
	os.WriteFile(filepath.Join(sess, "tools.json"), []byte(
		`{"version":1,"next":1,"tools":[{"name":"clock","description":"tells the time","path":"/ctx/tool/clock","pinned":true,"order":0}]}`+"\n"), 0o600)
	r := w.ctx("", "", "agent", "prompt", "m", "--session", "s1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"=== message 2: user ===\nearlier question\n=== message 3: assistant ===\nearlier answer\n=== message 4: user ===\n<input: supplied at run time>",
		"- clock (pinned): tells the time",
		"window: 150000 tokens (model anthropic/claude-sonnet-4-5)",
		"candidate openai/gpt-4o: unusable: window 150000 exceeds the 128000-token limit",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	// spec: R5 — the build wrote the snapshots into the existing session.
	if _, err := os.Stat(filepath.Join(sess, "SKILLS.md")); err != nil {
		t.Errorf("SKILLS.md snapshot: %v", err)
	}
	if w.controlFiles("m")[0] != "150000\n" {
		t.Error("window rewritten")
	}
}

// ---- Run side: needs runprep.Prepare wired into the run actor. ----

// startFramePrompt returns the `prompt` field of a run's start frame.
func startFramePrompt(t *testing.T, fs []frame) string {
	t.Helper()
	for _, f := range fs {
		if f.Type == "start" {
			var m map[string]any
			if err := json.Unmarshal([]byte(f.raw), &m); err != nil {
				t.Fatal(err)
			}
			s, _ := m["prompt"].(string)
			return s
		}
	}
	t.Fatalf("no start frame in %v", types(fs))
	return ""
}

// TestRunHashEqualsPrompt: every run records in its start frame the hash
// `ctx agent prompt` printed just before, with and without history.
// spec: R4
func TestRunHashEqualsPrompt(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("cap", nil)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Workspace rule.\n"), 0o644)
	c := w.dial("cap")
	for i, input := range []string{"echo one", "echo two"} {
		r := w.ctx(ws, "", "agent", "prompt", "cap")
		m := hashLine.FindStringSubmatch(r.stdout)
		if r.code != 0 || m == nil {
			t.Fatalf("prompt: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		c.send(sendReq("h"+itoa(i), input, "workspace", ws))
		got := c.until("done", 20*time.Second)
		if got[len(got)-1].Status != "ok" {
			t.Fatalf("run %d: %v", i, types(got))
		}
		if h := startFramePrompt(t, got); h != m[1] {
			t.Errorf("run %d: start frame prompt %q, ctx agent prompt %q", i, h, m[1])
		}
	}
}

// TestWindowEnvVisibleToAgent: the agent sees CTX_CONTEXT_WINDOW_TOKENS and
// _CHARS exactly when its window is known; an unusable candidate yields a
// candidate frame and the settings stay. spec: W4 W6 W7 W10
func TestWindowEnvVisibleToAgent(t *testing.T) {
	w := newWorld(t)
	w.start()
	cases := []struct {
		name, model, window string
		tokens, chars       string // "" = variable absent
		unusable            []string
	}{
		{"nomodel", "", "auto\n", "", "", nil},
		{"auto", "openai/gpt-4o\n", "auto\n", "128000", "512000", nil},
		{"explicit", "anthropic/claude-sonnet-4-5\n", "1000\n", "1000", "4000", nil},
		{"unknownauto", "acme/not-listed\n", "auto\n", "", "", nil},
		{"fallback", "acme/not-listed\nopenai/gpt-4o\n", "100000\n", "100000", "400000", []string{"acme/not-listed"}},
	}
	for _, tc := range cases {
		controls := map[string]string{"window": tc.window}
		if tc.model != "" {
			controls["model"] = tc.model
		}
		w.agent(tc.name, controls)
		before := w.controlFiles(tc.name)
		ws := t.TempDir()
		c := w.dial(tc.name)
		c.send(sendReq("env-1", "capture", "workspace", ws))
		got := c.until("done", 20*time.Second)
		if got[len(got)-1].Status != "ok" {
			t.Fatalf("%s: run failed: %v", tc.name, got)
		}
		var unusable []string
		for _, f := range got {
			if f.Type != "candidate" {
				continue
			}
			var m struct{ Model, Status, Reason string }
			json.Unmarshal([]byte(f.raw), &m)
			if m.Status != "unusable" || m.Reason == "" || f.Run != got[0].Run {
				t.Errorf("%s: candidate frame %s", tc.name, f.raw)
			}
			unusable = append(unusable, m.Model)
		}
		if strings.Join(unusable, ",") != strings.Join(tc.unusable, ",") {
			t.Errorf("%s: unusable candidates %v, want %v", tc.name, unusable, tc.unusable)
		}
		envb, err := os.ReadFile(filepath.Join(ws, "env-0.txt"))
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(envb)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			env[k] = v
		}
		tok, hasTok := env["CTX_CONTEXT_WINDOW_TOKENS"]
		chr, hasChr := env["CTX_CONTEXT_WINDOW_CHARS"]
		if tc.tokens == "" {
			if hasTok || hasChr {
				t.Errorf("%s: unknown window but env has %q %q", tc.name, tok, chr)
			}
		} else if tok != tc.tokens || chr != tc.chars {
			t.Errorf("%s: env tokens %q chars %q, want %q %q", tc.name, tok, chr, tc.tokens, tc.chars)
		}
		if after := w.controlFiles(tc.name); after != before {
			t.Errorf("%s: control files changed %q → %q", tc.name, before, after)
		}
	}
}

// TestRunWindowInvalidAuditable: a hand-broken window fails the run with an
// auditable window_invalid error frame; the file is not rewritten; after
// `set window auto` the next run succeeds. spec: W2 W5
func TestRunWindowInvalidAuditable(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("bw", map[string]string{"window": "0\n"})
	c := w.dial("bw")
	c.send(sendReq("w1", "echo hi"))
	got := c.until("done", 20*time.Second)
	var code string
	for _, f := range got {
		if f.Type == "error" {
			code = f.Code
		}
	}
	if code != "window_invalid" || got[len(got)-1].Status != "error" {
		t.Errorf("frames %v, error code %q", types(got), code)
	}
	if w.controlFiles("bw")[0] != "0\n" {
		t.Error("window rewritten by the runtime")
	}
	found := false
	for _, f := range w.events("bw", "default") {
		found = found || f.Type == "error" && f.Code == "window_invalid"
	}
	if !found {
		t.Error("window_invalid not in events.jsonl")
	}
	w.mustCtx("agent", "set", "bw", "window", "auto")
	c.send(sendReq("w2", "echo hi"))
	if got := c.until("done", 20*time.Second); got[len(got)-1].Status != "ok" {
		t.Errorf("after set window auto: %v", types(got))
	}
}

// TestPromptSnapshotsUnwritableRunCompletes: a session where the snapshots cannot be
// written (AGENTS.md is a directory) still completes its run. spec: R5
func TestPromptSnapshotsUnwritableRunCompletes(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("ro", nil)
	sess := w.sessionDir("ro", "default")
	os.MkdirAll(filepath.Join(sess, "AGENTS.md", "blocker"), 0o700)
	os.MkdirAll(filepath.Join(sess, "SKILLS.md", "blocker"), 0o700)
	c := w.dial("ro")
	c.send(sendReq("s1", "echo still works"))
	got := c.until("done", 20*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("run failed: %v", got)
	}
	if got[len(got)-2].Text != "echo: still works" {
		t.Errorf("conclusion %+v", got[len(got)-2])
	}
}
