package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpinstall"
	"github.com/cortexfs/ctx/internal/pathin"
)

// AgentCreateCmd is `ctx agent create`.
type AgentCreateCmd struct {
	Name     string   `arg:"" help:"Agent name."`
	Exec     string   `help:"Executable implementing sdk-envelope-v1 (or the ABI --abi names)." type:"existingfile" xor:"kind"`
	ABI      string   `help:"ABI of the --exec agent: sdk-envelope-v1 (default) or acp-v1 (an Agent Client Protocol agent)." enum:"sdk-envelope-v1,acp-v1," default:""`
	Args     []string `arg:"" optional:"" help:"Arguments of an acp-v1 agent's command (after --)."`
	Model    []string `help:"Model candidates, preferred first (provider/model)." sep:"," xor:"kind"`
	Approval string   `help:"auto or ask." enum:"auto,ask," default:""`
	Window   string   `help:"auto or a token count." default:""`
	Tools    []string `help:"Extra direct-native tools." sep:","`
}

func (c *AgentCreateCmd) Run(env *Env) error {
	if c.Exec == "" && len(c.Model) == 0 {
		return Exit(ExitUsage, fmt.Errorf("create %s: give --exec PATH or --model MODEL", c.Name))
	}
	if err := env.Layout.EnsureRoot(); err != nil {
		return err
	}
	if c.Window != "" {
		if err := checkWindowFlag(env, c.Window, c.Model); err != nil {
			return Exit(ExitUsage, err)
		}
	}
	exe := c.Exec
	if exe != "" {
		exe, _ = filepath.Abs(exe)
	}
	if c.ABI != "" && c.Exec == "" {
		return Exit(ExitUsage, fmt.Errorf("create %s: --abi needs --exec PATH", c.Name))
	}
	if len(c.Args) > 0 && c.ABI != agentdef.ABIACP {
		return Exit(ExitUsage, fmt.Errorf("create %s: arguments after the name are for --abi %s only", c.Name, agentdef.ABIACP))
	}
	var launch *agentdef.ACPLaunch
	if c.ABI == agentdef.ABIACP {
		var err error
		if launch, err = acpLaunch(exe, c.Args); err != nil {
			return Exit(ExitUsage, fmt.Errorf("create %s: %w", c.Name, err))
		}
	}
	if err := agentdef.Create(env.Layout, c.Name, agentdef.CreateOptions{Exec: exe, ABI: c.ABI, ACP: launch,
		Models: c.Model, Approval: c.Approval, Window: c.Window, Tools: c.Tools}); err != nil {
		return err
	}
	for _, w := range keyWarnings(env.Layout, c.Model, os.Getenv) {
		fmt.Fprintln(env.Stderr, "ctx: warning: "+w)
	}
	return nil
}

// acpLaunch is .d/acp.json of an acp-v1 agent, resolved
// as `ctx mcp add` resolves a server: an npm bin (a node script, symlinks
// followed) runs as node on the real script with its node_modules and
// node's own prefix bound read-only; any other executable runs as the
// agent object (a copy) with args. nil when there is nothing to declare.
func acpLaunch(exe string, args []string) (*agentdef.ACPLaunch, error) {
	s, err := mcpinstall.DefaultResolver().Resolve(exe, args)
	if err != nil {
		return nil, err
	}
	real, _ := filepath.EvalSymlinks(exe)
	l := &agentdef.ACPLaunch{Args: args, Binds: s.Binds}
	if s.Command != real {
		l.Command, l.Args = s.Command, s.Args
		if script := s.Args[0]; !slices.ContainsFunc(l.Binds, func(b string) bool { return pathin.Inside(script, b) }) {
			l.Binds = append(l.Binds, script) // a lone script outside any package
		}
	}
	if l.Command == "" && len(l.Args) == 0 && len(l.Binds) == 0 {
		return nil, nil
	}
	return l, l.Validate()
}

// AgentListCmd is `ctx agent list`.
type AgentListCmd struct{}

func (c *AgentListCmd) Run(env *Env) error {
	names, err := agentdef.List(env.Layout)
	if err != nil {
		return err
	}
	for _, n := range names {
		kind := "invalid"
		if d, err := agentdef.Load(env.Layout, n); err == nil {
			kind = d.Kind
		}
		fmt.Fprintf(env.Stdout, "%s\t%s\n", n, kind)
	}
	return nil
}

