package mcpconf

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestParseClaude: Claude Code's .mcp.json servers come back with their
// command, args, env values (expanded as Claude Code expands them) and
// url; what ctx cannot honour is a per-server Problem, never dropped.
// (README "MCP servers as tsh tools", Importing)
func TestParseClaude(t *testing.T) {
	getenv := env(map[string]string{"HOME": "/home/p", "TOKEN": "s3cret"})
	for _, c := range []struct {
		name, data string
		want       []Foreign
		err        bool
	}{
		{"stdio with env", `{"mcpServers":{"mem":{"command":"node","args":["${HOME}/m/index.js"],"env":{"MEMORY_FILE_PATH":"/tmp/m.jsonl","T":"${TOKEN}"}}}}`,
			[]Foreign{{Name: "mem", Command: "node", Args: []string{"/home/p/m/index.js"}, Env: map[string]string{"MEMORY_FILE_PATH": "/tmp/m.jsonl", "T": "s3cret"}}}, false},
		{"type stdio", `{"mcpServers":{"a":{"type":"stdio","command":"x"}}}`, []Foreign{{Name: "a", Command: "x"}}, false},
		{"http", `{"mcpServers":{"r":{"type":"http","url":"https://example.com/mcp"}}}`, []Foreign{{Name: "r", URL: "https://example.com/mcp"}}, false},
		{"default", `{"mcpServers":{"a":{"command":"x","args":["${NOPE:-dflt}"]}}}`, []Foreign{{Name: "a", Command: "x", Args: []string{"dflt"}}}, false},
		{"unset var", `{"mcpServers":{"a":{"command":"x","args":["${NOPE}"]}}}`, []Foreign{{Name: "a", Problem: "${NOPE} is not set"}}, false},
		{"sse", `{"mcpServers":{"a":{"type":"sse","url":"http://h/sse"}}}`, []Foreign{{Name: "a", Problem: "type sse"}}, false},
		{"headers", `{"mcpServers":{"a":{"type":"http","url":"http://h/","headers":{"A":"b"}}}}`, []Foreign{{Name: "a", Problem: "headers"}}, false},
		{"unknown field", `{"mcpServers":{"a":{"command":"x","cwd":"/"}}}`, []Foreign{{Name: "a", Problem: `field "cwd"`}}, false},
		{"dotted name", `{"mcpServers":{"a.b":{"command":"x"}}}`, []Foreign{{Name: "a.b", Command: "x", Problem: "not a ctx server name"}}, false},
		{"bad env name", `{"mcpServers":{"a":{"command":"x","env":{"A=B":"1"}}}}`, []Foreign{{Name: "a", Problem: "not a variable name"}}, false},
		{"empty", `{"mcpServers":{"a":{}}}`, []Foreign{{Name: "a", Problem: "needs a command or a url"}}, false},
		{"not an object", `{"mcpServers":{"a":[1]}}`, []Foreign{{Name: "a", Problem: "not a JSON object"}}, false},
		{"sorted", `{"mcpServers":{"b":{"command":"y"},"a":{"command":"x"}}}`, []Foreign{{Name: "a", Command: "x"}, {Name: "b", Command: "y"}}, false},
		{"ctx's own", `{"version":1,"servers":{}}`, nil, true},
		{"no mcpServers", `{"x":1}`, nil, true},
		{"not json", `{`, nil, true},
	} {
		got, err := ParseForeign(FormatClaude, "f", []byte(c.data), getenv)
		check(t, c.name, got, err, c.want, c.err)
	}
}

