package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
		t.Skip("the ACP TypeScript SDK is not installed: run scripts/acp-sdk.sh (npm install @agentclientprotocol/sdk into /var/cache/ctx/acp or ~/.cache/ctx-acp)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (scripts/acp-sdk.sh installs it as root)")
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
// spec: issue 14, A2 A3 P4
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
