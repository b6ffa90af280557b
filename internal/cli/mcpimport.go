package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/safefs"
)

// McpImportCmd is `ctx mcp import FILE [--agent A] [--only N,…] [--net N,…]
// [--force] [--partial] [--dry-run]`: the servers of Claude Code's
// .mcp.json or Codex's config.toml declared as `ctx mcp add` declares them
// (README "MCP servers as tsh tools", "Importing").
type McpImportCmd struct {
	File    string   `arg:"" help:"Claude Code's .mcp.json ({\"mcpServers\": …}) or Codex's config.toml ([mcp_servers.NAME])."`
	Agent   string   `help:"Declare them for this agent only (agent/<name>.d/mcp.json)."`
	Only    []string `help:"Import only these servers of the file." sep:"," placeholder:"NAME"`
	Net     []string `help:"Give these servers network access (a type http / url server needs it)." sep:"," placeholder:"NAME"`
	Format  string   `help:"claude or codex (default: codex for *.toml, else claude)." enum:",claude,codex" default:""`
	Force   bool     `help:"Replace existing declarations of the same names."`
	Partial bool     `help:"Import the servers that can be imported even when others are refused (default: all or nothing)."`
	DryRun  bool     `name:"dry-run" help:"Say what would be imported; write nothing."`
}

// imported is one server of the file as the import resolved it.
type imported struct {
	name   string
	server *mcpconf.Server
	env    map[string]string // values for the secrets file
	why    string            // refused (or skipped) and why
	skip   bool              // disabled in the file: neither imported nor refused
}

func (c *McpImportCmd) Run(env *Env) error {
	data, err := readForeign(c.File)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	format := c.Format
	if format == "" {
		format = mcpconf.DetectFormat(c.File, data)
	}
	servers, err := mcpconf.ParseForeign(format, c.File, data, os.LookupEnv)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	byName := map[string]*mcpconf.Foreign{}
	for _, s := range servers {
		byName[s.Name] = s
	}
	for _, n := range append(append([]string{}, c.Only...), c.Net...) {
		if byName[n] == nil {
			return Exit(ExitUsage, fmt.Errorf("%s declares no server %q", c.File, n))
		}
	}
	path, err := mcpFile(env.Layout, c.Agent)
	if err != nil {
		return err
	}
	f, err := mcpconf.Load(path)
	if err != nil {
		if !samePath(c.File, path) {
			return Exit(ExitUsage, err)
		}
		// A .mcp.json copied in as mcp.json: imported in place, the file
		// replaced by its declarations in ctx's format.
		f = &mcpconf.File{Version: mcpconf.Version, Servers: map[string]*mcpconf.Server{}}
	}
	only := set(c.Only)
	net := set(c.Net)
	var plan []*imported
	for _, s := range servers {
		if len(only) > 0 && !only[s.Name] {
			continue
		}
		plan = append(plan, c.resolve(s, net[s.Name], f))
	}
	refused := 0
	for _, p := range plan {
		if !p.skip && p.why != "" {
			refused++
		}
	}
	for _, p := range plan {
		switch {
		case p.skip:
			fmt.Fprintf(env.Stdout, "skipped  %s: %s\n", p.name, p.why)
		case p.why != "":
			fmt.Fprintf(env.Stdout, "refused  %s: %s\n", p.name, indent(p.why))
		default:
			verb := "import  "
			if c.DryRun || refused > 0 && !c.Partial {
				verb = "ok      "
			}
			fmt.Fprintf(env.Stdout, "%s %s: %s\n", verb, p.name, describe(p))
		}
	}
	if refused > 0 && !c.Partial {
		return Exit(ExitUsage, fmt.Errorf("nothing imported: %d of %d servers refused (fix them, leave them out with --only, or import the others with --partial)", refused, len(plan)))
	}
	if c.DryRun {
		fmt.Fprintf(env.Stdout, "dry run: nothing written (%s would be updated)\n", path)
		return nil
	}
	n, err := commitImport(env, path, f, plan)
	if err != nil {
		return fmt.Errorf("mcp import: %w", err)
	}
	fmt.Fprintf(env.Stdout, "imported %d MCP servers into %s; their tools are NAME.TOOL (an agent policy may name them: allow tool NAME.*)\n", n, path)
	if refused > 0 {
		return Exit(ExitUsage, fmt.Errorf("%d servers refused (see above)", refused))
	}
	return nil
}

