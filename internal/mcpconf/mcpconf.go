// Package mcpconf reads, validates and writes the MCP server declarations
// of ctx: CTX_ROOT/home/<uid>/mcp.json (the user's servers) and
// CTX_ROOT/agent/<name>.d/mcp.json (one agent's, overriding the user's of
// the same name), and the owner-only environment files holding the values
// given with `ctx mcp add --env`. It is pure: no process is started here.
//
// The file format (version 1, unknown fields refused):
//
//	{"version": 1, "servers": {
//	  "everything": {"command": "/usr/bin/node",
//	                 "args": ["/opt/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"],
//	                 "binds": ["/opt/npm/node_modules"], "env": ["TOKEN"], "net": false},
//	  "remote": {"url": "https://example.com/mcp", "net": true}}}
package mcpconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/ident"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/pathin"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/safefs"
)

// FileName is the name of a declaration file (user level: home/<uid>/;
// agent level: agent/<name>.d/).
const FileName = "mcp.json"

// Version is the only format version.
const Version = 1

// Bounds of a declaration file.
const (
	MaxFileSize = 1 << 20
	MaxServers  = 64
	MaxArgs     = 64
	MaxArgLen   = 4096
	MaxEnv      = 64
	MaxBinds    = 32
	MaxEnvSize  = 64 << 10
)

// ErrInvalid is matched (errors.Is) by every validation error.
var ErrInvalid = errors.New("invalid MCP declaration")

// File is one declaration file.
type File struct {
	Version int                `json:"version"`
	Servers map[string]*Server `json:"servers"`
}

// Server declares one MCP server: either a program run inside the agent's
// sandbox over stdio (Command, Args), or a streamable HTTP endpoint (URL,
// which needs Net).
type Server struct {
	// Command is the absolute host path of the program (resolved at add
	// time); it runs at the same path inside the sandbox.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// URL is a streamable HTTP endpoint the daemon connects to.
	URL string `json:"url,omitempty"`
	// Net grants the server network access (stdio: the sandbox keeps the
	// host network; URL servers require it).
	Net bool `json:"net,omitempty"`
	// Env names the variables whose values live in the owner-only file
	// home/<uid>/secrets/mcp/<name>.env; only this server's process gets them.
	Env []string `json:"env,omitempty"`
	// Binds are host paths of the server's own installation, bound
	// read-only at the same path inside its sandbox (computed at add time).
	Binds []string `json:"binds,omitempty"`
	// EnvPath, when set, is the owner-only file holding the values of Env
	// instead of home/<uid>/secrets/mcp/<name>.env: a session's servers
	// (declared by an editor over ACP) keep theirs with their declaration.
	// It is never read from or written to a declaration file.
	EnvPath string `json:"-"`
}

var (
	nameFirst, nameRest       = ident.NewClass("A-Za-z0-9"), ident.NewClass("A-Za-z0-9_-") // [A-Za-z0-9][A-Za-z0-9_-]{0,31}
	envNameFirst, envNameRest = ident.NewClass("A-Za-z_"), ident.NewClass("A-Za-z0-9_")    // [A-Za-z_][A-Za-z0-9_]{0,127}
)

// envName reports whether k is an environment variable name ctx passes.
func envName(k string) bool { return ident.Valid(k, envNameFirst, envNameRest, 127) }

// CheckName validates a server name: [A-Za-z0-9][A-Za-z0-9_-]{0,31}, no
// dot (a tool is addressed as NAME.TOOL and split at the first dot).
func CheckName(name string) error {
	if !ident.Valid(name, nameFirst, nameRest, 31) {
		return fmt.Errorf("MCP server name %q: must match [A-Za-z0-9][A-Za-z0-9_-]{0,31}: %w", name, ErrInvalid)
	}
	return nil
}

// reserved are sandbox paths a bind may not cover: the view owns them
// (layout.SystemDirs stay open to a server's package binds).
var reserved = layout.ViewOwned

// CheckBind validates a bind path: absolute, clean, not / and not at or
// under a path the sandbox view owns.
func CheckBind(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return fmt.Errorf("bind %q: want an absolute clean path other than /: %w", p, ErrInvalid)
	}
	for _, r := range reserved {
		if pathin.Inside(p, r) {
			return fmt.Errorf("bind %q: at or under %s, which the sandbox view owns: %w", p, r, ErrInvalid)
		}
	}
	return nil
}

