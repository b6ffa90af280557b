package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// acpSDKDir is where scripts/acp-sdk.sh installed the official ACP
// TypeScript SDK, or "" (the tests that need it skip, saying how).
func acpSDKDir() string {
	dirs := []string{os.Getenv("CTX_ACP_NPM_DIR"), "/var/cache/ctx/acp"}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, ".cache", "ctx-acp"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err == nil {
			return d
		}
	}
	return ""
}

// acpScripts puts the testdata/acp scripts beside the SDK's node_modules
// (Node resolves ESM imports from the script's own directory) and returns
// that directory.
func acpScripts(t testing.TB) string {
	t.Helper()
	sdk := acpSDKDir()
	if sdk == "" {
		missing(t, "the ACP TypeScript SDK is not installed: run scripts/acp-sdk.sh (npm install @agentclientprotocol/sdk into /var/cache/ctx/acp or ~/.cache/ctx-acp)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node is not installed (scripts/acp-sdk.sh installs it as root)")
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("testdata/acp")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("testdata/acp", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// acpPlan is what client.mjs does.
type acpPlan struct {
	Cwd     string      `json:"cwd"`
	Load    string      `json:"load,omitempty"`
	Prompts []acpPrompt `json:"prompts"`
}

type acpPrompt struct {
	Text          string `json:"text"`
	Answer        string `json:"answer,omitempty"`
	CancelOnChunk bool   `json:"cancelOnChunk,omitempty"`
}

// acpEvent is one line of client.mjs's output.
type acpEvent struct {
	Ev         string          `json:"ev"`
	ID         string          `json:"id"`
	U          json.RawMessage `json:"u"`
	Params     json.RawMessage `json:"params"`
	Answer     string          `json:"answer"`
	StopReason string          `json:"stopReason"`
	Error      json.RawMessage `json:"error"`
	Init       json.RawMessage `json:"init"`
	MS         float64         `json:"ms"`
	raw        string
}

// runACPClient runs client.mjs with plan against `ctx acp AGENT`.
func (w *world) runACPClient(scripts string, plan acpPlan, agent string) []acpEvent {
	w.t.Helper()
	pj, _ := json.Marshal(plan)
	cmd := exec.Command("node", filepath.Join(scripts, "client.mjs"), string(pj), "--", w.ctxBin, "acp", agent)
	cmd.Env = w.env()
	cmd.Dir = plan.Cwd
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("client.mjs: %v\n%s\n%s", err, outb, stderr.String())
	}
	var evs []acpEvent
	sc := bufio.NewScanner(bytes.NewReader(outb))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e acpEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			w.t.Fatalf("client.mjs line %q: %v", sc.Text(), err)
		}
		e.raw = sc.Text()
		if e.Ev == "fatal" {
			w.t.Fatalf("client.mjs: %s\nstderr:\n%s", e.raw, stderr.String())
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 || evs[len(evs)-1].Ev != "end" {
		w.t.Fatalf("client.mjs did not finish:\n%s\nstderr:\n%s", outb, stderr.String())
	}
	return evs
}

func acpFind(evs []acpEvent, ev string) []acpEvent {
	var out []acpEvent
	for _, e := range evs {
		if e.Ev == ev {
			out = append(out, e)
		}
	}
	return out
}

// updatesOf returns the session/update kinds and the joined message text.
func updatesOf(evs []acpEvent) (kinds []string, text string) {
	var b strings.Builder
	for _, e := range acpFind(evs, "update") {
		var u struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Text string `json:"text"`
			} `json:"content"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal(e.U, &u)
		k := u.SessionUpdate
		if u.Status != "" {
			k += ":" + u.Status
		}
		kinds = append(kinds, k)
		if u.SessionUpdate == "agent_message_chunk" {
			b.WriteString(u.Content.Text)
		}
	}
	return kinds, b.String()
}

// TestACPEditorDrivesCtx: the official SDK's client drives `ctx acp` through
// a prompt with a tool call and a permission request answered both ways, a
// cancel mid-run, and a session/load after a daemon restart.
// spec: A2 A3 P4
func TestACPEditorDrivesCtx(t *testing.T) {
	scripts := acpScripts(t)
	w := newWorld(t)
	w.start("CTX_APPROVAL_TIMEOUT=30s")
	w.tool("mark", markTool)
	w.agent("demo", map[string]string{"tools": "mark\n", "approval": "ask\n"})
	ws := w.workspace()

	evs := w.runACPClient(scripts, acpPlan{Cwd: ws, Prompts: []acpPrompt{
		{Text: "tool mark", Answer: "reject"},
		{Text: "tool mark", Answer: "allow"},
		{Text: "echo hello editor"},
		{Text: "sleep 30", CancelOnChunk: true},
	}}, "demo")
	var init struct {
		AgentCapabilities struct {
			LoadSession        bool `json:"loadSession"`
			PromptCapabilities struct {
				Image bool `json:"image"`
			} `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
	}
	_ = json.Unmarshal(acpFind(evs, "initialize")[0].Init, &init)
	if !init.AgentCapabilities.LoadSession || init.AgentCapabilities.PromptCapabilities.Image {
		t.Errorf("capabilities: %s", acpFind(evs, "initialize")[0].raw)
	}
	sid := acpFind(evs, "session")[0].ID
	if !strings.HasPrefix(sid, "acp-") {
		t.Fatalf("session id %q", sid)
	}
	results := acpFind(evs, "result")
	if len(results) != 4 {
		t.Fatalf("results: %v\n%v", results, evs)
	}
	for i, want := range []string{"end_turn", "end_turn", "end_turn", "cancelled"} {
		if results[i].StopReason != want {
			t.Errorf("prompt %d: stopReason %q, want %q", i, results[i].StopReason, want)
		}
	}
	perms := acpFind(evs, "permission")
	if len(perms) != 2 || perms[0].Answer != "reject" || perms[1].Answer != "allow" {
		t.Fatalf("permissions: %v", perms)
	}
	kinds, text := updatesOf(evs)
	joined := strings.Join(kinds, " ")
	for _, want := range []string{"tool_call:pending", "tool_call_update:failed", "tool_call_update:in_progress", "tool_call_update:completed", "agent_message_chunk"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s among updates: %s", want, joined)
		}
	}
	if !strings.Contains(text, "echo: hello editor") {
		t.Errorf("message text %q", text)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
		t.Errorf("the allowed call did not run: %v", err)
	}
	// The durable record: the rejection and the allowance as the pinned
	// approve decisions, and the cancelled run.
	var decisions, dones []string
	for _, f := range w.events("demo", sid) {
		switch f.Type {
		case "approval":
			decisions = append(decisions, f.Decision)
		case "done":
			dones = append(dones, f.Status)
		}
	}
	if strings.Join(decisions, ",") != "deny,allow_once" || strings.Join(dones, ",") != "ok,ok,ok,cancelled" {
		t.Errorf("decisions %v dones %v", decisions, dones)
	}

	// session/load after a daemon restart replays the history.
	w.stop()
	w.start()
	evs = w.runACPClient(scripts, acpPlan{Cwd: ws, Load: sid}, "demo")
	kinds, text = updatesOf(evs)
	joined = strings.Join(kinds, " ")
	if strings.Count(joined, "user_message_chunk") != 4 || !strings.Contains(text, "echo: hello editor") || !strings.Contains(joined, "tool_call_update:completed") {
		t.Errorf("load replayed %s / %q", joined, text)
	}
}

