package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// acpxLine is one JSON-RPC message acpx printed with --format json (what
// it sent to `ctx acp` and what it got back), or one of its own results.
type acpxLine struct {
	raw    string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID  string            `json:"sessionId"`
		McpServers []json.RawMessage `json:"mcpServers"`
		Update     struct {
			SessionUpdate string `json:"sessionUpdate"`
			Status        string `json:"status"`
			Content       json.RawMessage
		} `json:"update"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Action    string `json:"action"`
	SessionID string `json:"acpxSessionId"`
	Cancelled bool   `json:"cancelled"`
}

type acpxRun struct {
	lines  []acpxLine
	stdout string
	stderr string
	code   int
}

func (r acpxRun) methods() []string {
	var m []string
	for _, l := range r.lines {
		if l.Method != "" {
			m = append(m, l.Method)
		}
	}
	return m
}

// text is every agent_message_chunk's text, joined.
func (r acpxRun) text() string {
	var b strings.Builder
	for _, l := range r.lines {
		if l.Params.Update.SessionUpdate == "agent_message_chunk" {
			var c struct{ Text string }
			_ = json.Unmarshal(l.Params.Update.Content, &c)
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// stopReason is the answer to the session/prompt, "" when none came.
func (r acpxRun) stopReason() string {
	prompt := ""
	for _, l := range r.lines {
		if l.Method == "session/prompt" {
			prompt = string(l.ID)
		}
	}
	for _, l := range r.lines {
		if prompt != "" && l.Method == "" && string(l.ID) == prompt && l.Result != nil {
			var res struct{ StopReason string }
			_ = json.Unmarshal(l.Result, &res)
			return res.StopReason
		}
	}
	return ""
}

// acpxCmd is the real acpx driving `ctx acp AGENT` as its raw agent
// command, in workspace ws, with its state under the world's HOME. Each
// call is a new acpx process (--ttl 1: its queue owner, which holds the
// `ctx acp` process, ends a second after its last prompt), so every
// prompt after `sessions new` reaches ctx through a session/load.
func (w *world) acpxCmd(acpx, agent, ws string, args ...string) *exec.Cmd {
	all := append([]string{"--agent", w.ctxBin + " acp " + agent, "--cwd", ws, "--format", "json", "--ttl", "1", "--timeout", "60"}, args...)
	cmd := exec.Command(acpx, all...)
	cmd.Dir = ws
	cmd.Env = w.env("ACPX_NO_UPDATE_CHECK=1", "NO_UPDATE_NOTIFIER=1", "DO_NOT_TRACK=1")
	return cmd
}

// acpx runs one acpx command. Except for `cancel` (which talks to the
// live queue owner), it first waits for the previous `ctx acp` process of
// the agent to be gone, so each call starts a new one; a queue owner
// caught shutting down (acpx says QUEUE_OWNER_CLOSED, retryable) is
// waited out and the call made again.
func (w *world) acpx(acpx, agent, ws string, args ...string) acpxRun {
	w.t.Helper()
	for attempt := 0; ; attempt++ {
		if args[len(args)-1] != "cancel" {
			marker := w.ctxBin + "\x00acp\x00" + agent + "\x00"
			deadline := time.Now().Add(20 * time.Second)
			for len(procsWith(marker)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		cmd := w.acpxCmd(acpx, agent, ws, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		r := acpxRun{stdout: o.String(), stderr: e.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			w.t.Fatal(err)
		}
		r.lines = parseACPX(r.stdout)
		if attempt < 5 && strings.Contains(r.stdout+r.stderr, "QUEUE_OWNER_CLOSED") {
			time.Sleep(time.Second)
			continue
		}
		return r
	}
}

func parseACPX(out string) []acpxLine {
	var lines []acpxLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(s, "{") {
			continue
		}
		var l acpxLine
		if json.Unmarshal([]byte(s), &l) == nil {
			l.raw = s
			lines = append(lines, l)
		}
	}
	return lines
}

// acpxMCPConfig writes an acpx --mcp-config file.
func acpxMCPConfig(t *testing.T, dir string, servers ...map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	p := filepath.Join(dir, fmt.Sprintf("mcp-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestACPXDrivesCtx: the real ACP client acpx drives `ctx acp` through
// initialize, session/new with an editor MCP server, a session/load from a
// second acpx process before the first prompt (the session is durable at
// session/new), a streamed prompt, a tool call denied and allowed by
// permission (the agent is in ask mode), the editor's MCP server's tool
// called by the agent with its env value reaching only that server, a
// cancel from another acpx process, and a load after the prompts — with
// the frames checked in the session's events.jsonl; another session does
// not see the server, and removing the session removes it.
// spec: A2 A3 (README "Editors over ACP")
func TestACPXDrivesCtx(t *testing.T) {
	acpx := acpAgentBin(t, "acpx")
	w := newWorld(t)
	w.start("CTX_APPROVAL_TIMEOUT=30s")
	w.tool("mark", markTool)
	w.agent("demo", map[string]string{"tools": "mark\n", "approval": "ask\n", "policy": "allow tool *\n"})
	ws := w.workspace()
	const secret = "s3cret-e2e-8c1f0d"
	// Two editor servers: the e2e fake, and the real everything server by
	// its npm bin (resolved to node + script with its node_modules bound).
	npm := needServers(t)
	cfg := acpxMCPConfig(t, filepath.Dir(w.root), map[string]any{
		"name": "ed", "command": binDir + "/mcpfake", "args": []string{"ok"},
		"env": []map[string]string{{"name": "ED_TOKEN", "value": secret}},
	}, map[string]any{"name": "every", "command": npmBin(npm, "everything"), "args": []string{}, "env": []any{}})
	mcpArgs := []string{"--mcp-config", cfg}

	// initialize and session/new: the session exists on disk at once.
	r := w.acpx(acpx, "demo", ws, append(mcpArgs, "sessions", "new")...)
	sid := ""
	for _, l := range r.lines {
		if l.Action == "session_ensured" {
			sid = l.SessionID
		}
	}
	if r.code != 0 || !strings.HasPrefix(sid, "acp-") {
		t.Fatalf("sessions new: exit %d, session %q\n%s\n%s", r.code, sid, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(w.sessionDir("demo", sid), "events.jsonl")); err != nil {
		t.Fatalf("session/new answered but the session is not on disk: %v", err)
	}
	decl := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "secrets", "mcp-session", "demo", sid)
	if b, err := os.ReadFile(filepath.Join(decl, "mcp.json")); err != nil || !strings.Contains(string(b), "mcpfake") || !strings.Contains(string(b), "server-everything") || strings.Contains(string(b), secret) {
		t.Errorf("the session's MCP declaration: %v\n%s", err, b)
	}
	if st, err := os.Stat(filepath.Join(decl, "ed.env")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the env file: %v %v", st, err)
	}

	// A second acpx process: session/load before any prompt, then a
	// streamed prompt.
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "prompt", "echo hello acpx")...)
	var caps struct {
		AgentCapabilities struct {
			LoadSession     bool `json:"loadSession"`
			McpCapabilities struct {
				HTTP bool `json:"http"`
				SSE  bool `json:"sse"`
			} `json:"mcpCapabilities"`
		} `json:"agentCapabilities"`
	}
	for _, l := range r.lines {
		if string(l.ID) == "0" && l.Result != nil {
			_ = json.Unmarshal(l.Result, &caps)
		}
	}
	if !caps.AgentCapabilities.LoadSession || !caps.AgentCapabilities.McpCapabilities.HTTP || caps.AgentCapabilities.McpCapabilities.SSE {
		t.Errorf("initialize capabilities: %+v\n%s", caps, r.stdout)
	}
	if m := strings.Join(r.methods(), " "); !strings.Contains(m, "session/load") || strings.Contains(m, "session/new") {
		t.Errorf("the second process did not load the session: %s", m)
	}
	for _, l := range r.lines {
		if l.Method == "session/load" && l.Params.SessionID != sid {
			t.Errorf("loaded %q, want %q", l.Params.SessionID, sid)
		}
		if l.Error != nil {
			t.Errorf("error answer: %s", l.raw)
		}
	}
	if r.code != 0 || r.stopReason() != "end_turn" || !strings.Contains(r.text(), "echo: hello acpx") {
		t.Fatalf("prompt: exit %d stop %q text %q\n%s\n%s", r.code, r.stopReason(), r.text(), r.stdout, r.stderr)
	}

	// Permission: rejected, then allowed.
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "--deny-all", "prompt", "tool mark")...)
	if m := strings.Join(r.methods(), " "); !strings.Contains(m, "session/request_permission") || r.stopReason() != "end_turn" || !strings.Contains(r.text(), "denied") {
		t.Errorf("denied call: %s / %q", m, r.text())
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("the rejected tool ran")
	}
	// Another text: the same text right after a load is taken as the
	// editor retrying the last prompt, and replayed (P4).
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "--approve-all", "prompt", "tool mark again")...)
	if r.stopReason() != "end_turn" || !strings.Contains(r.text(), "ok:ran") {
		t.Errorf("allowed call: %q\n%s", r.text(), r.stdout)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
		t.Errorf("the allowed tool did not run: %v", err)
	}

	// The editor's MCP server: listed by tsh, its tool called with the
	// env value the editor gave (seen only by the server).
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "--approve-all", "prompt", "tool tsh list")...)
	if !strings.Contains(r.text(), "ed.getenv") || !strings.Contains(r.text(), "every.echo") {
		t.Errorf("tsh list does not show the editor's server: %q", r.text())
	}
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "--approve-all", "prompt", "tool tsh call ed.getenv name=ED_TOKEN")...)
	if r.stopReason() != "end_turn" || !strings.Contains(r.text(), "ok:ED_TOKEN set=true") {
		t.Errorf("MCP call: %q\n%s\n%s", r.text(), r.stdout, r.stderr)
	}
	// The server still runs (idle timeout 5m): its value is on no command
	// line but acpx's own (acpx's business, not ctx's).
	for _, pid := range procsWith(secret) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); !bytes.Contains(b, []byte("acpx")) {
			t.Errorf("pid %d has the MCP env value on its command line: %q", pid, b)
		}
	}
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "--approve-all", "prompt", "tool tsh call every.echo message=from-the-editor")...)
	if r.stopReason() != "end_turn" || !strings.Contains(r.text(), "ok:Echo: from-the-editor") {
		t.Errorf("the real server's call: %q\n%s\n%s", r.text(), r.stdout, r.stderr)
	}

	// Cancel from another acpx process while a prompt streams. Like
	// w.acpx, start it once the previous `ctx acp` (a queue owner with a
	// 1 s ttl) is gone: one caught shutting down takes the prompt with it.
	marker := w.ctxBin + "\x00acp\x00demo\x00"
	for deadline := time.Now().Add(20 * time.Second); len(procsWith(marker)) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	long := w.acpxCmd(acpx, "demo", ws, append(mcpArgs, "prompt", "sleep 30")...)
	out := &syncBuffer{}
	long.Stdout, long.Stderr = out, out
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	longDone := make(chan error, 1)
	go func() { longDone <- long.Wait() }()
	// acpx (node) and its queue owner start slowly on a loaded machine
	// (CI runs other packages beside): the wait is acpx's own --timeout.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the long prompt's acpx output:\n%s", out.String())
		}
	})
	waitFor(t, "the long prompt to stream", 60*time.Second, func() bool { return strings.Contains(out.String(), "sleeping") })
	c := w.acpx(acpx, "demo", ws, "cancel")
	cancelled := false
	for _, l := range c.lines {
		cancelled = cancelled || (l.Action == "cancel_result" && l.Cancelled)
	}
	if !cancelled {
		t.Errorf("acpx cancel: %s %s", c.stdout, c.stderr)
	}
	select {
	case <-longDone:
	case <-time.After(30 * time.Second):
		_ = long.Process.Kill()
		t.Fatalf("the cancelled prompt did not end:\n%s", out)
	}
	if lr := (acpxRun{lines: parseACPX(out.String())}); lr.stopReason() != "cancelled" || !strings.Contains(strings.Join(lr.methods(), " "), "session/cancel") {
		t.Errorf("cancelled prompt: stop %q\n%s", lr.stopReason(), out)
	}

	// A load after the prompts still works and the next prompt runs.
	r = w.acpx(acpx, "demo", ws, append(mcpArgs, "prompt", "echo after")...)
	if r.stopReason() != "end_turn" || !strings.Contains(r.text(), "echo: after") {
		t.Errorf("prompt after load: %q\n%s", r.text(), r.stdout)
	}

	// The durable record.
	var users, decisions, dones []string
	mcpOK := false
	for _, f := range w.events("demo", sid) {
		switch f.Type {
		case "user":
			users = append(users, f.Text)
		case "approval":
			decisions = append(decisions, f.Decision)
		case "done":
			dones = append(dones, f.Status)
		case "tool_result":
			mcpOK = mcpOK || strings.Contains(f.raw, "ED_TOKEN set=true")
		}
	}
	if got := strings.Join(users, "|"); got != "echo hello acpx|tool mark|tool mark again|tool tsh list|tool tsh call ed.getenv name=ED_TOKEN|tool tsh call every.echo message=from-the-editor|sleep 30|echo after" {
		t.Errorf("user frames: %s", got)
	}
	if got := strings.Join(decisions, ","); got != "deny,allow_once,allow_once,allow_once,allow_once" {
		t.Errorf("approval decisions: %s", got)
	}
	if got := strings.Join(dones, ","); got != "ok,ok,ok,ok,ok,ok,cancelled,ok" {
		t.Errorf("done statuses: %s", got)
	}
	if !mcpOK {
		t.Error("no tool_result of the MCP call in events.jsonl")
	}
	// The env value is in the server's owner-only file and nowhere in the
	// session's record or the daemon's log.
	filepath.Walk(w.sessionDir("demo", sid), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the MCP env value", p)
			}
		}
		return nil
	})
	if strings.Contains(w.log.String(), secret) {
		t.Error("the daemon log holds the MCP env value")
	}

	// Another session of the agent never sees the server.
	cl := w.dial("demo")
	cl.send(sendReq("other-1", "tool tsh call ed.getenv name=ED_TOKEN", "session", "other", "workspace", ws))
	fs := cl.until("done", 30*time.Second)
	for _, f := range fs {
		if f.Type == "tool_result" && strings.Contains(f.raw, "set=true") {
			t.Errorf("another session reached the editor's server: %s", f.raw)
		}
	}

	// Removing the session removes its servers.
	w.mustCtx("agent", "rm-session", "demo", sid)
	if _, err := os.Stat(decl); !os.IsNotExist(err) {
		t.Errorf("the session's MCP declaration outlived it: %v", err)
	}
}

// TestACPXRefusesMCPServers: a server ctx cannot honour makes session/new
// answer a JSON-RPC error naming it and why — `npx` (with the install fix)
// and an http URL the agent's network grants do not reach — and nothing is
// made; with `net local` granting the URL's address the same http server
// is accepted and its tool called. spec: V3 (an editor's server is never dropped silently)
func TestACPXRefusesMCPServers(t *testing.T) {
	acpx := acpAgentBin(t, "acpx")
	w := newWorld(t)
	w.start()
	w.agent("demo", nil)
	ws := w.workspace()
	// A streamable HTTP MCP server on this host's loopback (the SDK's).
	ln, _ := mcpHTTPFake(t)
	url := "http://" + ln.Addr().String() + "/mcp"
	dir := filepath.Dir(w.root)

	for _, tc := range []struct {
		name   string
		server map[string]any
		want   []string
	}{
		{"npx", map[string]any{"name": "fetcher", "command": "npx", "args": []string{"-y", "@acme/mcp-server-nowhere"}, "env": []any{}},
			[]string{`"fetcher"`, "download code", "npm install -g @acme/mcp-server-nowhere"}},
		{"http", map[string]any{"name": "web", "type": "http", "url": url, "headers": []any{}},
			[]string{`"web"`, "net local " + ln.Addr().String()}},
		{"sse", map[string]any{"name": "old", "type": "sse", "url": url, "headers": []any{}},
			[]string{`"old"`, "SSE"}},
	} {
		r := w.acpx(acpx, "demo", ws, "--mcp-config", acpxMCPConfig(t, dir, tc.server), "sessions", "new")
		var msg string
		for _, l := range r.lines {
			if l.Error != nil {
				msg = l.Error.Message
			}
		}
		if r.code == 0 || msg == "" {
			t.Errorf("%s: exit %d, no error\n%s\n%s", tc.name, r.code, r.stdout, r.stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the error %q does not say %q", tc.name, msg, want)
			}
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", "demo", "session")); len(ents) != 0 {
		t.Errorf("refused session/new made sessions: %v", ents)
	}

	// Granted: the same http server is the session's.
	if err := os.WriteFile(filepath.Join(w.root, "agent", "demo.d", "mount"), []byte("net local "+ln.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.acpx(acpx, "demo", ws, "--mcp-config", acpxMCPConfig(t, dir, map[string]any{"name": "web", "type": "http", "url": url, "headers": []any{}}), "sessions", "new")
	sid := ""
	for _, l := range r.lines {
		if l.Action == "session_ensured" {
			sid = l.SessionID
		}
	}
	if r.code != 0 || sid == "" {
		t.Fatalf("granted http server refused: %s\n%s", r.stdout, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "secrets", "mcp-session", "demo", sid, "mcp.json"))
	if err != nil || !strings.Contains(string(b), url) {
		t.Errorf("declaration: %v %s", err, b)
	}
	// ... and its tool is called through tsh.
	r = w.acpx(acpx, "demo", ws, "--mcp-config", acpxMCPConfig(t, dir, map[string]any{"name": "web", "type": "http", "url": url, "headers": []any{}}), "prompt", "tool tsh call web.ping word=loopback")
	if r.stopReason() != "end_turn" || !strings.Contains(r.text(), "ok:pong loopback") {
		t.Errorf("http server call: %q\n%s\n%s", r.text(), r.stdout, r.stderr)
	}
}
