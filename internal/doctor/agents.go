package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
	"github.com/cortexfs/ctx/internal/models"
	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/internal/runprep"
	"github.com/cortexfs/ctx/internal/toolpath"
	"github.com/cortexfs/ctx/internal/window"
)

// agents checks every definition under agent/: one check per agent.
func (e *Env) agents() []Check {
	names, err := agentdef.List(e.Layout)
	if err != nil {
		return []Check{{Name: "agents", Status: Fail, Message: err.Error(), Fix: "ctx init"}}
	}
	if len(names) == 0 {
		return []Check{{Name: "agents", Status: OK, Message: "no agents yet (ctx agent create NAME --exec PATH | --model MODEL)"}}
	}
	table, terr := models.Load(e.Layout.Root)
	var out []Check
	if terr != nil {
		out = append(out, Check{Name: "models.tsv", Status: Fail, Message: terr.Error(),
			Fix: "fix " + filepath.Join(e.Layout.Root, models.UserFile) + ": lines provider/model<TAB>tokens[<TAB>source]"})
	}
	for _, n := range names {
		out = append(out, CheckAgent(e.Layout, n, table, terr == nil))
	}
	return out
}

// CheckAgent validates one definition the way a run would read it: the
// control files (agentdef.Load: abi, approval, env, tools, mount...), the
// window/model invariant (W2, W5, W6), the agent policy grammar, every
// `.d/tools` name resolved through the agent's CTX_PATH mapped to the host
// (K2), and finally a full prompt preparation (runprep.Prepare).
func CheckAgent(l layout.Layout, name string, table models.Table, tableOK bool) Check {
	c := Check{Name: "agent " + name, Status: OK}
	fail := func(msg, fix string) Check {
		c.Status, c.Message, c.Fix = Fail, msg, fix
		return c
	}
	def, err := agentdef.Load(l, name)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("fix the named file under %s (ctx agent show %s; ctx agent set %s CONTROL VALUE validates), or ctx agent rm %s", l.AgentControl(name), name, name, name))
	}
	var notes, warns []string
	if def.Kind == agentdef.KindExec {
		notes = append(notes, "executable agent ("+def.ABI+")")
		if def.ACP != nil && def.ACP.Command != "" {
			// An installed ACP agent runs from its installation.
			for _, p := range append([]string{def.ACP.Command}, def.ACP.Binds...) {
				if _, err := os.Stat(p); err != nil {
					warns = append(warns, fmt.Sprintf("its installation %s is gone: install it again, then ctx agent rm %s and create it again", p, name))
				}
			}
		}
	} else {
		notes = append(notes, "model agent ("+strings.Join(def.Models, ", ")+")")
	}
	// Window and model (spec: W2, W5): the same rule `ctx agent set` enforces,
	// applied to what is on disk (a hand edit may have broken it).
	wfile := filepath.Join(def.Control, window.WindowFile)
	val, err := window.Parse(def.Window)
	if err != nil {
		return fail(fmt.Sprintf("%s: %v", wfile, err), fmt.Sprintf("ctx agent set %s window auto", name))
	}
	switch {
	case val.IsAuto():
		notes = append(notes, "window auto")
	case len(def.Models) == 0:
		return fail(fmt.Sprintf("%s: explicit window %s, but an agent without .d/model has no known limit (runs fail with window_invalid)", wfile, val),
			fmt.Sprintf("ctx agent set %s window auto", name))
	case tableOK:
		limit, known := table.Limit(def.Models[0])
		if err := window.CheckInvariant(val, limit, known); err != nil {
			var ie *window.InvariantError
			if errors.As(err, &ie) {
				ie.Model = def.Models[0]
			}
			fix := fmt.Sprintf("ctx agent set %s window auto", name)
			if known {
				fix += fmt.Sprintf(" (or ctx agent set %s window %d, the limit of %s)", name, limit, def.Models[0])
			}
			return fail(fmt.Sprintf("%s: %v", wfile, err), fix)
		}
		notes = append(notes, "window "+val.String())
		for _, err := range window.UnusableFallbacks(val, def.Models, table) {
			warns = append(warns, fmt.Sprintf("fallback unusable at run time: %v", err))
		}
	}
	// Agent policy grammar: an invalid file fails every call closed.
	ppath := filepath.Join(def.Control, "policy")
	if _, err := os.Lstat(ppath); err == nil {
		if _, err := policy.Load(policy.AgentPolicy, ppath); err != nil {
			return fail(err.Error(), "fix the named line (grammar: internal/policy/POLICY.md), or remove "+ppath+" to allow every tool")
		}
		notes = append(notes, "policy ok")
	}
	// Declared direct-native tools (K2): present and executable for the
	// agent's identity on its CTX_PATH, as the host resolves them.
	if len(def.Tools) > 0 {
		var dirs []string
		for _, d := range toolpath.SplitPath(def.CTXPath) {
			if h, ok := l.HostPath(d); ok {
				dirs = append(dirs, h)
			}
		}
		id := toolpath.Identity{UID: def.UID, GID: def.GID, Groups: def.Groups}
		for _, t := range def.Tools {
			tool, err := toolpath.Resolve(t, dirs, id)
			if err != nil {
				return fail(fmt.Sprintf(".d/tools names %q: %v", t, err),
					fmt.Sprintf("install %s as a regular executable file (chmod 0755) in %s, or drop it: ctx agent set %s tools ...", t, l.ToolDir(), name))
			}
			tool.Close()
			tp := filepath.Join(filepath.Dir(tool.Path), t+".d", "policy")
			if _, err := os.Lstat(tp); err == nil {
				if _, err := policy.Load(policy.ToolPolicy, tp); err != nil {
					return fail(err.Error(), "fix the named line (grammar: internal/policy/POLICY.md)")
				}
			}
		}
		notes = append(notes, "tools "+strings.Join(def.Tools, ","))
	}
	// The prompt a run would build (fixed parts within the window, readable
	// system.md and template), without a session: nothing is written.
	if tableOK {
		if _, err := runprep.Prepare(runprep.Input{Layout: l, Def: def, Placeholders: true}); err != nil {
			fix := fmt.Sprintf("ctx agent prompt %s shows the prompt; shorten system.md / prompt.template.md or widen the window", name)
			var we *runprep.WindowError
			if errors.As(err, &we) {
				fix = fmt.Sprintf("ctx agent set %s window auto, or list a model with a known limit", name)
			}
			return fail(err.Error(), fix)
		}
	}
	if def.Limits != limits.Default {
		notes = append(notes, "limits "+def.Limits.String()) // The limits in force
	}
	// spec: X6 — an sdk-envelope-v1 run is fixed at 8 calls / 9 starts:
	// a `calls` line there is ignored, and said so.
	callsIgnored := def.Kind == agentdef.KindExec && def.ABI == agentdef.ABI && def.Limits.Calls != limits.DefaultCalls
	if callsIgnored {
		warns = append(warns, fmt.Sprintf(".d/limits calls %d is ignored: an %s run makes at most %d tool calls (spec X6)", def.Limits.Calls, agentdef.ABI, limits.DefaultCalls))
	}
	c.Message = "valid: " + strings.Join(notes, ", ")
	if len(warns) > 0 {
		c.Status, c.Message = Warn, c.Message+"; "+strings.Join(warns, "; ")
		c.Fix = fmt.Sprintf("ctx agent set %s model ... with fallbacks whose limit covers the window, or ctx agent set %s window auto", name, name)
		if callsIgnored && len(warns) == 1 {
			c.Fix = fmt.Sprintf("remove the calls line from agent/%s.d/limits", name)
		}
	}
	return c
}