// acpRaw is `ctx acp AGENT` driven by raw JSON-RPC lines: the bad-input
// tests need to send what no SDK would.
type acpRaw struct {
	t     testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	done  chan struct{}
	err   bytes.Buffer
}

func (w *world) acpRaw(dir, agent string) *acpRaw {
	w.t.Helper()
	cmd := exec.Command(w.ctxBin, "acp", agent)
	cmd.Env = w.env()
	cmd.Dir = dir
	r := &acpRaw{t: w.t, cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	cmd.Stderr = &r.err
	in, err := cmd.StdinPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	r.in = in
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	go func() { _ = cmd.Wait(); close(r.done) }()
	w.t.Cleanup(func() {
		in.Close()
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
	})
	return r
}

func (r *acpRaw) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("write to ctx acp: %v", err)
	}
}

// until reads lines until one contains want.
func (r *acpRaw) until(want string, timeout time.Duration) []string {
	r.t.Helper()
	var got []string
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("ctx acp closed stdout waiting for %q; got %v\nstderr: %s", want, got, r.err.String())
			}
			got = append(got, l)
			if strings.Contains(l, want) {
				return got
			}
		case <-deadline:
			r.t.Fatalf("no %q within %v; got %v\nstderr: %s", want, timeout, got, r.err.String())
		}
	}
}

func (r *acpRaw) newSession(ws string) string {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	r.until(`"id":1`, 10*time.Second)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":` + strconv.Quote(ws) + `,"mcpServers":[]}}`)
	l := r.until(`"id":2`, 10*time.Second)
	var resp struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(l[len(l)-1]), &resp)
	if resp.Result.SessionID == "" {
		r.t.Fatalf("session/new: %s", l[len(l)-1])
	}
	return resp.Result.SessionID
}

func promptLine(id int, sid, text string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/prompt",
		"params": map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": text}}}})
	return string(b)
}

// TestACPBadInput: malformed JSON-RPC and unknown methods get clear JSON-RPC
// errors and the connection stays usable; a bad cwd and an image are
// refused; an unknown session is refused.
func TestACPBadInput(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("demo", nil)
	ws := w.workspace()
	r := w.acpRaw(ws, "demo")
	sid := r.newSession(ws)
	for _, tc := range []struct{ line, want string }{
		{`{this is not json`, `"code":-32700`},
		{`[1,2,3]`, `"code":-32600`},
		{`{"jsonrpc":"2.0","id":10,"method":"no/such/method","params":{}}`, `"code":-32601`},
		{`{"jsonrpc":"2.0","id":11,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":12,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":13,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":14,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}}`, `"code":-32602`},
		{`{"jsonrpc":"2.0","id":15,"method":"session/load","params":{"sessionId":"../x","cwd":"` + ws + `","mcpServers":[]}}`, `"code":-32602`},
	} {
		r.send(tc.line)
		l := r.until(`"error"`, 10*time.Second)
		if !strings.Contains(l[len(l)-1], tc.want) {
			t.Errorf("%s → %s", tc.line, l[len(l)-1])
		}
	}
	// Still usable: a prompt completes.
	r.send(promptLine(20, sid, "echo still here"))
	l := r.until(`"id":20`, 20*time.Second)
	all := strings.Join(l, "\n")
	if !strings.Contains(all, "echo: still here") || !strings.Contains(l[len(l)-1], `"end_turn"`) {
		t.Errorf("prompt after bad input:\n%s", all)
	}
}