// Validate checks one server declaration.
func (s *Server) Validate(name string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("MCP server %q: %s: %w", name, fmt.Sprintf(format, a...), ErrInvalid)
	}
	if err := CheckName(name); err != nil {
		return err
	}
	if s == nil {
		return bad("null declaration")
	}
	switch {
	case s.Command != "" && s.URL != "":
		return bad("command and url are exclusive")
	case s.Command == "" && s.URL == "":
		return bad("needs a command or a url")
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url %q: want http(s)://HOST/...", s.URL)
		}
		if !s.Net {
			return bad("a url server needs net (ctx mcp add --net --url ...)")
		}
		if len(s.Args)+len(s.Binds)+len(s.Env) > 0 {
			return bad("a url server takes no args, binds or env")
		}
		return nil
	}
	if !filepath.IsAbs(s.Command) || filepath.Clean(s.Command) != s.Command {
		return bad("command %q: want an absolute clean host path", s.Command)
	}
	if len(s.Args) > MaxArgs {
		return bad("over %d args", MaxArgs)
	}
	for _, a := range append([]string{s.Command}, s.Args...) {
		if len(a) > MaxArgLen || strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
			return bad("argument %.40q: over %d bytes, NUL or invalid UTF-8", a, MaxArgLen)
		}
	}
	if len(s.Env) > MaxEnv {
		return bad("over %d env names", MaxEnv)
	}
	seen := map[string]bool{}
	for _, e := range s.Env {
		if !envName(e) || seen[e] {
			return bad("env name %q: invalid or repeated", e)
		}
		seen[e] = true
	}
	if len(s.Binds) > MaxBinds {
		return bad("over %d binds", MaxBinds)
	}
	for _, b := range s.Binds {
		if err := CheckBind(b); err != nil {
			return fmt.Errorf("MCP server %q: %w", name, err)
		}
	}
	return nil
}

// Parse parses and validates a declaration file read from file (file names
// the source in errors).
func Parse(file string, data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: over %d bytes: %w", file, MaxFileSize, ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		if strings.Contains(err.Error(), `unknown field "mcpServers"`) {
			// Claude Code's .mcp.json copied in: say how to bring it in.
			return nil, fmt.Errorf("%s: %v: this is Claude Code's .mcp.json format, not ctx's: `ctx mcp import` this file (it rewrites it in ctx's format): %w", file, err, ErrInvalid)
		}
		return nil, fmt.Errorf("%s: %v: %w", file, err, ErrInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the object: %w", file, ErrInvalid)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%s: version %d, want %d: %w", file, f.Version, Version, ErrInvalid)
	}
	if len(f.Servers) > MaxServers {
		return nil, fmt.Errorf("%s: over %d servers: %w", file, MaxServers, ErrInvalid)
	}
	for name, s := range f.Servers {
		if err := s.Validate(name); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	if f.Servers == nil {
		f.Servers = map[string]*Server{}
	}
	return &f, nil
}

// Load reads a declaration file without following a symlink; an absent
// file is an empty declaration.
func Load(path string) (*File, error) {
	data, err := safefs.ReadRegular(path, MaxFileSize+1)
	if errors.Is(err, os.ErrNotExist) {
		return &File{Version: Version, Servers: map[string]*Server{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp declarations %s: %w", path, err)
	}
	return Parse(path, data)
}

// Save validates f and replaces path atomically (mode 0600).
func Save(path string, f *File) error {
	f.Version = Version
	if f.Servers == nil {
		f.Servers = map[string]*Server{}
	}
	for name, s := range f.Servers {
		if err := s.Validate(name); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("mcp declarations: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("mcp declarations: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("mcp declarations: %w", err)
	}
	return nil
}

// Merge is the servers an agent sees: the user's, with the agent's own
// replacing any of the same name. Neither input is modified.
func Merge(user, agent *File) map[string]*Server {
	out := map[string]*Server{}
	for _, f := range []*File{user, agent} {
		if f == nil {
			continue
		}
		for n, s := range f.Servers {
			out[n] = s
		}
	}
	return out
}

// Names returns the server names of m, sorted.
func Names(m map[string]*Server) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseEnv parses an environment file: lines KEY=VALUE (the value is the
// rest of the line, taken literally), blank lines and # comments.
func ParseEnv(data []byte) (map[string]string, error) {
	if len(data) > MaxEnvSize {
		return nil, fmt.Errorf("env file: over %d bytes: %w", MaxEnvSize, ErrInvalid)
	}
	env := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !envName(k) || strings.ContainsAny(v, "\x00\r") {
			return nil, fmt.Errorf("env file line %d: want KEY=VALUE: %w", i+1, ErrInvalid)
		}
		env[k] = v
	}
	return env, nil
}

// FormatEnv is the file ParseEnv reads back, keys sorted.
func FormatEnv(env map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if !envName(k) || strings.ContainsAny(v, "\x00\r\n") {
			return nil, fmt.Errorf("env %s: invalid name or a newline, CR or NUL in the value: %w", k, ErrInvalid)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(k + "=" + env[k] + "\n")
	}
	return b.Bytes(), nil
}

// CheckEnvName validates a variable name given with --env.
func CheckEnvName(k string) error {
	if !envName(k) {
		return fmt.Errorf("env name %q: want [A-Za-z_][A-Za-z0-9_]*: %w", k, ErrInvalid)
	}
	return nil
}
