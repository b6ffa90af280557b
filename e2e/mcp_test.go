package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// npmDir is where scripts/mcp-servers.sh installed the real MCP servers,
// or "" (the tests that need them skip, saying how to install them).
func npmDir() string {
	dirs := []string{os.Getenv("CTX_MCP_NPM_DIR"), "/var/cache/ctx/npm"}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, ".cache", "ctx-npm"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ok := true
		for _, s := range []string{"everything", "filesystem", "memory"} {
			if _, err := os.Stat(filepath.Join(d, "node_modules", ".bin", "mcp-server-"+s)); err != nil {
				ok = false
			}
		}
		if ok {
			return d
		}
	}
	return ""
}

func needServers(t testing.TB) string {
	t.Helper()
	d := npmDir()
	if d == "" {
		missing(t, "the real MCP servers are not installed: run scripts/mcp-servers.sh (npm install into /var/cache/ctx/npm or ~/.cache/ctx-npm)")
	}
	return d
}

func npmBin(dir, server string) string {
	return filepath.Join(dir, "node_modules", ".bin", "mcp-server-"+server)
}

// tsh runs `ctx agent tsh AGENT -- ARGS…` in dir.
func (w *world) tsh(dir, agent string, args ...string) result {
	w.t.Helper()
	return w.ctx(dir, "", append([]string{"agent", "tsh", agent, "--"}, args...)...)
}

// mcpfakeProcs are the host pids of running mcpfake servers (their comm,
// not bwrap's command line, which names them too).
func mcpfakeProcs() []int {
	var out []int
	for _, pid := range procsWith("mcpfake") {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if strings.TrimSpace(string(comm)) == "mcpfake" {
			out = append(out, pid)
		}
	}
	return out
}

func (w *world) fakeLog(agent string) string {
	b, _ := os.ReadFile(filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", agent, "mcpfake.log"))
	return string(b)
}

// TestMCPEverything: the reference server's tools through `ctx agent tsh`:
// echo, get-sum (key=value typed by the schema), structured content as
// compact JSON, a tiny image summarised, a long-running operation with
// progress, sampling and elicitation declined with a clear error; bad
// arguments refused before any round trip; tsh list/load/context show
// SERVER.TOOL with a compact schema; every call a durable tool_call and
// tool_result.
func TestMCPEverything(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "everything", "--", npmBin(npm, "everything"))
	ws := w.workspace()
	for _, c := range []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"call", "everything.echo", "message=hi"}, 0, "Echo: hi"},
		{[]string{"call", "everything.get-sum", "a=2", "b=3.5"}, 0, "5.5"},
		{[]string{"call", "everything.get-sum", "--json", `{"a":40,"b":2}`}, 0, "42"},
		{[]string{"call", "everything.get-structured-content", "location=Chicago"}, 0, `{"conditions":`},
		{[]string{"call", "everything.get-tiny-image"}, 0, "[image image/png, "},
		{[]string{"call", "everything.trigger-long-running-operation", "duration=1", "steps=2"}, 0, "completed"},
		{[]string{"call", "everything.trigger-sampling-request", "prompt=hi"}, 1, "ctx declines sampling"},
		{[]string{"call", "everything.trigger-elicitation-request"}, 1, "declines"},
		{[]string{"call", "everything.get-sum", "a=x", "b=1"}, 1, "want a number"},
		{[]string{"call", "everything.get-sum", "a=1"}, 1, "do not match the input schema"},
		{[]string{"call", "everything.nope"}, 1, "has no tool"},
	} {
		r := w.tsh(ws, "a", c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.contains) {
			t.Errorf("%v: exit %d %q %q, want %d and %q", c.args, r.code, r.stdout, r.stderr, c.code, c.contains)
		}
	}
	if r := w.tsh(ws, "a", "call", "everything.get-tiny-image"); strings.Contains(r.stdout, "iVBOR") {
		t.Errorf("the image was dumped: %q", r.stdout)
	}
	r := w.tsh(ws, "a", "list")
	if !strings.Contains(r.stdout, "everything.echo\tEchoes back the input string") {
		t.Errorf("tsh list: %q %q", r.stdout, r.stderr)
	}
	w.mustCtx("agent", "tsh", "a", "--", "pin", "everything.get-sum")
	out := w.mustCtx("agent", "tsh", "a", "--", "context")
	if !strings.Contains(out, "everything.get-sum (pinned): Returns the sum of two numbers") || !strings.Contains(out, "args: {a: number, b: number}") {
		t.Errorf("tsh context: %q", out)
	}
	var calls, results int
	for _, f := range w.events("a", "default") {
		switch f.Type {
		case "tool_call":
			calls++
		case "tool_result":
			results++
			if f.Name != "tsh" {
				t.Errorf("tool_result %s", f.raw)
			}
		}
	}
	if calls < 12 || calls != results {
		t.Errorf("durable frames: %d calls, %d results", calls, results)
	}
	// The argument validation never reached the server: the bad get-sum
	// calls are error results, not server errors.
	servers := daemonChildren(w, "node")
	if len(servers) != 1 {
		t.Errorf("node servers under the daemon: %v (want one, reused by every call)", servers)
	}
	w.stop()
	waitFor(t, "no server left", 5*time.Second, func() bool { return !anyAlive(servers) })
}

