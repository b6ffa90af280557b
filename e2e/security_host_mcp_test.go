package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/ctx/internal/cgroup"
)

// pyServer and nodeServer are minimal MCP servers (newline-delimited
// JSON-RPC over stdio: initialize, tools/list, tools/call of one tool
// "hello"), each trying first to load the optional module MOD — as a
// server with an optional dependency does.
const pyServer = `import json, sys
try:
    import MOD
except ImportError:
    pass
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "py", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "hello", "description": "Says hello", "inputSchema": {"type": "object", "properties": {}}}]}
    elif meth == "tools/call":
        r = {"content": [{"type": "text", "text": "hello from python"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "unknown method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
`

const nodeServer = `try { require('MOD'); } catch (e) {}
const rl = require('readline').createInterface({input: process.stdin});
rl.on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined) return;
  let r;
  switch (m.method) {
  case 'initialize': r = {protocolVersion: m.params.protocolVersion, capabilities: {tools: {}}, serverInfo: {name: 'node', version: '1'}}; break;
  case 'tools/list': r = {tools: [{name: 'hello', description: 'Says hello', inputSchema: {type: 'object', properties: {}}}]}; break;
  case 'tools/call': r = {content: [{type: 'text', text: 'hello from node'}]}; break;
  default: process.stdout.write(JSON.stringify({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'unknown method'}}) + '\n'); return;
  }
  process.stdout.write(JSON.stringify({jsonrpc: '2.0', id: m.id, result: r}) + '\n');
});
`

