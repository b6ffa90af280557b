package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/cgroup"
)

// Real ACP agents under ctx: OpenCode's `opencode acp` and Claude Code's ACP
// adapter (@zed-industries/claude-code-acp), both as installed by
// scripts/acp-agents.sh, run as `acp-v1` agents offline against a scripted
// Anthropic Messages provider on 127.0.0.1 that each reaches only through
// its `.d/mount` line `net local 127.0.0.1:PORT` (docs/walls.md "The
// network"). One `ctx agent send` makes each read a file, write a new file
// and run a shell command. spec: README "Bring your own agent".

// scriptStep is one tool use the scripted model asks for: the first of
// names that the request offers as a tool, with input.
type scriptStep struct {
	names []string
	input map[string]any
}

// anthropicProvider is a scripted Anthropic Messages API on 127.0.0.1. The
// step a request is at is the number of tool_result blocks it carries: step
// i < len(steps) asks for steps[i]; after the last it answers final. A
// request that offers none of the step's tools (a title or summary side
// request) is answered with short text. Every request is recorded.
type anthropicProvider struct {
	srv   *http.Server
	addr  string
	steps []scriptStep
	final string

	mu   sync.Mutex
	reqs []providerReq
}

type providerReq struct {
	Path string
	Body map[string]any
	raw  string
}

func newAnthropicProvider(t *testing.T, final string, steps ...scriptStep) *anthropicProvider {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &anthropicProvider{addr: l.Addr().String(), steps: steps, final: final}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(l)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

func (p *anthropicProvider) requests() []providerReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]providerReq(nil), p.reqs...)
}

func (p *anthropicProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var raw strings.Builder
	var body map[string]any
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20))
	_ = dec.Decode(&body)
	if b, err := json.Marshal(body); err == nil {
		raw.Write(b)
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, providerReq{Path: r.URL.Path, Body: body, raw: raw.String()})
	p.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"input_tokens":100}`))
		return
	case !strings.HasSuffix(r.URL.Path, "/messages"):
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"scripted provider: only /v1/messages"}}`, http.StatusNotFound)
		return
	}
	model, _ := body["model"].(string)
	offered := map[string]bool{}
	if tools, ok := body["tools"].([]any); ok {
		for _, x := range tools {
			if m, ok := x.(map[string]any); ok {
				if n, ok := m["name"].(string); ok {
					offered[n] = true
				}
			}
		}
	}
	step := countToolResults(body)
	var blocks []map[string]any
	stop := "end_turn"
	switch {
	case step < len(p.steps):
		name := ""
		for _, n := range p.steps[step].names {
			if offered[n] {
				name = n
				break
			}
		}
		if name == "" {
			blocks = append(blocks, map[string]any{"type": "text", "text": "ctx scripted title"})
			break
		}
		blocks = append(blocks, map[string]any{"type": "text", "text": fmt.Sprintf("Step %d.", step+1)})
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", step+1), "name": name, "input": p.steps[step].input})
		stop = "tool_use"
	default:
		blocks = append(blocks, map[string]any{"type": "text", "text": p.final})
	}
	if s, _ := body["stream"].(bool); !s {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 100, "output_tokens": 20}})
		return
	}
	writeAnthropicSSE(w, model, blocks, stop)
}

// countToolResults is the number of tool_result blocks in the messages.
func countToolResults(body map[string]any) int {
	n := 0
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		cs, _ := mm["content"].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok && cm["type"] == "tool_result" {
				n++
			}
		}
	}
	return n
}

// writeAnthropicSSE streams blocks as the Messages API does: message_start,
// per block content_block_start/_delta (text_delta or input_json_delta in
// two pieces)/_stop, message_delta with the stop reason, message_stop.
func writeAnthropicSSE(w http.ResponseWriter, model string, blocks []map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	ev("message_start", map[string]any{"message": map[string]any{"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 100, "output_tokens": 1}}})
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			ev("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			half := len(in) / 2
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in[:half])}})
			ev("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in[half:])}})
		}
		ev("content_block_stop", map[string]any{"index": i})
	}
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 20}})
	ev("message_stop", map[string]any{})
}

// realAgentCase is one real agent: how to create it and configure it for
// the provider at addr.
type realAgentCase struct {
	bin    string
	args   []string
	env    func(addr string) string // .d/env
	secret string                   // K=V lines of the secrets file
	keys   []string                 // acp.json env keys
	steps  []scriptStep
	// protect: the agent's .d/protect, when it needs one.
	protect string
	// terminal: its shell tool runs through ACP terminal/create.
	terminal bool
	// refused: the hosts it tries to reach whatever its settings say
	// (refused by the proxy; under the e2e harness not even resolved).
	refused []string
}