// AgentShowCmd is `ctx agent show`.
type AgentShowCmd struct {
	Name string `arg:"" help:"Agent name."`
}

func (c *AgentShowCmd) Run(env *Env) error {
	d, err := agentdef.Load(env.Layout, c.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "name: %s\nkind: %s\nobject: %s\ncontrol: %s\napproval: %s\nCTX_PATH: %s\n", d.Name, d.Kind, d.Object, d.Control, d.Approval, d.CTXPath)
	if len(d.Models) > 0 {
		fmt.Fprintf(env.Stdout, "model: %s\n", strings.Join(d.Models, ", "))
	}
	if len(d.Window) > 0 {
		fmt.Fprintf(env.Stdout, "window: %s\n", strings.TrimSpace(string(d.Window)))
	}
	if len(d.Tools) > 0 {
		fmt.Fprintf(env.Stdout, "tools: %s\n", strings.Join(d.Tools, ", "))
	}
	for _, kv := range d.Env {
		fmt.Fprintf(env.Stdout, "env: %s=…\n", kv.Key)
	}
	ents, _ := os.ReadDir(d.Control)
	var ctls []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			ctls = append(ctls, e.Name())
		}
	}
	fmt.Fprintf(env.Stdout, "controls: %s\n", strings.Join(ctls, " "))
	return nil
}

// AgentRmCmd is `ctx agent rm`.
type AgentRmCmd struct {
	Name string `arg:"" help:"Agent name."`
}

func (c *AgentRmCmd) Run(env *Env) error { return agentdef.Remove(env.Layout, c.Name) }

// AgentGetCmd is `ctx agent get`.
type AgentGetCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Control string `arg:"" help:"Control file: abi approval tools model window policy label root cwd env path mount uid gid groups system.md prompt.template.md."`
}

func (c *AgentGetCmd) Run(env *Env) error {
	b, err := agentdef.Get(env.Layout, c.Name, c.Control)
	if err != nil {
		return Exit(ExitUsage, err)
	}
	_, err = env.Stdout.Write(b)
	return err
}

// AgentSetCmd is `ctx agent set`.
type AgentSetCmd struct {
	Name    string `arg:"" help:"Agent name."`
	Control string `arg:"" help:"Control file: abi approval tools model window policy label root cwd env path mount uid gid groups system.md prompt.template.md."`
	Value   string `arg:"" help:"New content (a missing final newline is added; tools, groups and model take a,b,c)."`
}

func (c *AgentSetCmd) Run(env *Env) error {
	if err := agentdef.Set(env.Layout, c.Name, c.Control, c.Value, windowValidator(env, c.Name)); err != nil {
		return Exit(ExitUsage, err)
	}
	return nil
}

// keyWarnings names the candidates whose provider has no key in sight:
// anthropic and openai (which always need one) and a providers.json
// entry with api_key_env, when neither that variable (in this shell; the
// daemon reads its own) nor the owner's secrets file holds one. A
// provider without api_key_env may be a local server: no warning. Read
// here without the provider package (which would link net/http into
// every ctx command).
func keyWarnings(l layout.Layout, models []string, getenv func(string) string) []string {
	var file struct {
		Providers map[string]struct {
			APIKeyEnv *string `json:"api_key_env"`
		} `json:"providers"`
	}
	if b, err := os.ReadFile(filepath.Join(l.Root, "providers.json")); err == nil {
		_ = json.Unmarshal(b, &file)
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range models {
		name, _, _ := strings.Cut(m, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		env := map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}[name]
		if p, ok := file.Providers[name]; ok && p.APIKeyEnv != nil {
			env = *p.APIKeyEnv
		}
		if env == "" {
			continue
		}
		if getenv(env) != "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(l.UserHome(), "secrets", name)); err == nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s: provider %s has no key ($%s is not set here and there is no %s); its runs will fail until one is added: ctx provider add %s",
			m, name, env, filepath.Join(l.UserHome(), "secrets", name), name))
	}
	return out
}