// TestSecurityHostMCPPlantedCode: an MCP server never loads code the
// agent wrote. From inside a run the agent plants MOD.py in /workspace,
// usercustomize.py and a .pth in its home's Python user site, and MOD in
// $HOME/.node_modules and $HOME/.node_libraries, each writing a canary in
// the agent home when run. Then `python3 -m MOD` (cwd was /workspace)
// fails to start, a Python and a node server that try to import MOD work,
// and no canary appears; a server installed in the workspace is not
// started at all. README "MCP servers as tsh tools"
func TestSecurityHostMCPPlantedCode(t *testing.T) {
	w := newWorld(t)
	w.start()
	installAttack(t, w)
	w.agent("a", map[string]string{"tools": "attack\n"})
	ws := w.workspace()
	mod := "ctxplanted" + strconv.Itoa(os.Getpid())
	c := w.dial("a")
	c.send(sendReq("plant", "tool attack mcpplant "+mod+" 3.11", "workspace", ws))
	var res frame
	for _, f := range c.until("done", 30*time.Second) {
		if f.Type == "tool_result" {
			res = f
		}
	}
	if n, _ := kv(res.Content, "planted"); n != "5" {
		t.Fatalf("the agent could not plant its code: %q", res.Content)
	}
	home := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", "a")
	canaries := func() []string {
		m, _ := filepath.Glob(filepath.Join(home, "canary-*"))
		return m
	}
	dir := t.TempDir()
	py := filepath.Join(dir, "server.py")
	if err := os.WriteFile(py, []byte(strings.ReplaceAll(pyServer, "MOD", mod)), 0o644); err != nil {
		t.Fatal(err)
	}
	w.mustCtx("mcp", "add", "pymod", "--", "/usr/bin/python3", "-m", mod)
	w.mustCtx("mcp", "add", "py", "--", "/usr/bin/python3", py)
	if r := w.tsh(ws, "a", "call", "pymod.hello"); r.code == 0 {
		t.Errorf("python3 -m %s started from the agent's module: %q", mod, r.stdout)
	} else if !strings.Contains(r.stdout+r.stderr, "No module named") {
		t.Logf("pymod: %q %q", r.stdout, r.stderr)
	}
	if r := w.tsh(ws, "a", "call", "py.hello"); r.code != 0 || !strings.Contains(r.stdout, "hello from python") {
		t.Errorf("python server: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A server installed where the agent writes (here its workspace) is
	// code the agent can change: it is not started.
	inWS := filepath.Join(ws, "server.py")
	if err := os.WriteFile(inWS, []byte(strings.ReplaceAll(pyServer, "MOD", mod)), 0o644); err != nil {
		t.Fatal(err)
	}
	w.mustCtx("mcp", "add", "wspy", "--", "/usr/bin/python3", inWS)
	if r := w.tsh(ws, "a", "call", "wspy.hello"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "which the agent can write") {
		t.Errorf("a server installed in the workspace: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if node, err := exec.LookPath("node"); err != nil {
		t.Log("no node: the node_modules half is not run")
	} else {
		js := filepath.Join(dir, "server.js")
		if err := os.WriteFile(js, []byte(strings.ReplaceAll(nodeServer, "MOD", mod)), 0o644); err != nil {
			t.Fatal(err)
		}
		w.mustCtx("mcp", "add", "node", "--", node, js)
		if r := w.tsh(ws, "a", "call", "node.hello"); r.code != 0 || !strings.Contains(r.stdout, "hello from node") {
			t.Errorf("node server: %d %q %q", r.code, r.stdout, r.stderr)
		}
	}
	if got := canaries(); len(got) != 0 {
		t.Errorf("an MCP server ran code the agent planted: %v", got)
	}
}

// mcpGroups lists the cgroups of running MCP servers of w's daemon (its
// pids hierarchy on cgroup v1; none where there is none).
func mcpGroups(w *world) []string {
	base := cgroup.BaseName(os.Getuid(), w.root)
	var out []string
	for _, h := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		m, _ := filepath.Glob(filepath.Join(h, base, "run-mcp-*"))
		out = append(out, m...)
	}
	return out
}

// TestSecurityHostMCPLimits: an MCP server runs inside the walls of the
// agent that uses it. With .d/limits `tasks 64` and `memory 256M`, a
// server's tool that touches 1 GiB is killed (and restarted on the next
// call), one that starts 300 processes gets fewer than 64 (the fork
// fails: "resource temporarily unavailable", what a bash tool's "Cannot
// fork" is); meanwhile the daemon answers ping and another agent's send; the
// server's cgroup is gone once it stopped, and so is every process it
// started; a running server is started again when the agent's limits go
// down, and is held to the new ones. README "Limits"
func TestSecurityHostMCPLimits(t *testing.T) {
	w := newWorld(t)
	needCgroups(t, w)
	w.start("CTX_MCP_IDLE=3s")
	w.agent("a", map[string]string{"limits": "tasks 64\nmemory 256M\n"})
	w.agent("other", nil)
	w.mustCtx("mcp", "add", "ok", "--", binDir+"/mcpfake", "ok")
	ws := w.workspace()
	mark := "3599." + strconv.Itoa(os.Getpid()) + strconv.Itoa(int(time.Now().UnixNano()%1000))
	r := w.tsh(ws, "a", "call", "ok.mem", "mb=1024")
	if r.code == 0 || strings.Contains(r.stdout, "touched=1024") {
		t.Errorf("a server of an agent with memory 256M touched 1 GiB: %d %q %q", r.code, r.stdout, r.stderr)
	}
	t.Logf("mem: %d %q %q", r.code, r.stdout, r.stderr)
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=after"); r.code != 0 || r.stdout != "hello after\n" {
		t.Errorf("after the server was killed: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if len(mcpGroups(w)) != 1 {
		t.Errorf("the running server's cgroup: %v", mcpGroups(w))
	}
	r = w.tsh(ws, "a", "call", "ok.fork", "n=300", "mark="+mark)
	forks, _ := kv(r.stdout, "forks")
	n, err := strconv.Atoi(forks)
	if r.code != 0 || err != nil {
		t.Fatalf("fork: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if n >= 64 || !strings.Contains(r.stdout, "resource temporarily unavailable") {
		t.Errorf("a server of an agent with tasks 64 started %d processes: %q", n, r.stdout)
	}
	t.Logf("forks=%d (%q)", n, r.stdout)
	// The server itself (a Go program) may die next: it cannot make a
	// thread either. Its cgroup is then removed at once, the sleepers with it.
	if !w.ping() {
		t.Error("the daemon did not answer ping while the server held its tasks")
	}
	if r := w.ctx("", "", "agent", "send", "other", "echo", "still", "here"); r.code != 0 || !strings.Contains(r.stdout, "echo: still here") {
		t.Errorf("another agent's send: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if len(mcpGroups(w)) > 1 {
		t.Errorf("more than one server cgroup: %v", mcpGroups(w))
	}
	waitFor(t, "the idle server's cgroup to be removed", 15*time.Second, func() bool { return len(mcpGroups(w)) == 0 })
	waitFor(t, "no process the server started left on the host", 5*time.Second, func() bool { return len(procsWith(mark)) == 0 })
	if !w.ping() {
		t.Error("the daemon did not answer ping after the server stopped")
	}
	// Lowered limits reach a running server: it is started again in them.
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=up"); r.code != 0 {
		t.Fatalf("hello: %d %q %q", r.code, r.stdout, r.stderr)
	}
	w.writeControl("a", "limits", "tasks 24\nmemory 256M\n")
	r = w.tsh(ws, "a", "call", "ok.fork", "n=300", "mark="+mark)
	forks, _ = kv(r.stdout, "forks")
	if n, err := strconv.Atoi(forks); err != nil || n >= 24 {
		t.Errorf("a server running when the limits went down to tasks 24 started %q processes: %d %q %q", forks, r.code, r.stdout, r.stderr)
	}
	t.Logf("after tasks 24: %q", r.stdout)
}

// TestSecurityHostMCPNetwork: an MCP server declared with --net gets the
// daemon's proxy, never the host's network — the agent drives it, so the
// host's loopback is as far from it as from the agent; a server declared
// without it gets no network even when its agent has `net`. spec: V3
// (docs/walls.md, "MCP servers")
func TestSecurityHostMCPNetwork(t *testing.T) {
	w := newWorld(t)
	w.start()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	host := ln.Addr().String()
	w.agent("a", nil)
	w.agent("b", map[string]string{"mount": "net\n"})
	w.mustCtx("mcp", "add", "withnet", "--net", "--", binDir+"/mcpfake", "ok")
	w.mustCtx("mcp", "add", "nonet", "--", binDir+"/mcpfake", "ok")
	ws := w.workspace()
	call := func(agent, tool string, args ...string) string {
		r := w.tsh(ws, agent, append([]string{"call", tool}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s %s: %d %q %q", agent, tool, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	if out := call("a", "withnet.dial", "addr="+host); !strings.Contains(out, "dial=refused") {
		t.Errorf("a --net server reached the host's loopback %s: %q", host, out)
	}
	if out := call("a", "withnet.getenv", "name=HTTPS_PROXY"); !strings.Contains(out, "set=true") {
		t.Errorf("a --net server has no proxy: %q", out)
	}
	if out := call("a", "withnet.dial", "addr=127.0.0.1:3128"); !strings.Contains(out, "dial=ok") {
		t.Errorf("a --net server's proxy is not listening: %q", out)
	}
	if out := call("b", "nonet.dial", "addr="+host); !strings.Contains(out, "dial=refused") {
		t.Errorf("a server without --net reached the host's loopback %s: %q", host, out)
	}
	if out := call("b", "nonet.getenv", "name=HTTPS_PROXY"); !strings.Contains(out, "set=false") {
		t.Errorf("a server without --net got its agent's proxy: %q", out)
	}
	if out := call("b", "nonet.dial", "addr=127.0.0.1:3128"); !strings.Contains(out, "dial=refused") {
		t.Errorf("a server without --net has its agent's network: %q", out)
	}
}

// spec: V3 — an MCP server declared by URL is reached by the daemon itself,
// through the agent's network policy: a name that resolves to the host's
// loopback is refused like the address would be, unless the agent's
// .d/mount grants that exact address with `net local`.
func TestSecurityHostMCPURLByName(t *testing.T) {
	w := newWorld(t)
	w.start()
	ln, hits := mcpHTTPFake(t)
	port := ln.Addr().(*net.TCPAddr).Port
	w.agent("a", nil)
	w.agent("b", map[string]string{"mount": "net local " + ln.Addr().String() + "\n"})
	w.mustCtx("mcp", "add", "web", "--net", "--url", "http://localhost:"+strconv.Itoa(port)+"/mcp")
	ws := w.workspace()
	r := w.tsh(ws, "a", "call", "web.ping", "word=x")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "loopback") {
		t.Errorf("a URL server named localhost was reached without a grant: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the refused server got %d requests", n)
	}
	r = w.tsh(ws, "b", "call", "web.ping", "word=granted")
	if r.code != 0 || !strings.Contains(r.stdout, "pong granted") {
		t.Errorf("granted: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// mcpHTTPFake serves a streamable-HTTP MCP server (the Go SDK's) with one
// tool, ping(word) → "pong WORD", on this host's loopback until the test
// ends; hits counts the HTTP requests it got.
func mcpHTTPFake(t *testing.T) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "webfake", Version: "1"}, nil)
	type pingIn struct {
		Word string `json:"word"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "Answers pong"}, func(ctx context.Context, _ *mcp.CallToolRequest, in pingIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong " + in.Word}}}, nil, nil
	})
	hits := new(atomic.Int64)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { hits.Add(1); h.ServeHTTP(rw, r) })}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln, hits
}