// daemonChildren lists the descendants of the world's daemon whose comm is comm.
func daemonChildren(w *world, comm string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		if strings.TrimSpace(string(c)) != comm {
			continue
		}
		for p := pid; p > 1; {
			st, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
			if err != nil {
				break
			}
			f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
			p, _ = strconv.Atoi(f[1])
			if p == w.daemon.Process.Pid {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func anyAlive(pids []int) bool {
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			return true
		}
	}
	return false
}

// TestMCPFilesystem: the filesystem server reads and writes the workspace
// it is given; even allowed "/" it sees only the sandbox view (a host file
// outside it does not exist there).
func TestMCPFilesystem(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "fs", "--", npmBin(npm, "filesystem"), "/workspace")
	w.mustCtx("mcp", "add", "fsall", "--", npmBin(npm, "filesystem"), "/")
	ws := w.workspace()
	os.WriteFile(filepath.Join(ws, "note.txt"), []byte("hello from the workspace\n"), 0o644)
	secret := filepath.Join(filepath.Dir(w.root), "host-only.txt")
	os.WriteFile(secret, []byte("host secret\n"), 0o600)
	if r := w.tsh(ws, "a", "call", "fs.read_text_file", "path=/workspace/note.txt"); r.code != 0 || r.stdout != "hello from the workspace\n" {
		t.Errorf("read: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.tsh(ws, "a", "call", "fs.write_file", "path=/workspace/out.txt", "content=written by mcp"); r.code != 0 {
		t.Errorf("write: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "written by mcp" {
		t.Errorf("the write did not reach the workspace: %q", b)
	}
	if r := w.tsh(ws, "a", "call", "fs.read_text_file", "path=/etc/hostname"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "outside allowed directories") {
		t.Errorf("outside /workspace: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := w.tsh(ws, "a", "call", "fsall.read_text_file", "path="+secret)
	if r.code == 0 || strings.Contains(r.stdout, "host secret") || !strings.Contains(r.stdout+r.stderr, "ENOENT") {
		t.Errorf("a host file outside the view: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.tsh(ws, "a", "call", "fsall.list_directory", "path="+filepath.Join(w.root, "home"))
	if r.code == 0 {
		t.Errorf("CTX_ROOT is visible to the server: %q", r.stdout)
	}
}

// TestMCPMemory: the memory server keeps its graph where --env says (the
// agent's home); the env value lives owner-only in the secrets area, not in
// mcp.json, and reaches no frame.
func TestMCPMemory(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "memory", "--env", "MEMORY_FILE_PATH=/home/agent/memory-s3cret.jsonl", "--", npmBin(npm, "memory"))
	uid := strconv.Itoa(os.Getuid())
	ef := filepath.Join(w.root, "home", uid, "secrets", "mcp", "memory.env")
	if st, err := os.Stat(ef); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("env file: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.root, "home", uid, "mcp.json")); strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "MEMORY_FILE_PATH") {
		t.Errorf("mcp.json: %s", b)
	}
	ws := w.workspace()
	r := w.tsh(ws, "a", "call", "memory.create_entities", "--json", `{"entities":[{"name":"ctx","entityType":"project","observations":["runs agents"]}]}`)
	if r.code != 0 {
		t.Fatalf("create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.tsh(ws, "a", "call", "memory.read_graph")
	if r.code != 0 || !strings.Contains(r.stdout, `"runs agents"`) {
		t.Errorf("read_graph: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(w.root, "home", uid, "agent", "a", "memory-s3cret.jsonl")); err != nil {
		t.Errorf("the graph is not in the agent's home: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(w.sessionDir("a", "default"), "events.jsonl"))
	if strings.Contains(string(b), "s3cret") {
		t.Errorf("the env value reached a frame")
	}
}

// TestMCPFaults: a server that exits at start, one that never answers
// initialize, one that prints garbage, one that returns 10 MiB and one
// killed mid-call each give a clear error result; the session stays
// usable; no server process is left behind.
func TestMCPFaults(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_MCP_TIMEOUT=3s")
	w.agent("a", nil)
	fake := binDir + "/mcpfake"
	for _, m := range []string{"ok", "exit", "silent", "garbage"} {
		w.mustCtx("mcp", "add", m, "--", fake, m)
	}
	ws := w.workspace()
	usable := func(when string) {
		t.Helper()
		if r := w.tsh(ws, "a", "call", "ok.hello", "name="+when); r.code != 0 || r.stdout != "hello "+when+"\n" {
			t.Fatalf("after %s: %d %q %q", when, r.code, r.stdout, r.stderr)
		}
	}
	usable("start")
	for _, c := range []struct{ name, server, want string }{
		{"exits at start", "exit", "fatal: no config"},
		{"never answers initialize", "silent", "no answer to initialize within 3s"},
		{"garbage on stdout", "garbage", "did not start"},
		{"10 MiB result", "ok", "failed during big"},
	} {
		tool := c.server + ".x"
		if c.server == "ok" {
			tool = "ok.big"
		}
		began := time.Now()
		r := w.tsh(ws, "a", "call", tool)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%s: %d %q %q, want %q", c.name, r.code, r.stdout, r.stderr, c.want)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("%s took %s", c.name, d)
		}
		usable(strings.ReplaceAll(c.name, " ", "-"))
	}
	// Killed mid-call.
	c := w.dial("a")
	c.send(map[string]any{"op": "tsh", "id": "slow1", "session": "default", "args": []string{"call", "ok.slow"}})
	waitFor(t, "the slow call to reach the server", 10*time.Second, func() bool { return strings.Contains(w.fakeLog("a"), "call slow") })
	for _, pid := range mcpfakeProcs() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	got := c.until("done", 15*time.Second)
	var tr frame
	for _, f := range got {
		if f.Type == "tool_result" {
			tr = f
		}
	}
	if tr.Status != "error" || !strings.Contains(tr.Content, "failed during slow") {
		t.Errorf("killed mid-call: %s", tr.raw)
	}
	usable("killed")
	w.stop()
	waitFor(t, "no mcpfake left", 5*time.Second, func() bool { return len(mcpfakeProcs()) == 0 })
}

// TestMCPCancel: cancelling a run sends notifications/cancelled for the
// call in flight (the server's handler sees its context cancelled), and
// the run ends cancelled at once.
func TestMCPCancel(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "ok", "--", binDir+"/mcpfake", "ok")
	c := w.dial("a")
	c.send(map[string]any{"op": "tsh", "id": "slow1", "session": "default", "args": []string{"call", "ok.slow"}})
	waitFor(t, "the slow call to reach the server", 10*time.Second, func() bool { return strings.Contains(w.fakeLog("a"), "call slow") })
	c.send(map[string]any{"op": "cancel", "session": "default"})
	got := c.until("done", 10*time.Second)
	if d := got[len(got)-1]; d.Status != "cancelled" {
		t.Errorf("done %s", d.raw)
	}
	waitFor(t, "the server to see notifications/cancelled", 5*time.Second, func() bool { return strings.Contains(w.fakeLog("a"), "cancelled slow") })
	if r := w.tsh(w.workspace(), "a", "call", "ok.hello", "name=after"); r.code != 0 || r.stdout != "hello after\n" {
		t.Errorf("after cancel: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestMCPAuthority: the agent policy decides SERVER.TOOL and SERVER.*
// (deny wins) before the server is even started, and a denied call never
// reaches it; in ask mode the approval request shows server, tool,
// arguments and the destructive hint, and a deny runs nothing.
func TestMCPAuthority(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("a", map[string]string{"policy": "allow tool *\ndeny tool ok.rm\n"})
	w.mustCtx("mcp", "add", "ok", "--", binDir+"/mcpfake", "ok")
	ws := w.workspace()
	r := w.tsh(ws, "a", "call", "ok.rm")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "denied by agent-policy") {
		t.Errorf("denied: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if len(mcpfakeProcs()) != 0 {
		t.Errorf("a denied call started the server")
	}
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=x"); r.code != 0 {
		t.Fatalf("allowed: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.tsh(ws, "a", "list"); strings.Contains(r.stdout, "ok.rm") || !strings.Contains(r.stdout, "ok.hello") {
		t.Errorf("tsh list shows a denied tool: %q", r.stdout)
	}
	w.writeControl("a", "policy", "allow tool *\ndeny tool ok.*\n")
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=y"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "deny tool ok.*") {
		t.Errorf("SERVER.* deny: %d %q %q", r.code, r.stdout, r.stderr)
	}
	w.writeControl("a", "policy", "allow tool ok.*\n")
	w.writeControl("a", "approval", "ask\n")
	for _, decision := range []string{"deny", "allow_once"} {
		c := w.dial("a")
		c.send(map[string]any{"op": "tsh", "id": "ap-" + decision, "session": "default", "workspace": ws, "args": []string{"call", "ok.rm"}})
		got := c.until("approval_request", 15*time.Second)
		ar := got[len(got)-1]
		var mcp struct {
			MCP struct {
				Server, Tool string
				Arguments    json.RawMessage
				Destructive  *bool `json:"destructive_hint"`
			} `json:"mcp"`
		}
		json.Unmarshal([]byte(ar.raw), &mcp)
		if mcp.MCP.Server != "ok" || mcp.MCP.Tool != "rm" || string(mcp.MCP.Arguments) != "{}" || mcp.MCP.Destructive == nil || !*mcp.MCP.Destructive {
			t.Errorf("approval_request %s", ar.raw)
		}
		c.send(map[string]any{"op": "approve", "run": ar.Run, "id": ar.ID, "decision": decision})
		got = c.until("done", 15*time.Second)
		ran := strings.Contains(w.fakeLog("a"), "call rm")
		if ran != (decision == "allow_once") {
			t.Errorf("%s: the server's log says ran=%v (%v)", decision, ran, types(got))
		}
	}
	if strings.Count(w.fakeLog("a"), "call rm") != 1 {
		t.Errorf("server log: %q", w.fakeLog("a"))
	}
}

// TestMCPModelAgent: a model agent calls an MCP tool through tsh; the
// result reaches the model's next turn.
func TestMCPModelAgent(t *testing.T) {
	npm := needServers(t)
	f := newFakeProvider(t, anthropicToolUse("toolu_1", "call", "everything.echo", "message=from the model"), anthropicText("done"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	pol, _ := os.ReadFile(filepath.Join(w.root, "agent", "m.d", "policy"))
	w.writeControl("m", "policy", string(pol)+"allow tool everything.*\n")
	w.mustCtx("mcp", "add", "everything", "--", npmBin(npm, "everything"))
	c := w.dial("m")
	c.send(sendReq("q1", "echo something"))
	got := c.until("done", 60*time.Second)
	var tr frame
	for _, fr := range got {
		if fr.Type == "tool_result" {
			tr = fr
		}
	}
	if tr.Status != "ok" || tr.Content != "Echo: from the model\n" {
		t.Fatalf("tool_result %s (%v)", tr.raw, types(got))
	}
	reqs := f.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1], "Echo: from the model") {
		t.Errorf("the result did not reach the model: %d requests", len(reqs))
	}
}

// TestMCPIdleAndKill: a server idle for CTX_MCP_IDLE is stopped and starts
// again on the next call; a daemon killed with -9 leaves no server behind
// (its sandbox dies with the daemon).
func TestMCPIdleAndKill(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_MCP_IDLE=500ms")
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "ok", "--", binDir+"/mcpfake", "ok")
	ws := w.workspace()
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=1"); r.code != 0 {
		t.Fatalf("%d %q %q", r.code, r.stdout, r.stderr)
	}
	if len(daemonChildren(w, "mcpfake")) != 1 {
		t.Fatalf("no server running after a call")
	}
	waitFor(t, "the idle server to stop", 5*time.Second, func() bool { return len(daemonChildren(w, "mcpfake")) == 0 })
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=2"); r.code != 0 || r.stdout != "hello 2\n" {
		t.Fatalf("after idle: %d %q %q", r.code, r.stdout, r.stderr)
	}
	servers := daemonChildren(w, "mcpfake")
	if len(servers) != 1 {
		t.Fatalf("servers %v", servers)
	}
	w.kill()
	waitFor(t, "the server to die with the daemon", 5*time.Second, func() bool { return !anyAlive(servers) })
}
