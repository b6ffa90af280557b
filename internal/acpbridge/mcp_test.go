package acpbridge

import (
	"encoding/json"
	"errors"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/netpolicy"
)

// rules are the real resolver (PATH lookups, symlinks, node scripts) with
// no npm: a global package is never installed here.
func testRules(t testing.TB, ws string, net netpolicy.Policy) MCPRules {
	res := mcpinstall.Resolver{LookPath: exec.LookPath, NpmRoot: func() (string, error) { return "", errors.New("no npm here") }}
	return MCPRules{Resolve: res.Resolve, Net: net, Cwd: ws, Writable: []string{ws}}
}

func parseServers(t testing.TB, js string) []acp.McpServer {
	t.Helper()
	var list []acp.McpServer
	if err := json.Unmarshal([]byte(js), &list); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return list
}

func TestConvertMCP(t *testing.T) {
	inst := t.TempDir() // outside the workspace: an installation
	srv := filepath.Join(inst, "srv")
	if err := os.WriteFile(srv, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bin", "srv"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := netpolicy.Policy{Local: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8931")}}
	for _, tc := range []struct {
		name  string
		js    string
		net   netpolicy.Policy
		want  string // "" accepted, else a substring of the error
		check func(t *testing.T, es *EditorServers)
	}{
		{name: "none", js: `[]`},
		{name: "stdio with env", js: `[{"name":"fs","command":"` + srv + `","args":["/workspace"],"env":[{"name":"TOKEN","value":"v=1"}]}]`,
			check: func(t *testing.T, es *EditorServers) {
				s := es.Servers["fs"]
				if s.Command != srv || strings.Join(s.Args, " ") != "/workspace" || strings.Join(s.Env, ",") != "TOKEN" || s.Net {
					t.Errorf("declaration %+v", s)
				}
				if es.Env["fs"]["TOKEN"] != "v=1" {
					t.Errorf("env %v", es.Env)
				}
			}},
		{name: "stdio on PATH", js: `[{"name":"sh","command":"sh","args":[],"env":[]}]`,
			check: func(t *testing.T, es *EditorServers) {
				if !filepath.IsAbs(es.Servers["sh"].Command) {
					t.Errorf("command not resolved: %+v", es.Servers["sh"])
				}
			}},
		{name: "relative command in the workspace", js: `[{"name":"mine","command":"./bin/srv","args":[],"env":[]}]`, want: "which the agent can write"},
		{name: "absolute command in the workspace", js: `[{"name":"mine","command":"` + filepath.Join(ws, "bin", "srv") + `","args":[],"env":[]}]`, want: `"mine"`},
		{name: "npx", js: `[{"name":"fetch","command":"npx","args":["-y","@acme/mcp-x"],"env":[]}]`, want: "download code"},
		{name: "missing command", js: `[{"name":"gone","command":"/nonexistent/srv","args":[],"env":[]}]`, want: `"gone"`},
		{name: "bad name", js: `[{"name":"my server","command":"` + srv + `","args":[],"env":[]}]`, want: "must match"},
		{name: "dotted name", js: `[{"name":"a.b","command":"` + srv + `","args":[],"env":[]}]`, want: "must match"},
		{name: "twice", js: `[{"name":"a","command":"` + srv + `","args":[],"env":[]},{"name":"a","command":"` + srv + `","args":[],"env":[]}]`, want: "declared twice"},
		{name: "bad env name", js: `[{"name":"a","command":"` + srv + `","args":[],"env":[{"name":"A-B","value":"x"}]}]`, want: `"a"`},
		{name: "http loopback granted", js: `[{"type":"http","name":"web","url":"http://127.0.0.1:8931/mcp","headers":[]}]`, net: local,
			check: func(t *testing.T, es *EditorServers) {
				if s := es.Servers["web"]; s.URL != "http://127.0.0.1:8931/mcp" || !s.Net {
					t.Errorf("declaration %+v", s)
				}
			}},
		{name: "http loopback other port", js: `[{"type":"http","name":"web","url":"http://127.0.0.1:8932/mcp","headers":[]}]`, net: local, want: "net local 127.0.0.1:8932"},
		{name: "http loopback with net only", js: `[{"type":"http","name":"web","url":"http://127.0.0.1:8931/mcp","headers":[]}]`, net: netpolicy.Policy{Public: true}, want: "net local"},
		{name: "http localhost", js: `[{"type":"http","name":"web","url":"http://localhost:8931/mcp","headers":[]}]`, net: local, want: "127.0.0.1"},
		{name: "http name without net", js: `[{"type":"http","name":"web","url":"https://mcp.example.com/mcp","headers":[]}]`, want: "does not grant net"},
		{name: "http name with net", js: `[{"type":"http","name":"web","url":"https://mcp.example.com/mcp","headers":[]}]`, net: netpolicy.Policy{Public: true}},
		{name: "http headers", js: `[{"type":"http","name":"web","url":"https://mcp.example.com/mcp","headers":[{"name":"Authorization","value":"Bearer x"}]}]`, net: netpolicy.Policy{Public: true}, want: "headers"},
		{name: "http bad url", js: `[{"type":"http","name":"web","url":"ftp://x/","headers":[]}]`, net: netpolicy.Policy{Public: true}, want: "want http(s)"},
		{name: "sse", js: `[{"type":"sse","name":"old","url":"https://mcp.example.com/sse","headers":[]}]`, net: netpolicy.Policy{Public: true}, want: "SSE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := ConvertMCP(parseServers(t, tc.js), testRules(t, ws, tc.net))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.check != nil {
					tc.check(t, es)
				}
				return
			}
			var re *acp.RequestError
			if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, tc.want) {
				t.Fatalf("error %v, want -32602 with %q", err, tc.want)
			}
		})
	}
}

