package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ctxEnv runs the CLI in dir with extra environment variables.
func (w *world) ctxEnv(dir string, extra []string, args ...string) result {
	w.t.Helper()
	cmd := exec.Command(w.ctxBin, args...)
	cmd.Env = append(w.env(), extra...)
	cmd.Dir = dir
	return w.runCmd(cmd)
}

// claudeMCP is a real Claude Code .mcp.json: the everything server as
// `node …/dist/index.js` (a multi-file package: only its bound package lets
// it import its modules), the filesystem server as an npm bin given
// /workspace, the memory server with an env value and ${VAR} expansion,
// and an npx entry that ctx refuses.
func claudeMCP(npm string) string {
	pkg := filepath.Join(npm, "node_modules", "@modelcontextprotocol")
	return `{"mcpServers": {
  "everything": {"command": "node", "args": ["` + filepath.Join(pkg, "server-everything", "dist", "index.js") + `"]},
  "fs": {"type": "stdio", "command": "` + npmBin(npm, "filesystem") + `", "args": ["/workspace"]},
  "memory": {"command": "node", "args": ["${CTX_TEST_NPM}/node_modules/@modelcontextprotocol/server-memory/dist/index.js"],
             "env": {"MEMORY_FILE_PATH": "/home/agent/mem-s3cret.jsonl"}},
  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"}}
}}`
}