// runRealAgent creates the agent, sends one prompt with `ctx agent send`
// from the workspace, and checks the run end to end.
// setupRealAgent starts a daemon and the scripted provider, creates the
// agent with approval mode approval, and makes the workspace.
func setupRealAgent(t *testing.T, name, approval, final string, c realAgentCase) (*world, *anthropicProvider, string) {
	w := newWorld(t)
	p := newAnthropicProvider(t, final, c.steps...)
	w.start()
	cmd := []string{"agent", "create", name, "--abi", "acp-v1", "--exec", c.bin, "--approval", approval}
	if len(c.args) > 0 {
		cmd = append(append(cmd, "--"), c.args...)
	}
	w.mustCtx(cmd...)
	dd := filepath.Join(w.root, "agent", name+".d")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dd, "mount"), []byte("net local "+p.addr+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(dd, "env"), []byte(c.env(p.addr)), 0o644))
	if c.protect != "" {
		must(os.WriteFile(filepath.Join(dd, "protect"), []byte(c.protect), 0o644))
	}
	if len(c.keys) > 0 {
		b, err := os.ReadFile(filepath.Join(dd, "acp.json"))
		must(err)
		var decl map[string]any
		must(json.Unmarshal(b, &decl))
		decl["env"] = c.keys
		b, _ = json.Marshal(decl)
		w.mustCtx("agent", "set", name, "acp.json", string(b))
		sec := filepath.Join(w.root, "home", itoa(os.Getuid()), "secrets", "agent")
		must(os.MkdirAll(sec, 0o700))
		must(os.WriteFile(filepath.Join(sec, name+".env"), []byte(c.secret), 0o600))
	}
	ws := w.workspace()
	must(os.WriteFile(filepath.Join(ws, "in.txt"), []byte("hello from the host 7731\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "listed-marker.txt"), []byte("x\n"), 0o644))
	return w, p, ws
}

func runRealAgent(t *testing.T, name string, c realAgentCase) {
	final := "All three steps are done."
	w, p, ws := setupRealAgent(t, name, "auto", final, c)

	// The run's processes are those in this daemon's cgroups: count them
	// while the run lasts (so the check after it is not vacuous).
	base := cgroup.BaseName(os.Getuid(), w.root)
	stopPoll, peak := make(chan struct{}), make(chan int, 1)
	go func() {
		m := 0
		for {
			m = max(m, len(procsInCgroup(base)))
			select {
			case <-stopPoll:
				peak <- m
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	r := w.ctx(ws, "", "agent", "send", name, "Read in.txt, write new.txt, then list the workspace.")
	took := time.Since(start)
	close(stopPoll)
	if n := <-peak; n < 2 {
		t.Errorf("at most %d processes seen in the run's cgroup %s during the run", n, base)
	} else {
		t.Logf("%s: up to %d processes in the run's cgroup", name, n)
	}
	t.Logf("%s: ctx agent send took %v (exit %d)", name, took.Round(time.Millisecond), r.code)
	ev := w.events(name, "default")
	t.Logf("events.jsonl:\n%s", rawFrames(ev))
	if r.code != 0 || !strings.Contains(r.stdout, final) {
		t.Errorf("ctx agent send: exit %d\nstdout:\n%s\nstderr:\n%s\nevents:\n%s", r.code, r.stdout, r.stderr, rawFrames(ev))
	}
	if d := lastOf(ev, "done"); d.Status != "ok" {
		t.Errorf("done %q", d.raw)
	}
	if a := lastOf(ev, "assistant"); !strings.Contains(a.Text, final) {
		t.Errorf("assistant %q", a.Text)
	}
	// Every step is a tool_call with its ok tool_result in events.jsonl:
	// the agent's reported calls of kinds read, edit, execute in order,
	// the file's content and the listing among the results.
	status := map[string]string{}
	var results strings.Builder
	for _, f := range ev {
		if f.Type == "tool_result" {
			status[f.CallID] = f.Status
			results.WriteString(f.Content + "\n")
		}
	}
	var kinds []string
	for _, f := range ev {
		if f.Type == "tool_call" && f.Name == "acp" && len(f.Args) > 0 {
			kinds = append(kinds, f.Args[0])
			if status[f.CallID] != "ok" {
				t.Errorf("tool_call %s: result %q", f.raw, status[f.CallID])
			}
		}
	}
	if strings.Join(kinds, " ") != "read edit execute" {
		t.Errorf("reported tool calls %v, want [read edit execute]", kinds)
	}
	for _, want := range []string{"hello from the host 7731", "listed-marker.txt"} {
		if !strings.Contains(results.String(), want) {
			t.Errorf("no tool_result holds %q", want)
		}
	}
	if c.terminal {
		// Its shell command ran as ctx's terminal: recorded with its command line.
		tc := lastOf(ev, "tool_call")
		for _, f := range ev {
			if f.Type == "tool_call" && f.Name == "terminal" {
				tc = f
			}
		}
		if tc.Name != "terminal" || !strings.Contains(strings.Join(tc.Args, " "), "ls /workspace") || status[tc.CallID] != "ok" {
			t.Errorf("no ok terminal call running ls /workspace: %s", tc.raw)
		}
	}
	// Offline: the agent reached nothing but the scripted provider. What
	// else it tried is refused by the daemon's proxy, which logs it; only
	// the targets the case names (and cannot turn off) may appear.
	for _, l := range strings.Split(w.log.String(), "\n") {
		if !strings.Contains(l, "egress refused") {
			continue
		}
		known := false
		for _, k := range c.refused {
			known = known || strings.Contains(l, "target="+k+" ")
		}
		if !known {
			t.Errorf("the agent tried to reach something else: %s", l)
		}
	}
	// The new file is on the host with the content the model asked for.
	if b, err := os.ReadFile(filepath.Join(ws, "new.txt")); err != nil || string(b) != "written by the agent 4410\n" {
		t.Errorf("new.txt = %q, %v", b, err)
	}
	// The provider saw each tool's result: the file read, the write, the listing.
	reqs := p.requests()
	var last string
	for _, q := range reqs {
		if countToolResults(q.Body) >= 3 {
			last = q.raw
		}
	}
	if last == "" {
		t.Errorf("no request carried the three tool results; %d requests:\n%s", len(reqs), dumpReqs(reqs))
	}
	for _, want := range []string{"hello from the host 7731", "listed-marker.txt"} {
		if !strings.Contains(last, want) {
			t.Errorf("the provider never saw %q in the tool results", want)
		}
	}
	waitFor(t, "no process of the run left", 10*time.Second, func() bool { return len(procsInCgroup(base)) == 0 })
	if t.Failed() {
		t.Logf("provider requests:\n%s", dumpReqs(reqs))
	}
}

// procsInCgroup lists host pids in a cgroup whose path holds base (the
// daemon's ctx-<uid>-<hash> runs).
func procsInCgroup(base string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cgroup"); err == nil && strings.Contains(string(b), "/"+base+"/") {
			out = append(out, pid)
		}
	}
	return out
}

func dumpReqs(reqs []providerReq) string {
	var b strings.Builder
	for _, q := range reqs {
		s := q.raw
		if len(s) > 3000 {
			s = s[len(s)-3000:]
		}
		fmt.Fprintf(&b, "%s …%s\n", q.Path, s)
	}
	return b.String()
}

// TestRealAgentClaudeCode: Claude Code through its ACP adapter reads,
// writes a new file and runs `ls` (its ACP-backed Read/Write/Bash tools:
// fs/read_text_file, fs/write_text_file, terminal/create).
func TestRealAgentClaudeCode(t *testing.T) {
	runRealAgent(t, "claude", claudeCase(acpAgentBin(t, "claude-code-acp")))
}

// claudeCase is Claude Code's ACP adapter as the README's recipe sets it up.
func claudeCase(bin string) realAgentCase {
	return realAgentCase{
		bin: bin,
		env: func(addr string) string {
			return "PATH=/usr/local/bin:/usr/bin:/bin\n" +
				"ANTHROPIC_BASE_URL=http://" + addr + "\n" +
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n" +
				"DISABLE_AUTOUPDATER=1\nDISABLE_TELEMETRY=1\nDISABLE_ERROR_REPORTING=1\n"
		},
		secret:   "ANTHROPIC_API_KEY=sk-ant-dummy\n",
		terminal: true,
		// Not turned off by CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC.
		refused: []string{"api.anthropic.com:443"},
		keys:    []string{"ANTHROPIC_API_KEY"},
		steps: []scriptStep{
			{names: []string{"mcp__acp__Read", "Read"}, input: map[string]any{"file_path": "/workspace/in.txt"}},
			{names: []string{"mcp__acp__Write", "Write"}, input: map[string]any{"file_path": "/workspace/new.txt", "content": "written by the agent 4410\n"}},
			{names: []string{"mcp__acp__Bash", "Bash"}, input: map[string]any{"command": "ls /workspace", "description": "List the workspace", "timeout": 60000}},
		},
	}
}

// TestRealAgentClaudeCodeAsk: in `ask` mode Claude Code's permission
// requests (its Write and Bash) and the terminal behind its Bash are ctx
// approval requests; each allowed once, the run completes as in auto mode.
func TestRealAgentClaudeCodeAsk(t *testing.T) {
	final := "All three steps are done."
	w, _, ws := setupRealAgent(t, "claude", "ask", final, claudeCase(acpAgentBin(t, "claude-code-acp")))
	c := w.dial("claude")
	c.send(sendReq("msg-1", "Read in.txt, write new.txt, then list the workspace.", "workspace", ws))
	var asked []string
	var fs []frame
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		f, err := c.next(time.Until(deadline))
		if err != nil {
			t.Fatalf("%v after:\n%s", err, rawFrames(fs))
		}
		fs = append(fs, f)
		if f.Type == "approval_request" {
			asked = append(asked, f.Name+":"+strings.Join(f.Args, " "))
			c.send(map[string]any{"op": "approve", "run": f.Run, "id": f.ID, "decision": "allow_once"})
		}
		if f.Type == "done" {
			break
		}
	}
	t.Logf("approval requests: %q", asked)
	if d := lastOf(fs, "done"); d.Status != "ok" || !strings.Contains(lastOf(fs, "assistant").Text, final) {
		t.Fatalf("done %s\n%s", d.raw, rawFrames(fs))
	}
	// Write and Bash ask (reading does not); the terminal behind the Bash
	// asks once more (README: a command is asked twice in ask mode).
	var write, bash, term bool
	for _, a := range asked {
		write = write || strings.Contains(a, "Write")
		bash = bash || strings.Contains(a, "ls /workspace") && strings.HasPrefix(a, "acp:")
		term = term || strings.HasPrefix(a, "terminal:") && strings.Contains(a, "ls /workspace")
	}
	if !write || !bash || !term || len(asked) != 3 {
		t.Errorf("approval requests %q: want exactly Claude Code's Write and Bash and ctx's terminal running ls", asked)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "new.txt")); err != nil || string(b) != "written by the agent 4410\n" {
		t.Errorf("new.txt = %q, %v", b, err)
	}
	approvals := 0
	for _, f := range w.events("claude", "default") {
		if f.Type == "approval" && f.Decision == "allow_once" {
			approvals++
		}
	}
	if approvals != len(asked) {
		t.Errorf("%d allow_once approvals in events.jsonl, %d requests", approvals, len(asked))
	}
}

// TestRealAgentOpenCode: `opencode acp` with its bundled anthropic provider
// pointed at the scripted one reads, writes a new file and runs `ls` (its
// own tools, run inside ctx's sandbox and reported as tool calls).
func TestRealAgentOpenCode(t *testing.T) {
	bin := acpAgentBin(t, "opencode")
	runRealAgent(t, "oc", realAgentCase{
		bin:  bin,
		args: []string{"acp"},
		// It writes /workspace/.opencode/.gitignore at every start, and
		// .opencode is protected (its plugins are code the person's own
		// opencode runs): the recipe grants it, the run-end audit reports
		// what changed there.
		protect: "writable .opencode\n",
		// Its config directory's background install of @opencode-ai/plugin
		// (a warning in its log when refused).
		refused: []string{"registry.npmjs.org:443"},
		env: func(addr string) string {
			// The README's recipe, with the scripted provider's address.
			cfg := `{"model":"anthropic/claude-sonnet-4-5","autoupdate":false,"share":"disabled",` +
				`"permission":{"edit":"allow","bash":"allow"},` +
				`"provider":{"anthropic":{"options":{"baseURL":"http://` + addr + `/v1"}}}}`
			return "PATH=/usr/local/bin:/usr/bin:/bin\n" +
				"OPENCODE_CONFIG_CONTENT=" + cfg + "\n" +
				"OPENCODE_DISABLE_AUTOUPDATE=1\nOPENCODE_DISABLE_MODELS_FETCH=1\nOPENCODE_DISABLE_SHARE=1\n" +
				"OPENCODE_DISABLE_LSP_DOWNLOAD=1\nOPENCODE_DISABLE_DEFAULT_PLUGINS=1\nOPENCODE_DISABLE_CLAUDE_CODE=1\n"
		},
		secret: "ANTHROPIC_API_KEY=sk-ant-dummy\n",
		keys:   []string{"ANTHROPIC_API_KEY"},
		steps: []scriptStep{
			{names: []string{"read"}, input: map[string]any{"filePath": "/workspace/in.txt"}},
			{names: []string{"write"}, input: map[string]any{"filePath": "/workspace/new.txt", "content": "written by the agent 4410\n"}},
			{names: []string{"bash"}, input: map[string]any{"command": "ls /workspace", "description": "List the workspace"}},
		},
	})
}