// TestSaveMCP: the declaration and env files are owner-only, the values
// are never in the declaration, a later declaration replaces the earlier
// one's env files, and none removes the directory.
func TestSaveMCP(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), UID: os.Getuid()}
	es := &EditorServers{
		Servers: map[string]*mcpconf.Server{"a": {Command: "/usr/bin/true", Env: []string{"K"}}, "b": {Command: "/usr/bin/true", Env: []string{"K"}}},
		Env:     map[string]map[string]string{"a": {"K": "secret-a"}, "b": {"K": "secret-b"}},
	}
	if err := SaveMCP(l, "ag", "acp-1", es); err != nil {
		t.Fatal(err)
	}
	dir := mcpinstall.SessionDir(l, "ag", "acp-1")
	decl, err := os.ReadFile(filepath.Join(dir, mcpconf.FileName))
	if err != nil || strings.Contains(string(decl), "secret") {
		t.Fatalf("declaration %v %s", err, decl)
	}
	for _, n := range []string{"a", "b"} {
		st, err := os.Stat(mcpinstall.SessionEnvFile(l, "ag", "acp-1", n))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s.env: %v %v", n, st, err)
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode())
	}
	f, err := mcpconf.Load(filepath.Join(dir, mcpconf.FileName))
	if err != nil || len(f.Servers) != 2 {
		t.Fatalf("load %v %v", f, err)
	}
	es2 := &EditorServers{Servers: map[string]*mcpconf.Server{"a": {Command: "/usr/bin/true"}}, Env: map[string]map[string]string{}}
	if err := SaveMCP(l, "ag", "acp-1", es2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mcpinstall.SessionEnvFile(l, "ag", "acp-1", "b")); !os.IsNotExist(err) {
		t.Errorf("b.env outlived its server: %v", err)
	}
	if _, err := os.Stat(mcpinstall.SessionEnvFile(l, "ag", "acp-1", "a")); !os.IsNotExist(err) {
		t.Errorf("a.env outlived its env: %v", err)
	}
	if err := SaveMCP(l, "ag", "acp-1", &EditorServers{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("no servers left the directory: %v", err)
	}
}

// FuzzConvertMCP: any mcpServers an editor sends is either refused with a
// -32602 naming why, or becomes declarations mcpconf accepts, a stdio one
// without network and an http one only where the grants reach.
func FuzzConvertMCP(f *testing.F) {
	for _, s := range []string{
		`[]`,
		`[{"name":"sh","command":"sh","args":["-c","x"],"env":[{"name":"K","value":"v"}]}]`,
		`[{"name":"x","command":"npx","args":["-y","pkg"],"env":[]}]`,
		`[{"type":"http","name":"web","url":"http://127.0.0.1:8931/mcp","headers":[]}]`,
		`[{"type":"http","name":"web","url":"http://[::1]:8931/mcp","headers":[]}]`,
		`[{"type":"http","name":"web","url":"https://example.com/mcp","headers":[{"name":"a","value":"b"}]}]`,
		`[{"type":"sse","name":"s","url":"https://example.com/sse","headers":[]}]`,
		`[{"type":"acp","name":"a","id":"x"}]`,
		`[{"name":"../x","command":"/bin/sh","args":[],"env":[]}]`,
		`[{"name":"a","command":"./rel","args":[],"env":[{"name":"","value":""}]}]`,
	} {
		f.Add([]byte(s))
	}
	ws := f.TempDir()
	local := netpolicy.Policy{Local: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8931")}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var list []acp.McpServer
		if json.Unmarshal(data, &list) != nil {
			return
		}
		r := testRules(t, ws, local)
		r.Resolve = func(command string, args []string) (*mcpconf.Server, error) {
			// No process and no PATH walk per input: the command as given.
			if !filepath.IsAbs(command) {
				return nil, errors.New("not absolute")
			}
			return &mcpconf.Server{Command: filepath.Clean(command), Args: args}, nil
		}
		es, err := ConvertMCP(list, r)
		if err != nil {
			var re *acp.RequestError
			if !errors.As(err, &re) || re.Code != -32602 || re.Message == "" {
				t.Fatalf("error %v is not an invalid-params answer", err)
			}
			return
		}
		if len(es.Servers) != len(list) {
			t.Fatalf("%d servers in, %d out: one dropped", len(list), len(es.Servers))
		}
		for n, s := range es.Servers {
			if err := s.Validate(n); err != nil {
				t.Fatalf("accepted an invalid declaration: %v", err)
			}
			if s.Command != "" && s.Net {
				t.Fatalf("a stdio server got the network: %+v", s)
			}
			if u, _ := url.Parse(s.URL); s.URL != "" && (u == nil || u.Host != "127.0.0.1:8931") {
				t.Fatalf("an http server the grants do not reach: %s", s.URL)
			}
			if _, bad := inside(s.Command, r.Writable); bad {
				t.Fatalf("a command in the workspace: %s", s.Command)
			}
		}
	})
}