// providers reports where each provider's key comes from, never the key.
// spec: D9 B4 — a key is named by its source only.
func (e *Env) providers() []Check {
	cfg, err := provider.Load(e.Layout.Root, e.Layout.UID, e.Getenv)
	if err != nil {
		return []Check{{Name: "providers", Status: Fail, Message: err.Error(),
			Fix: "fix " + filepath.Join(e.Layout.Root, provider.FileName) + " (mode 0600, fields as in the README)"}}
	}
	used := e.usedProviders()
	keyEnvs := keyEnvNames(e.Layout.Root)
	names := make([]string, 0, len(cfg.Providers))
	for n := range cfg.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Check
	for _, n := range names {
		pc := cfg.Providers[n]
		out = append(out, Credentials(n, pc.BaseURL, keyEnvs[n], e.Getenv(keyEnvs[n]) != "", !pc.APIKey.IsZero(), pc.KeyError,
			provider.SecretsPath(e.Layout.Root, e.Layout.UID, n), used[n]))
	}
	return out
}

// Credentials judges one provider's key from where it was found. The key
// itself is never an input. spec: D9
func Credentials(name, baseURL, keyEnv string, envSet, haveKey bool, keyErr error, secrets string, usedBy []string) Check {
	c := Check{Name: "provider " + name, Status: OK}
	users := ""
	if len(usedBy) > 0 {
		users = " (used by " + strings.Join(usedBy, ", ") + ")"
	}
	fix := fmt.Sprintf("ctx provider add %s (it stores the key in %s, 0600)", name, secrets)
	if keyEnv != "" {
		fix = fmt.Sprintf("%s, or export %s in the daemon's environment", fix, keyEnv)
	}
	switch {
	case keyErr != nil && !errors.Is(keyErr, provider.ErrNoKey): // no key at all is the default case below
		c.Status, c.Message, c.Fix = Fail, fmt.Sprintf("%s: key refused: %v%s", name, keyErr, users), fix
	case haveKey && envSet:
		c.Message = fmt.Sprintf("%s: key from %s%s", name, keyEnv, users)
	case haveKey:
		c.Message = fmt.Sprintf("%s: key from secrets file %s%s", name, secrets, users)
	default:
		c.Message = fmt.Sprintf("%s: none%s", name, users)
		official := baseURL == provider.DefaultAnthropicBaseURL || baseURL == provider.DefaultOpenAIBaseURL
		if len(usedBy) > 0 && official {
			c.Status, c.Fix = Fail, fix
			c.Message += ": runs will be refused by " + baseURL
		}
	}
	return c
}

// usedProviders maps a provider name to the agents whose model list names it.
func (e *Env) usedProviders() map[string][]string {
	out := map[string][]string{}
	names, _ := agentdef.List(e.Layout)
	for _, n := range names {
		def, err := agentdef.Load(e.Layout, n)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		for _, m := range def.Models {
			p, _, _ := strings.Cut(m, "/")
			if !seen[p] {
				seen[p] = true
				out[p] = append(out[p], n)
			}
		}
	}
	return out
}

// keyEnvNames: the variable each provider's key is read from (the built-in
// names, or providers.json's api_key_env).
func keyEnvNames(root string) map[string]string {
	out := map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
	b, err := os.ReadFile(filepath.Join(root, provider.FileName))
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return out
	}
	var f struct {
		Providers map[string]struct {
			APIKeyEnv *string `json:"api_key_env"`
		} `json:"providers"`
	}
	if json.Unmarshal(b, &f) == nil {
		for n, p := range f.Providers {
			if p.APIKeyEnv != nil {
				out[n] = *p.APIKeyEnv
			}
		}
	}
	return out
}