// TestACPClientDisappears: an editor that closes its end mid-prompt (and
// mid-approval) cancels the run; the run's frames are durable and end in
// done; ctx acp exits and no agent process is left. spec: X12 A3
func TestACPClientDisappears(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_APPROVAL_TIMEOUT=30s")
	w.tool("mark", markTool)
	w.agent("demo", map[string]string{"tools": "mark\n", "approval": "ask\n"})
	ws := w.workspace()

	// Mid-run.
	r := w.acpRaw(ws, "demo")
	sid := r.newSession(ws)
	marker := "acp-gone-" + strconv.Itoa(os.Getpid())
	r.send(promptLine(3, sid, "trap "+marker))
	r.until(`agent_message_chunk`, 20*time.Second)
	r.in.Close()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("ctx acp did not exit after stdin closed\n%s", r.err.String())
	}
	waitFor(t, "the run to end", 20*time.Second, func() bool {
		ev := w.events("demo", sid)
		return len(ev) > 0 && ev[len(ev)-1].Type == "done"
	})
	ev := w.events("demo", sid)
	if last := ev[len(ev)-1]; last.Status != "cancelled" {
		t.Errorf("the run ended %s", last.raw)
	}
	waitFor(t, "no process of the run", 10*time.Second, func() bool { return len(procsWith(marker)) == 0 })

	// Mid-approval: the question is never answered; closing stdin is eof.
	r = w.acpRaw(ws, "demo")
	sid = r.newSession(ws)
	r.send(promptLine(3, sid, "tool mark"))
	r.until(`session/request_permission`, 20*time.Second)
	r.in.Close()
	waitFor(t, "the run to end", 20*time.Second, func() bool {
		ev := w.events("demo", sid)
		return len(ev) > 0 && ev[len(ev)-1].Type == "done"
	})
	var decision string
	for _, f := range w.events("demo", sid) {
		if f.Type == "approval" {
			decision = f.Decision
		}
	}
	if decision == "allow_once" || decision == "" {
		t.Errorf("approval decision %q after the editor left", decision)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("the unapproved tool ran")
	}
}

// TestACPRetryNeverRunsTwice: an editor that lost its connection after a
// prompt, loads the session again and resends the same prompt gets the
// stored answer replayed; the tool ran once. With an explicit messageId the
// same holds without the load. spec: P4
func TestACPRetryNeverRunsTwice(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("count", "#!/bin/sh\necho x >> /workspace/count\necho counted\n")
	w.agent("demo", map[string]string{"tools": "count\n"})
	ws := w.workspace()
	r := w.acpRaw(ws, "demo")
	sid := r.newSession(ws)
	// The same prompt with a messageId, twice in one connection: one run.
	withMsg := `{"jsonrpc":"2.0","id":ID,"method":"session/prompt","params":{"sessionId":"` + sid + `","messageId":"m-1","prompt":[{"type":"text","text":"tool count"}]}}`
	r.send(strings.Replace(withMsg, "ID", "4", 1))
	r.until(`"id":4,`, 20*time.Second)
	r.send(strings.Replace(withMsg, "ID", "5", 1))
	r.until(`"id":5,`, 20*time.Second)
	// Without a messageId: a new turn, a new run.
	r.send(promptLine(6, sid, "tool count"))
	r.until(`"id":6,`, 20*time.Second)
	r.in.Close()
	<-r.done

	// Reconnect, load, resend the last prompt without messageId: replayed.
	r = w.acpRaw(ws, "demo")
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	r.until(`"id":1,`, 10*time.Second)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"` + sid + `","cwd":` + strconv.Quote(ws) + `,"mcpServers":[]}}`)
	r.until(`"id":2,`, 10*time.Second)
	r.send(promptLine(3, sid, "tool count"))
	l := r.until(`"id":3,`, 20*time.Second)
	if !strings.Contains(l[len(l)-1], "end_turn") {
		t.Errorf("retry answered %s", l[len(l)-1])
	}
	b, _ := os.ReadFile(filepath.Join(ws, "count"))
	// Runs: the messageId prompt once, the turn prompt once. The messageId
	// repeat and the post-load retry replayed.
	if n := strings.Count(string(b), "x"); n != 2 {
		t.Errorf("the tool ran %d times, want 2", n)
	}
	var users int
	for _, f := range w.events("demo", sid) {
		if f.Type == "user" {
			users++
		}
	}
	if users != 2 {
		t.Errorf("%d user frames, want 2", users)
	}
}
