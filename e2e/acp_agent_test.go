package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// spec: ACP agents under ctx (.d/abi acp-v1): an agent written
// with the official TypeScript SDK's agent API, installed the way npm
// installs a package bin, runs as a ctx agent.

// acpAgentInstall lays out an npm-style installation of testdata/acp/agent.mjs
// in a fresh directory — node_modules/ctx-acp-agent (the package),
// node_modules/@agentclientprotocol and zod (copied from the SDK cache),
// node_modules/.bin/ctx-acp-agent (the bin symlink) — and returns the bin.
// The directory's name is unique: it marks the agent's processes.
func acpAgentInstall(t *testing.T, w *world) string {
	t.Helper()
	sdk := acpSDKDir()
	if sdk == "" {
		t.Skip("the ACP TypeScript SDK is not installed: run scripts/acp-sdk.sh (npm install @agentclientprotocol/sdk into /var/cache/ctx/acp or ~/.cache/ctx-acp)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (scripts/acp-sdk.sh installs it as root)")
	}
	dir, err := os.MkdirTemp(filepath.Dir(w.root), "acpagent")
	if err != nil {
		t.Fatal(err)
	}
	nm := filepath.Join(dir, "node_modules")
	if out, err := exec.Command("cp", "-r", filepath.Join(sdk, "node_modules"), nm).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	pkg := filepath.Join(nm, "ctx-acp-agent")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/acp/agent.mjs")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(pkg, "agent.mjs"), src, 0o755))
	must(os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"ctx-acp-agent","version":"1.0.0","type":"module","bin":{"ctx-acp-agent":"agent.mjs"}}`), 0o644))
	must(os.MkdirAll(filepath.Join(nm, ".bin"), 0o755))
	bin := filepath.Join(nm, ".bin", "ctx-acp-agent")
	must(os.Symlink("../ctx-acp-agent/agent.mjs", bin))
	return bin
}

// acpWorld starts a daemon with an acp-v1 agent "acpa" (args after --).
func acpWorld(t *testing.T, approval string, args ...string) (*world, string) {
	t.Helper()
	w := newWorld(t)
	bin := acpAgentInstall(t, w)
	w.start("CTX_ACP_TIMEOUT=3s")
	cmd := append([]string{"agent", "create", "acpa", "--abi", "acp-v1", "--exec", bin}, "--approval", approval)
	if len(args) > 0 {
		cmd = append(append(cmd, "--"), args...)
	}
	w.mustCtx(cmd...)
	return w, filepath.Dir(filepath.Dir(filepath.Dir(bin)))
}

// noProcs waits until no process runs from the agent's installation.
func noProcs(t *testing.T, marker string) {
	t.Helper()
	waitFor(t, "no process of the ACP agent left", 10*time.Second, func() bool { return len(procsWith(marker)) == 0 })
}

func lastOf(fs []frame, typ string) frame {
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].Type == typ {
			return fs[i]
		}
	}
	return frame{}
}

// TestACPAgentWork: a prompt with a file read, a write inside the
// workspace, writes outside refused (the host file untouched), and a
// terminal command whose output reaches the agent and the result.
func TestACPAgentWork(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	acl := filepath.Join(w.root, "agent", "acpa.d", "acp.json")
	if b, err := os.ReadFile(acl); err != nil || !strings.Contains(string(b), `"binds"`) {
		t.Fatalf(".d/acp.json: %v %s", err, b)
	}
	ws := w.workspace()
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("hello-in\n"), 0o644)
	host := filepath.Join(filepath.Dir(w.root), "host.txt")
	os.WriteFile(host, []byte("original"), 0o644)
	c := w.dial("acpa")
	c.send(sendReq("msg-1", "work "+host, "workspace", ws))
	fs := c.until("done", 60*time.Second)
	if d := lastOf(fs, "done"); d.Status != "ok" {
		t.Fatalf("done %q; frames:\n%s", d.Status, rawFrames(fs))
	}
	text := lastOf(fs, "assistant").Text
	for _, want := range []string{"read=hello-in", "outside=refused", "home=refused", "exit=0", "term=term-says-42|hello-in"} {
		if !strings.Contains(text, want) {
			t.Errorf("assistant %q lacks %q", text, want)
		}
	}
	var calls, results int
	var termResult frame
	for _, f := range fs {
		switch f.Type {
		case "tool_call":
			calls++
		case "tool_result":
			results++
			if f.Name == "terminal" {
				termResult = f
			}
		}
	}
	if calls != 3 || results != 3 {
		t.Errorf("tool calls %d results %d, want 3 and 3:\n%s", calls, results, rawFrames(fs))
	}
	if !strings.Contains(termResult.Content, "term-says-42") || termResult.Status != "ok" {
		t.Errorf("terminal result %+v", termResult)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "written by acp: hello-in\n" {
		t.Errorf("out.txt = %q", b)
	}
	if b, _ := os.ReadFile(host); string(b) != "original" {
		t.Errorf("host file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(w.root, "home", itoa(os.Getuid()), "agent", "acpa", "ro.txt")); err == nil {
		t.Error("a write into /home/agent went through")
	}
	// Durable: the same frames are in events.jsonl.
	ev := w.events("acpa", "default")
	if lastOf(ev, "assistant").Text != text {
		t.Errorf("events.jsonl assistant differs")
	}
	noProcs(t, marker)
}

func rawFrames(fs []frame) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.raw + "\n")
	}
	return b.String()
}

// TestACPAgentPermission: session/request_permission in ask mode becomes
// the pinned approval_request; allow and deny both reach the agent.
func TestACPAgentPermission(t *testing.T) {
	// spec: A2, A3
	w, marker := acpWorld(t, "ask")
	ws := w.workspace()
	c := w.dial("acpa")
	for i, dec := range []string{"allow_once", "deny"} {
		id := "msg-" + itoa(i+1)
		c.send(sendReq(id, "ask", "workspace", ws))
		fs := c.until("approval_request", 60*time.Second)
		req := lastOf(fs, "approval_request")
		if req.ID != "perm-1" || req.Name != "acp" {
			t.Fatalf("approval_request %s", req.raw)
		}
		c.send(map[string]any{"op": "approve", "run": req.Run, "id": req.ID, "decision": dec})
		fs = c.until("done", 30*time.Second)
		if a := lastOf(fs, "approval"); a.Decision != dec {
			t.Errorf("approval frame %s", a.raw)
		}
		want := map[string]string{"allow_once": "permission=allowed", "deny": "permission=denied"}[dec]
		if got := lastOf(fs, "assistant").Text; got != want {
			t.Errorf("%s: assistant %q, want %q\n%s", dec, got, want, rawFrames(fs))
		}
		_, err := os.Stat(filepath.Join(ws, "perm.txt"))
		if (dec == "allow_once") != (err == nil) {
			t.Errorf("%s: perm.txt present=%v", dec, err == nil)
		}
		os.Remove(filepath.Join(ws, "perm.txt"))
	}
	noProcs(t, marker)
}

// TestACPAgentCancel: cancel mid-run concludes cancelled and leaves no process.
func TestACPAgentCancel(t *testing.T) {
	// spec: X12
	w, marker := acpWorld(t, "auto")
	c := w.dial("acpa")
	c.send(sendReq("msg-1", "slow"))
	fs := c.until("delta", 60*time.Second)
	if len(procsWith(marker)) == 0 {
		t.Fatal("the agent process is not running mid-run")
	}
	w.dial("acpa").send(map[string]any{"op": "cancel", "session": "default"})
	fs = append(fs, c.until("done", 30*time.Second)...)
	if d := lastOf(fs, "done"); d.Status != "cancelled" {
		t.Fatalf("done %q\n%s", d.Status, rawFrames(fs))
	}
	// The call the agent reported and never finished gets its cancelled
	// result: no tool_call is left without one.
	if r := lastOf(fs, "tool_result"); r.CallID != "c-slow" || r.Status != "cancelled" {
		t.Errorf("the open call's result: %s\n%s", r.raw, rawFrames(fs))
	}
	noProcs(t, marker)
	// A turn that ends with a call still open: the call gets an error result.
	c.send(sendReq("msg-2", "dangling"))
	fs = c.until("done", 60*time.Second)
	if r := lastOf(fs, "tool_result"); r.CallID != "c-dangling" || r.Status != "error" || lastOf(fs, "done").Status != "ok" {
		t.Errorf("a dangling call: %s\n%s", r.raw, rawFrames(fs))
	}
}

// TestACPAgentBounds: a flood of updates, a 9th tool call and an agent
// that never answers each end the run with a clear error and no process.
func TestACPAgentBounds(t *testing.T) {
	// spec: X6
	w, marker := acpWorld(t, "auto")
	for i, tc := range []struct{ input, code, msg string }{
		{"flood", "limit_exceeded", "session updates"},
		{"calls", "limit_exceeded", "8 tool calls"},
		{"terms", "limit_exceeded", "8 tool calls"},
	} {
		// The flood's 10,000 deltas may outrun this reader on a loaded
		// machine: follow reattaches as ctx agent send does.
		fs := w.follow("acpa", sendReq("msg-"+itoa(i+1), tc.input), 60*time.Second)
		e := lastOf(fs, "error")
		if e.Code != tc.code || !strings.Contains(e.Message, tc.msg) || lastOf(fs, "done").Status != "error" {
			t.Errorf("%s: error %s", tc.input, e.raw)
		}
		if tc.input != "flood" {
			n := 0
			for _, f := range fs {
				if f.Type == "tool_call" {
					n++
				}
			}
			if n != 8 {
				t.Errorf("%s: calls recorded %d, want 8", tc.input, n)
			}
		}
		noProcs(t, marker)
	}
}

// TestACPAgentBigChunk: one 3 MiB message chunk becomes deltas of at most
// 1 MiB each, the assistant conclusion keeps the first 1 MiB with a
// warning, and `ctx agent send` reads every frame (the largest 6 MiB once
// JSON-escaped) and prints the whole reply.
func TestACPAgentBigChunk(t *testing.T) {
	// spec: P2
	w, marker := acpWorld(t, "auto")
	r := w.ctx("", "", "agent", "send", "acpa", "big")
	if r.code != 0 {
		t.Fatalf("ctx agent send: exit %d: %s", r.code, r.stderr)
	}
	if want := strings.Repeat("<", 3<<20) + "\n"; r.stdout != want {
		t.Errorf("printed %d bytes, want %d", len(r.stdout), len(want))
	}
	deltas := 0
	var assistant, warning frame
	for _, f := range w.events("acpa", "default") {
		switch f.Type {
		case "delta":
			deltas++
			if len(f.Text) > 1<<20 {
				t.Errorf("a delta of %d bytes", len(f.Text))
			}
		case "assistant":
			assistant = f
		case "warning":
			warning = f
		}
	}
	if deltas != 3 || len(assistant.Text) != 1<<20 || !strings.Contains(warning.Message, "keeps the first 1048576") {
		t.Errorf("deltas %d, assistant %d bytes, warning %q", deltas, len(assistant.Text), warning.Message)
	}
	noProcs(t, marker)
}

// TestACPAgentMute: an agent that never answers initialize fails the run
// with agent_timeout after CTX_ACP_TIMEOUT, and is ended.
func TestACPAgentMute(t *testing.T) {
	w, marker := acpWorld(t, "auto", "--mute")
	c := w.dial("acpa")
	c.send(sendReq("msg-1", "hello"))
	fs := c.until("done", 30*time.Second)
	if e := lastOf(fs, "error"); e.Code != "agent_timeout" || !strings.Contains(e.Message, "initialize") {
		t.Errorf("error %s", e.raw)
	}
	noProcs(t, marker)
}

// TestACPAgentSecrets: the keys .d/acp.json names reach the agent from the
// owner-only secrets file; other values there and the daemon's
// environment do not. spec: B4, X11
func TestACPAgentSecrets(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	acl := filepath.Join(w.root, "agent", "acpa.d", "acp.json")
	b, err := os.ReadFile(acl)
	if err != nil {
		t.Fatal(err)
	}
	var decl map[string]any
	if err := json.Unmarshal(b, &decl); err != nil {
		t.Fatal(err)
	}
	decl["env"] = []string{"ACP_SECRET"}
	b, _ = json.Marshal(decl)
	w.mustCtx("agent", "set", "acpa", "acp.json", string(b))
	sec := filepath.Join(w.root, "home", itoa(os.Getuid()), "secrets", "agent")
	os.MkdirAll(sec, 0o700)
	if err := os.WriteFile(filepath.Join(sec, "acpa.env"), []byte("ACP_SECRET=s3cret\nOTHER_SECRET=no\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := w.dial("acpa")
	c.send(sendReq("msg-1", "env"))
	fs := c.until("done", 60*time.Second)
	if got, want := lastOf(fs, "assistant").Text, "secret=s3cret other=undefined ctx_run=set path=/usr/local/bin:/usr/bin:/bin"; got != want {
		t.Errorf("assistant %q, want %q\n%s", got, want, rawFrames(fs))
	}
	// A secrets file others may read fails the run, naming why.
	os.Chmod(filepath.Join(sec, "acpa.env"), 0o644)
	c.send(sendReq("msg-2", "env"))
	fs = c.until("done", 60*time.Second)
	if e := lastOf(fs, "error"); e.Code != "agent_invalid" || !strings.Contains(e.Message, "0600") {
		t.Errorf("error %s", e.raw)
	}
	noProcs(t, marker)
}