// TestParseCodex: Codex's [mcp_servers.NAME] tables. (README "MCP servers as tsh tools", Importing)
func TestParseCodex(t *testing.T) {
	for _, c := range []struct {
		name, data string
		want       []Foreign
		err        bool
	}{
		{"stdio", "model = \"x\"\n[mcp_servers.fs]\ncommand = \"mcp-server-filesystem\"\nargs = [\"/workspace\"]\nstartup_timeout_sec = 20\n",
			[]Foreign{{Name: "fs", Command: "mcp-server-filesystem", Args: []string{"/workspace"}}}, false},
		{"env and env_vars", "[mcp_servers.m]\ncommand = \"m\"\nenv = { \"K\" = \"v\" }\nenv_vars = [\"TOKEN\"]\n",
			[]Foreign{{Name: "m", Command: "m", Env: map[string]string{"K": "v"}, EnvFrom: []string{"TOKEN"}}}, false},
		{"url", "[mcp_servers.r]\nurl = \"https://example.com/mcp\"\n", []Foreign{{Name: "r", URL: "https://example.com/mcp"}}, false},
		{"disabled", "[mcp_servers.d]\ncommand = \"x\"\nenabled = false\n", []Foreign{{Name: "d", Command: "x", Disabled: true}}, false},
		{"bearer", "[mcp_servers.r]\nurl = \"https://e/x\"\nbearer_token_env_var = \"T\"\n", []Foreign{{Name: "r", Problem: "bearer_token_env_var"}}, false},
		{"cwd", "[mcp_servers.c]\ncommand = \"x\"\ncwd = \"/src\"\n", []Foreign{{Name: "c", Problem: "cwd"}}, false},
		{"tool filter", "[mcp_servers.c]\ncommand = \"x\"\nenabled_tools = [\"a\"]\n", []Foreign{{Name: "c", Problem: "policy"}}, false},
		{"both", "[mcp_servers.c]\ncommand = \"x\"\nurl = \"http://h/\"\n", []Foreign{{Name: "c", Problem: "both"}}, false},
		{"wrong type", "[mcp_servers.c]\ncommand = 1\n", []Foreign{{Name: "c", Problem: "cannot be read"}}, false},
		{"bad env_vars", "[mcp_servers.c]\ncommand = \"x\"\nenv_vars = [\"A-B\"]\n", []Foreign{{Name: "c", Problem: "env_vars"}}, false},
		{"oauth", "[mcp_servers.r]\nurl = \"https://e/x\"\n[mcp_servers.r.oauth]\nclient_id = \"c\"\n", []Foreign{{Name: "r", Problem: `field "oauth"`}}, false},
		{"unknown key", "[mcp_servers.r]\ncommand = \"x\"\nscopes = [\"a\"]\nrequired = true\n", []Foreign{{Name: "r", Problem: `field "scopes"`}}, false},
		{"required", "[mcp_servers.r]\ncommand = \"x\"\nrequired = true\ntool_timeout_sec = 30\n", []Foreign{{Name: "r", Command: "x"}}, false},
		{"none", "model = \"x\"\n", nil, true},
		{"not toml", "[[[", nil, true},
	} {
		got, err := ParseForeign(FormatCodex, "f", []byte(c.data), env(nil))
		check(t, c.name, got, err, c.want, c.err)
	}
}

func check(t *testing.T, name string, got []*Foreign, err error, want []Foreign, wantErr bool) {
	t.Helper()
	if wantErr {
		if !errors.Is(err, ErrForeign) {
			t.Errorf("%s: err %v, want ErrForeign", name, err)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d servers, want %d", name, len(got), len(want))
		return
	}
	for i, w := range want {
		g := *got[i]
		if w.Problem != "" {
			if !strings.Contains(g.Problem, w.Problem) {
				t.Errorf("%s: problem %q, want it to say %q", name, g.Problem, w.Problem)
			}
			if w.Command == "" {
				continue // what else was read does not matter
			}
			g.Problem, w.Problem = "", ""
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %+v, want %+v", name, g, w)
		}
	}
}

func TestDetectFormat(t *testing.T) {
	for file, want := range map[string]string{".mcp.json": FormatClaude, "config.toml": FormatCodex} {
		data := `{"mcpServers":{}}`
		if want == FormatCodex {
			data = "[mcp_servers.x]"
		}
		if got := DetectFormat(file, []byte(data)); got != want {
			t.Errorf("%s: %s, want %s", file, got, want)
		}
	}
}

// TestParseCopiedClaudeFile: a .mcp.json copied in as mcp.json is refused
// naming the import (README "MCP servers as tsh tools").
func TestParseCopiedClaudeFile(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"mcpServers":{"a":{"command":"x"}}}`))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ctx mcp import") {
		t.Errorf("copied .mcp.json: %v", err)
	}
}

// FuzzParseForeign: neither parser panics; what they accept has a name,
// and a server without a Problem has a command or a url.
func FuzzParseForeign(f *testing.F) {
	f.Add(FormatClaude, []byte(`{"mcpServers":{"mem":{"command":"node","args":["${HOME}/x"],"env":{"K":"${T:-d}"}}}}`))
	f.Add(FormatClaude, []byte(`{"mcpServers":{"r":{"type":"http","url":"https://e/x","headers":{}}}}`))
	f.Add(FormatClaude, []byte(`{"mcpServers":{"a":{"type":"sse"}}}`))
	f.Add(FormatCodex, []byte("[mcp_servers.fs]\ncommand = \"x\"\nargs = [\"/workspace\"]\nenv = { K = \"v\" }\nenv_vars = [\"T\"]\n"))
	f.Add(FormatCodex, []byte("[mcp_servers.r]\nurl = \"https://e/x\"\nbearer_token_env_var = \"T\"\nenabled = false\n"))
	f.Add(FormatCodex, []byte("[mcp_servers]\nx = 1\n"))
	f.Fuzz(func(t *testing.T, format string, data []byte) {
		out, err := ParseForeign(format, "f", data, env(map[string]string{"HOME": "/h"}))
		if err != nil {
			if !errors.Is(err, ErrForeign) {
				t.Fatalf("error %v is not ErrForeign", err)
			}
			return
		}
		for _, s := range out {
			if s.Problem == "" && (CheckName(s.Name) != nil || s.Command == "" && s.URL == "") {
				t.Fatalf("accepted %+v", s)
			}
			for k := range s.Env {
				if s.Problem == "" && CheckEnvName(k) != nil {
					t.Fatalf("accepted env name %q", k)
				}
			}
		}
	})
}