// TestMCPImportClaude: `ctx mcp import .mcp.json` declares the three real
// servers as `ctx mcp add` would and each answers a call through tsh; the
// npx entry is refused with the fix printed and, all or nothing, nothing
// is written until it is left out; env values go to the owner-only
// secrets file, never mcp.json. (README "MCP servers as tsh tools", Importing)
func TestMCPImportClaude(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	src := t.TempDir()
	file := filepath.Join(src, ".mcp.json")
	os.WriteFile(file, []byte(claudeMCP(npm)), 0o644)
	uid := strconv.Itoa(os.Getuid())
	decl := filepath.Join(w.root, "home", uid, "mcp.json")
	env := []string{"CTX_TEST_NPM=" + npm}

	r := w.ctxEnv(src, env, "mcp", "import", file)
	if r.code != 2 || !strings.Contains(r.stdout, "refused  github") || !strings.Contains(r.stdout, "npm install -g @modelcontextprotocol/server-github") ||
		!strings.Contains(r.stdout, "ctx mcp add github -- ") || !strings.Contains(r.stderr, "nothing imported") {
		t.Errorf("npx entry: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(decl); !os.IsNotExist(err) {
		t.Errorf("a refused import wrote %s: %v", decl, err)
	}
	if r := w.ctxEnv(src, env, "mcp", "import", file, "--only", "everything,fs,memory", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "dry run") {
		t.Errorf("dry run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(decl); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote %s: %v", decl, err)
	}
	r = w.ctxEnv(src, env, "mcp", "import", file, "--only", "everything,fs,memory")
	if r.code != 0 || strings.Count(r.stdout, "import  ") != 3 {
		t.Fatalf("import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(decl)
	pkgs := filepath.Join(npm, "node_modules")
	if strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "MEMORY_FILE_PATH") || !strings.Contains(string(b), `"`+pkgs+`"`) {
		t.Errorf("mcp.json:\n%s", b)
	}
	ef := filepath.Join(w.root, "home", uid, "secrets", "mcp", "memory.env")
	if st, err := os.Stat(ef); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("env file: %v %v", st, err)
	}
	if b, _ := os.ReadFile(ef); string(b) != "MEMORY_FILE_PATH=/home/agent/mem-s3cret.jsonl\n" {
		t.Errorf("env file: %q", b)
	}
	if r := w.ctxEnv(src, env, "mcp", "import", file, "--only", "fs"); r.code != 2 || !strings.Contains(r.stdout, "already declared") {
		t.Errorf("a second import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	ws := w.workspace()
	os.WriteFile(filepath.Join(ws, "note.txt"), []byte("hello from the workspace\n"), 0o644)
	for _, c := range []struct {
		args     []string
		contains string
	}{
		{[]string{"call", "everything.echo", "message=imported"}, "Echo: imported"},
		{[]string{"call", "fs.read_text_file", "path=/workspace/note.txt"}, "hello from the workspace"},
		{[]string{"call", "memory.create_entities", "--json", `{"entities":[{"name":"ctx","entityType":"project","observations":["imported"]}]}`}, `"imported"`},
		{[]string{"call", "memory.read_graph"}, `"imported"`},
	} {
		if r := w.tsh(ws, "a", c.args...); r.code != 0 || !strings.Contains(r.stdout, c.contains) {
			t.Errorf("%v: %d %q %q", c.args, r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(w.root, "home", uid, "agent", "a", "mem-s3cret.jsonl")); err != nil {
		t.Errorf("the memory graph is not where the imported env says: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.sessionDir("a", "default"), "events.jsonl")); strings.Contains(string(b), "s3cret") {
		t.Error("the env value reached a frame")
	}
}

// TestMCPImportCodex: Codex's config.toml [mcp_servers.*] into one agent's
// declarations: a command with args, env values and env_vars taken from
// the importing environment (to the secrets file), a disabled server
// skipped, a url server refused without --net. (README "MCP servers as tsh tools", Importing)
func TestMCPImportCodex(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	src := t.TempDir()
	file := filepath.Join(src, "config.toml")
	os.WriteFile(file, []byte(`model = "o4-mini"

[mcp_servers.files]
command = "`+npmBin(npm, "filesystem")+`"
args = ["/workspace"]
startup_timeout_sec = 20

[mcp_servers.mem]
command = "`+npmBin(npm, "memory")+`"
env = { MEMORY_FILE_PATH = "/home/agent/codex-mem.jsonl" }
env_vars = ["CODEX_TEST_TOKEN"]

[mcp_servers.old]
command = "/nonexistent"
enabled = false

[mcp_servers.remote]
url = "http://127.0.0.1:9/mcp"
`), 0o644)
	env := []string{"CODEX_TEST_TOKEN=tok-from-env"}
	r := w.ctxEnv(src, env, "mcp", "import", file, "--agent", "a")
	if r.code != 2 || !strings.Contains(r.stdout, "add --net remote") || !strings.Contains(r.stdout, "skipped  old") {
		t.Errorf("url without --net: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = w.ctxEnv(src, env, "mcp", "import", file, "--agent", "a", "--partial")
	if r.code != 2 || strings.Count(r.stdout, "import  ") != 2 {
		t.Fatalf("--partial: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	decl := filepath.Join(w.root, "agent", "a.d", "mcp.json")
	b, _ := os.ReadFile(decl)
	if strings.Contains(string(b), "tok-from-env") || !strings.Contains(string(b), "CODEX_TEST_TOKEN") || strings.Contains(string(b), "remote") {
		t.Errorf("%s:\n%s", decl, b)
	}
	if r := w.ctxEnv(src, env, "mcp", "import", file, "--agent", "a", "--only", "remote", "--net", "remote"); r.code != 0 {
		t.Errorf("url with --net: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(decl); !strings.Contains(string(b), `"url": "http://127.0.0.1:9/mcp"`) || !strings.Contains(string(b), `"net": true`) {
		t.Errorf("the url server: %s", b)
	}
	ef := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "secrets", "mcp", "mem.env")
	if b, _ := os.ReadFile(ef); !strings.Contains(string(b), "CODEX_TEST_TOKEN=tok-from-env\n") || !strings.Contains(string(b), "MEMORY_FILE_PATH=/home/agent/codex-mem.jsonl\n") {
		t.Errorf("env file: %q", b)
	}
	ws := w.workspace()
	os.WriteFile(filepath.Join(ws, "codex.txt"), []byte("x"), 0o644)
	if r := w.tsh(ws, "a", "call", "files.list_directory", "path=/workspace"); r.code != 0 || !strings.Contains(r.stdout, "codex.txt") {
		t.Errorf("files.list_directory: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.tsh(ws, "a", "call", "mem.read_graph"); r.code != 0 || !strings.Contains(r.stdout, "entities") {
		t.Errorf("mem.read_graph: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestMCPCopiedClaudeFile: a .mcp.json copied in as an agent's mcp.json is
// an error in `ctx doctor` naming `ctx mcp import` (and in the refusal of
// a call); importing the file in place makes it valid and its servers
// callable. (README "MCP servers as tsh tools", Importing: doctor)
func TestMCPCopiedClaudeFile(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("b", nil)
	decl := filepath.Join(w.root, "agent", "b.d", "mcp.json")
	os.WriteFile(decl, []byte(claudeMCP(npm)), 0o600)
	r := w.ctx("", "", "doctor")
	if !strings.Contains(r.stdout, "FAIL  mcp "+decl) || !strings.Contains(r.stdout, "ctx mcp import "+decl+" --agent b") {
		t.Errorf("doctor on a copied .mcp.json: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ws := w.workspace()
	if r := w.tsh(ws, "b", "call", "everything.echo", "message=x"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "ctx mcp import") {
		t.Errorf("a call under the copied file: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.ctxEnv(w.t.TempDir(), []string{"CTX_TEST_NPM=" + npm}, "mcp", "import", decl, "--agent", "b", "--only", "everything")
	if r.code != 0 {
		t.Fatalf("import in place: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = w.ctx("", "", "doctor")
	if !strings.Contains(r.stdout, "ok    mcp "+decl) {
		t.Errorf("doctor after the import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := w.tsh(ws, "b", "call", "everything.echo", "message=x"); r.code != 0 || !strings.Contains(r.stdout, "Echo: x") {
		t.Errorf("a call after the import: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A declared installation that is gone: doctor warns.
	srv := filepath.Join(t.TempDir(), "srv")
	os.WriteFile(srv, []byte("#!/bin/sh\n"), 0o755)
	w.mustCtx("mcp", "add", "gone", "--", srv)
	os.Remove(srv)
	if r := w.ctx("", "", "doctor"); !strings.Contains(r.stdout, srv+" is gone") {
		t.Errorf("doctor on a gone command:\n%s%s", r.stdout, r.stderr)
	}
}

// TestMCPToolsWorkspace: `ctx mcp tools` binds the caller's cwd as the
// workspace (judged as a request's is), so a server given /workspace can
// be listed — with and without --agent; from / nothing is bound and it
// says so (README "MCP servers as tsh tools").
func TestMCPToolsWorkspace(t *testing.T) {
	npm := needServers(t)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "fs", "--", npmBin(npm, "filesystem"), "/workspace")
	ws := w.workspace()
	for _, args := range [][]string{{"mcp", "tools", "fs"}, {"mcp", "tools", "fs", "--agent", "a"}} {
		if r := w.ctx(ws, "", args...); r.code != 0 || !strings.Contains(r.stdout, "fs.read_text_file") {
			t.Errorf("%v from a workspace: %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("listing left %d entries in the workspace (%s…)", len(ents), ents[0].Name())
	}
	if r := w.ctx("/", "", "mcp", "tools", "fs"); r.code == 0 || !strings.Contains(r.stderr, "no workspace bound") {
		t.Errorf("from /: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// pyVenvServer is a minimal MCP stdio server (newline-delimited JSON-RPC)
// whose tool answers from a sibling module: it runs only when the
// virtualenv's site-packages is visible in the sandbox.
const pyVenvServer = `import json, sys
from pyhello.words import greeting
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth, r = m["method"], None
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "pyhello", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "hello", "description": "greets", "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}}}]}
    elif meth == "tools/call":
        r = {"content": [{"type": "text", "text": greeting(m["params"]["arguments"]["who"]) + " from " + sys.prefix}]}
    out = {"jsonrpc": "2.0", "id": m["id"], "result": r} if r is not None else {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}
    print(json.dumps(out), flush=True)
`

// TestMCPImportVirtualenv: a Python server installed in a virtualenv,
// declared as Claude Code configs hold it (VENV/bin/python -m PKG), runs
// with its virtualenv (kept by path, bound read-only) and imports its
// package's modules. A uvx entry is refused with the install line.
// (README "MCP servers as tsh tools", Importing)
func TestMCPImportVirtualenv(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		missing(t, "python3 is not installed")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		missing(t, "python3 -m venv: "+string(out))
	}
	site, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if len(site) != 1 {
		t.Fatalf("site-packages: %v", site)
	}
	pkg := filepath.Join(site[0], "pyhello")
	os.MkdirAll(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "__init__.py"), nil, 0o644)
	os.WriteFile(filepath.Join(pkg, "words.py"), []byte("def greeting(who):\n    return 'hello ' + who\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "__main__.py"), []byte(pyVenvServer), 0o644)
	w := newWorld(t)
	w.start()
	w.agent("a", nil)
	src := t.TempDir()
	file := filepath.Join(src, ".mcp.json")
	os.WriteFile(file, []byte(`{"mcpServers": {
  "py": {"command": "`+filepath.Join(venv, "bin", "python")+`", "args": ["-m", "pyhello"]},
  "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}}`), 0o644)
	r := w.ctx(src, "", "mcp", "import", file)
	if r.code != 2 || !strings.Contains(r.stdout, "uv tool install mcp-server-fetch") || !strings.Contains(r.stdout, "ctx mcp add fetch -- mcp-server-fetch") {
		t.Errorf("uvx: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := w.ctx(src, "", "mcp", "import", file, "--only", "py"); r.code != 0 {
		t.Fatalf("import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ws := w.workspace()
	r = w.tsh(ws, "a", "call", "py.hello", "who=ctx")
	if real, _ := filepath.EvalSymlinks(venv); r.code != 0 || !strings.Contains(r.stdout, "hello ctx from "+real) {
		t.Errorf("py.hello: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
