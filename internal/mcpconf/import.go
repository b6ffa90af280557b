package mcpconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// Foreign formats `ctx mcp import` reads (README "MCP servers as tsh
// tools", "Importing"): Claude Code's .mcp.json and Codex's config.toml.
const (
	FormatClaude = "claude" // {"mcpServers": {NAME: {type, command, args, env, url, headers}}}
	FormatCodex  = "codex"  // [mcp_servers.NAME] command, args, env, env_vars, url, …
)

// Foreign is one server of a foreign file, before its command is resolved
// on the host. Problem, when set, says why it cannot be imported as is;
// the importer reports it and writes nothing for it.
type Foreign struct {
	Name    string
	Command string
	Args    []string
	// Env holds values written in the file (they go to the owner-only
	// secrets file, never to mcp.json nor a command line).
	Env map[string]string
	// EnvFrom names variables whose values are taken from the importing
	// process's environment (Codex env_vars).
	EnvFrom []string
	URL     string
	// Disabled: the file turns it off (Codex enabled = false).
	Disabled bool
	Problem  string
}

// ErrForeign is matched by every error of a foreign file that cannot be
// read at all (a single server's trouble is its Problem instead).
var ErrForeign = errors.New("not an MCP configuration ctx can import")

// DetectFormat names the format of a foreign file by its name and content:
// .toml is Codex's, a JSON object with "mcpServers" Claude Code's.
func DetectFormat(file string, data []byte) string {
	if strings.HasSuffix(file, ".toml") {
		return FormatCodex
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return FormatClaude
	}
	return FormatCodex
}

// ParseForeign reads a foreign file in format (FormatClaude or
// FormatCodex); getenv expands ${VAR} and ${VAR:-default} in commands,
// arguments, env values and URLs as Claude Code does. Servers come back
// sorted by name.
func ParseForeign(format, file string, data []byte, getenv func(string) (string, bool)) ([]*Foreign, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: over %d bytes: %w", file, MaxFileSize, ErrForeign)
	}
	var out []*Foreign
	var err error
	switch format {
	case FormatClaude:
		out, err = parseClaude(data, getenv)
	case FormatCodex:
		out, err = parseCodex(data, getenv)
	default:
		return nil, fmt.Errorf("%s: format %q: want claude or codex: %w", file, format, ErrForeign)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", file, err, ErrForeign)
	}
	if len(out) > MaxServers {
		return nil, fmt.Errorf("%s: over %d servers: %w", file, MaxServers, ErrForeign)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for _, f := range out {
		if f.Problem == "" {
			if err := CheckName(f.Name); err != nil {
				f.Problem = "its name is not a ctx server name ([A-Za-z0-9][A-Za-z0-9_-]{0,31}, no dot)"
			}
		}
	}
	return out, nil
}

// claudeServer is one entry of .mcp.json's mcpServers. Unknown fields are
// kept so that they can be reported rather than silently dropped.
type claudeServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

func parseClaude(data []byte, getenv func(string) (string, bool)) ([]*Foreign, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	raw, ok := top["mcpServers"]
	if !ok {
		if _, ours := top["servers"]; ours {
			return nil, errors.New(`no "mcpServers" object: this looks like ctx's own mcp.json, which needs no import`)
		}
		return nil, errors.New(`no "mcpServers" object (Claude Code's .mcp.json format)`)
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &servers); err != nil {
		return nil, fmt.Errorf("mcpServers: %w", err)
	}
	var out []*Foreign
	for name, r := range servers {
		f := &Foreign{Name: name}
		out = append(out, f)
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(r, &keys); err != nil {
			f.Problem = "not a JSON object"
			continue
		}
		var s claudeServer
		if err := json.Unmarshal(r, &s); err != nil {
			f.Problem = fmt.Sprintf("cannot be read: %v", err)
			continue
		}
		for k := range keys {
			switch k {
			case "type", "command", "args", "env", "url", "headers":
			default:
				f.Problem = fmt.Sprintf("field %q is not supported", k)
			}
		}
		if f.Problem != "" {
			continue
		}
		switch s.Type {
		case "", "stdio":
			if s.URL != "" {
				f.Problem = "a stdio server with a url"
				continue
			}
		case "http":
			if s.Command != "" {
				f.Problem = "an http server with a command"
				continue
			}
		case "sse":
			f.Problem = "type sse (the deprecated HTTP+SSE transport) is not supported: ctx connects to streamable HTTP servers (type http)"
			continue
		default:
			f.Problem = fmt.Sprintf("type %q: want stdio or http", s.Type)
			continue
		}
		if len(s.Headers) > 0 {
			f.Problem = "headers are not supported yet (ctx sends none to a url server)"
			continue
		}
		fill(f, s.Command, s.Args, s.Env, s.URL, getenv)
	}
	return out, nil
}