// resolve turns one foreign server into a declaration by the code path of
// `ctx mcp add`, or says why not.
func (c *McpImportCmd) resolve(s *mcpconf.Foreign, net bool, existing *mcpconf.File) *imported {
	p := &imported{name: s.Name}
	switch {
	case s.Disabled:
		p.skip, p.why = true, "disabled in the file (enabled = false)"
		return p
	case s.Problem != "":
		p.why = s.Problem
		return p
	case existing.Servers[s.Name] != nil && !c.Force:
		p.why = "already declared (ctx mcp list); --force replaces it"
		return p
	}
	if s.URL != "" {
		if len(s.Env)+len(s.EnvFrom) > 0 {
			p.why = "env is for stdio servers (the values go to the server's process)"
			return p
		}
		if !net {
			p.why = fmt.Sprintf("a url server needs network access: add --net %s", s.Name)
			return p
		}
		p.server = &mcpconf.Server{URL: s.URL, Net: true}
	} else {
		srv, err := mcpinstall.DefaultResolver().Resolve(s.Command, s.Args)
		if err != nil {
			p.why = err.Error()
			if errors.Is(err, mcpinstall.ErrDownload) {
				p.why = strings.ReplaceAll(p.why, "ctx mcp add NAME", "ctx mcp add "+s.Name)
			}
			return p
		}
		srv.Net = net
		p.server = srv
	}
	p.env = map[string]string{}
	for k, v := range s.Env {
		p.env[k] = v
	}
	for _, k := range s.EnvFrom {
		v, ok := os.LookupEnv(k)
		if !ok {
			p.why = fmt.Sprintf("env_vars: %s is not set in this environment (export it first)", k)
			return p
		}
		p.env[k] = v
	}
	if _, err := mcpconf.FormatEnv(p.env); err != nil {
		p.why = err.Error()
		return p
	}
	for k := range p.env {
		p.server.Env = append(p.server.Env, k)
	}
	sort.Strings(p.server.Env)
	if err := p.server.Validate(s.Name); err != nil {
		p.why = err.Error()
	}
	return p
}

// commitImport writes the secrets files, then the declaration file in one
// atomic replace; when that fails, the secrets files are put back as they
// were, so nothing is half-written.
func commitImport(env *Env, path string, f *mcpconf.File, plan []*imported) (int, error) {
	type saved struct {
		path string
		data []byte // nil: it did not exist
	}
	var undo []saved
	restore := func() {
		for _, u := range undo {
			if u.data == nil {
				_ = os.Remove(u.path)
			} else {
				_ = atomicfile.WriteFile(u.path, u.data, 0o600)
			}
		}
	}
	n := 0
	var stale []string
	for _, p := range plan {
		if p.server == nil || p.why != "" {
			continue
		}
		ef := mcpinstall.EnvFile(env.Layout, p.name)
		old, err := os.ReadFile(ef)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			restore()
			return 0, fmt.Errorf("env file: %w", err)
		}
		if len(p.env) == 0 {
			if err == nil {
				stale = append(stale, ef) // a replaced server's old values
			}
		} else {
			data, ferr := mcpconf.FormatEnv(p.env)
			if ferr == nil {
				ferr = os.MkdirAll(filepath.Dir(ef), 0o700)
			}
			if ferr == nil {
				undo = append(undo, saved{ef, old})
				ferr = atomicfile.WriteFile(ef, data, 0o600)
			}
			if ferr != nil {
				restore()
				return 0, fmt.Errorf("env file of %s: %w", p.name, ferr)
			}
		}
		f.Servers[p.name] = p.server
		n++
	}
	if err := mcpconf.Save(path, f); err != nil {
		restore()
		return 0, err
	}
	for _, ef := range stale {
		_ = os.Remove(ef)
	}
	return n, nil
}

// readForeign reads the file to import: a regular file (a symlink is
// followed: it is the person's own file), at most mcpconf.MaxFileSize.
func readForeign(path string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("mcp import: %w", err)
	}
	fh, st, err := safefs.OpenRegular(real)
	if err != nil {
		return nil, fmt.Errorf("mcp import %s: %w", path, err)
	}
	defer fh.Close()
	if st.Size() > mcpconf.MaxFileSize {
		return nil, fmt.Errorf("mcp import %s: over %d bytes", path, mcpconf.MaxFileSize)
	}
	return io.ReadAll(io.LimitReader(fh, mcpconf.MaxFileSize+1))
}

func describe(p *imported) string {
	s := p.server
	if s.URL != "" {
		return s.URL + " (net)"
	}
	d := strings.Join(append([]string{s.Command}, s.Args...), " ")
	if len(s.Binds) > 0 {
		d += "\n           read-only in its sandbox: " + strings.Join(s.Binds, " ")
	}
	if len(s.Env) > 0 {
		d += "\n           env (values in the owner-only secrets file): " + strings.Join(s.Env, ",")
	}
	if s.Net {
		d += "\n           network: yes"
	}
	return d
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n           ") }

func set(names []string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// samePath reports whether a and b name the same existing file.
func samePath(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