// codexServer is one [mcp_servers.NAME] table of Codex's config.toml.
type codexServer struct {
	Command           string            `toml:"command"`
	Args              []string          `toml:"args"`
	Env               map[string]string `toml:"env"`
	EnvVars           []string          `toml:"env_vars"`
	Cwd               string            `toml:"cwd"`
	URL               string            `toml:"url"`
	BearerTokenEnvVar string            `toml:"bearer_token_env_var"`
	HTTPHeaders       map[string]string `toml:"http_headers"`
	EnvHTTPHeaders    map[string]string `toml:"env_http_headers"`
	Enabled           *bool             `toml:"enabled"`
	StartupTimeoutSec float64           `toml:"startup_timeout_sec"`
	StartupTimeoutMs  int64             `toml:"startup_timeout_ms"`
	ToolTimeoutSec    float64           `toml:"tool_timeout_sec"`
	EnabledTools      []string          `toml:"enabled_tools"`
	DisabledTools     []string          `toml:"disabled_tools"`
}

func parseCodex(data []byte, getenv func(string) (string, bool)) ([]*Foreign, error) {
	var top struct {
		MCPServers map[string]toml.Primitive `toml:"mcp_servers"`
	}
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return nil, err
	}
	if len(top.MCPServers) == 0 {
		return nil, errors.New("no [mcp_servers.NAME] table (Codex's config.toml format)")
	}
	var out []*Foreign
	for name, prim := range top.MCPServers {
		f := &Foreign{Name: name}
		out = append(out, f)
		var s codexServer
		if err := md.PrimitiveDecode(prim, &s); err != nil {
			f.Problem = fmt.Sprintf("cannot be read: %v", err)
			continue
		}
		if k := undecoded(md, name); k != "" {
			// Not silently dropped: oauth, scopes and whatever comes next
			// change what the server is.
			f.Problem = fmt.Sprintf("field %q is not supported", k)
			continue
		}
		if s.Enabled != nil && !*s.Enabled {
			f.Disabled = true
		}
		switch {
		case s.Command != "" && s.URL != "":
			f.Problem = "both command and url"
		case s.BearerTokenEnvVar != "" || len(s.HTTPHeaders)+len(s.EnvHTTPHeaders) > 0:
			f.Problem = "bearer_token_env_var and http headers are not supported yet (ctx sends none to a url server)"
		case len(s.EnabledTools)+len(s.DisabledTools) > 0:
			f.Problem = "enabled_tools/disabled_tools: say it with the agent's policy instead (allow tool NAME.TOOL, deny tool NAME.TOOL)"
		case s.Cwd != "":
			f.Problem = "cwd is not supported: a server runs in an empty directory of its own sandbox; give paths as arguments"
		}
		if f.Problem != "" {
			continue
		}
		for _, k := range s.EnvVars {
			if CheckEnvName(k) != nil {
				f.Problem = fmt.Sprintf("env_vars: %q is not a variable name", k)
			}
		}
		f.EnvFrom = s.EnvVars
		fill(f, s.Command, s.Args, s.Env, s.URL, getenv)
	}
	return out, nil
}

// undecoded is the first key of [mcp_servers.NAME] that codexServer does
// not know, or "".
func undecoded(md toml.MetaData, name string) string {
	for _, k := range md.Undecoded() {
		if len(k) >= 3 && k[0] == "mcp_servers" && k[1] == name {
			if k[2] == "required" { // fail Codex's start when the server fails: no meaning here
				continue
			}
			return k[2]
		}
	}
	return ""
}

// fill expands and copies what a server declares into f, setting Problem
// on the first thing that cannot be expanded or is invalid.
func fill(f *Foreign, command string, args []string, env map[string]string, url string, getenv func(string) (string, bool)) {
	if f.Problem != "" {
		return
	}
	var err error
	exp := func(s string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = Expand(s, getenv)
		return v
	}
	f.Command = exp(command)
	for _, a := range args {
		f.Args = append(f.Args, exp(a))
	}
	f.URL = exp(url)
	if len(env) > 0 {
		f.Env = map[string]string{}
		for k, v := range env {
			if CheckEnvName(k) != nil {
				f.Problem = fmt.Sprintf("env: %q is not a variable name", k)
				return
			}
			f.Env[k] = exp(v)
		}
	}
	switch {
	case err != nil:
		f.Problem = err.Error()
	case f.Command == "" && f.URL == "":
		f.Problem = "needs a command or a url"
	case len(f.Args) > MaxArgs:
		f.Problem = fmt.Sprintf("over %d args", MaxArgs)
	case len(f.Env)+len(f.EnvFrom) > MaxEnv:
		f.Problem = fmt.Sprintf("over %d env variables", MaxEnv)
	}
}

// expandRE is compiled on first use: only an import expands variables.
var expandRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`) })

// Expand replaces ${VAR} and ${VAR:-default} in s as Claude Code does when
// it reads .mcp.json; an unset VAR without a default is an error.
func Expand(s string, getenv func(string) (string, bool)) (string, error) {
	var missing []string
	out := expandRE().ReplaceAllStringFunc(s, func(m string) string {
		sub := expandRE().FindStringSubmatch(m)
		if getenv != nil {
			if v, ok := getenv(sub[1]); ok {
				return v
			}
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("${%s} is not set in this environment (export it, or give a default: ${%s:-VALUE})", missing[0], missing[0])
	}
	return out, nil
}
