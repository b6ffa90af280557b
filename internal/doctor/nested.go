package doctor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/safefs"
)

// Agents that start a sandbox of their own (bubblewrap, Landlock, a user
// namespace, a container) fail inside ctx's sandbox: the seccomp filter
// refuses every new namespace (docs/walls.md), so their inner sandbox cannot
// start. ctx's sandbox is the wall that holds either way (docs/walls.md), so the
// inner one is turned off. These checks name the exact setting.

// Nesting agent families, recognised from .d/acp.json.
const (
	NestCodex  = "codex"
	NestGemini = "gemini"
	NestClaude = "claude-code"
)

// NestingAgent recognises an agent that sandboxes itself from its launch:
// the command, its arguments and its binds (an npm package's path names
// it: @zed-industries/codex-acp, @google/gemini-cli, claude-code-acp...).
// "" when it is none of them.
func NestingAgent(l *agentdef.ACPLaunch) string {
	if l == nil {
		return ""
	}
	words := append([]string{l.Command}, l.Args...)
	words = append(words, l.Binds...)
	for _, w := range words {
		for _, part := range strings.Split(strings.ToLower(w), "/") {
			switch {
			case part == "codex" || strings.HasPrefix(part, "codex-") || strings.HasPrefix(part, "codex."):
				return NestCodex
			case part == "gemini" || part == "gemini-cli" || strings.HasPrefix(part, "gemini-cli"):
				return NestGemini
			case part == "claude" || strings.HasPrefix(part, "claude-code"):
				return NestClaude
			}
		}
	}
	return ""
}

// NestedSandbox judges one acp-v1 agent's inner sandbox from its launch
// and the settings files in its agent home (read with readHome, a path
// relative to /home/agent; an absent file reads as fs.ErrNotExist). ok is
// false when the agent is not a known nesting one (no check).
func NestedSandbox(name string, l *agentdef.ACPLaunch, env []agentdef.KV, readHome func(rel string) ([]byte, error)) (Check, bool) {
	kind := NestingAgent(l)
	if kind == "" {
		return Check{}, false
	}
	c := Check{Name: "nested sandbox " + name, Status: OK}
	why := "ctx's sandbox is the wall either way: the agent sees only /workspace, /home/agent and its installation, under ctx's seccomp filter, cgroup and approval, and the filter refuses the namespaces an inner sandbox needs"
	on := func(setting, fix string) (Check, bool) {
		c.Status = Warn
		c.Message = fmt.Sprintf("%s (%s) starts its own sandbox (%s); inside ctx's sandbox it cannot, and its commands fail", name, kind, setting)
		c.Fix = fix + " — safe because " + why
		return c, true
	}
	switch kind {
	case NestCodex:
		const file = ".codex/config.toml"
		for i, a := range l.Args {
			if v, ok := codexArgSandbox(l.Args, i, a); ok {
				if v == "danger-full-access" {
					c.Message = fmt.Sprintf("%s (codex): inner sandbox off (argument sandbox_mode=%s); ctx's sandbox is the wall", name, v)
					return c, true
				}
				return on("argument sandbox_mode="+v, fmt.Sprintf(`pass -c sandbox_mode="danger-full-access" in .d/acp.json args instead (ctx agent set %s acp.json '…')`, name))
			}
		}
		v, found, err := tomlTopString(readHome(file))
		if err != nil {
			return on("/home/agent/"+file+" unreadable: "+err.Error(), fmt.Sprintf(`fix %s: sandbox_mode = "danger-full-access"`, file))
		}
		if found && v == "danger-full-access" {
			c.Message = fmt.Sprintf(`%s (codex): inner sandbox off (/home/agent/%s sandbox_mode = "danger-full-access"); ctx's sandbox is the wall`, name, file)
			return c, true
		}
		setting := "no sandbox_mode in /home/agent/" + file + ": its default sandboxes commands"
		if found {
			setting = fmt.Sprintf("/home/agent/%s sandbox_mode = %q", file, v)
		}
		return on(setting, fmt.Sprintf(`put sandbox_mode = "danger-full-access" at the top of %s/%s (the agent home, /home/agent inside)`, "home/<uid>/agent/"+name, file))
	case NestGemini:
		const file = ".gemini/settings.json"
		for _, kv := range env {
			if kv.Key == "GEMINI_SANDBOX" && sandboxOn(json.RawMessage(strconvQuote(kv.Value))) {
				return on("GEMINI_SANDBOX="+kv.Value+" in .d/env", fmt.Sprintf("remove GEMINI_SANDBOX from .d/env (ctx agent set %s env …)", name))
			}
		}
		for _, a := range l.Args {
			if a == "--sandbox" || a == "-s" || strings.HasPrefix(a, "--sandbox=") && a != "--sandbox=false" {
				return on("argument "+a, fmt.Sprintf("drop %s from .d/acp.json args (ctx agent set %s acp.json '…')", a, name))
			}
		}
		b, err := readHome(file)
		if err == nil {
			var s struct {
				Sandbox json.RawMessage `json:"sandbox"`
				Tools   struct {
					Sandbox json.RawMessage `json:"sandbox"`
				} `json:"tools"`
			}
			if jerr := json.Unmarshal(b, &s); jerr != nil {
				return on("/home/agent/"+file+" is not JSON: "+jerr.Error(), "fix "+file+`: "tools": {"sandbox": false}`)
			}
			for _, f := range []struct {
				key string
				v   json.RawMessage
			}{{"sandbox", s.Sandbox}, {"tools.sandbox", s.Tools.Sandbox}} {
				if sandboxOn(f.v) {
					return on(fmt.Sprintf("/home/agent/%s %s: %s", file, f.key, f.v),
						fmt.Sprintf(`set "%s": false in home/<uid>/agent/%s/%s, and keep GEMINI_SANDBOX unset in .d/env`, f.key, name, file))
				}
			}
		} else if !isNotExist(err) {
			return on("/home/agent/"+file+" unreadable: "+err.Error(), "fix "+file)
		}
		c.Message = fmt.Sprintf("%s (gemini): inner sandbox off (no --sandbox, %s sandbox unset or false; it is off by default); keep GEMINI_SANDBOX unset", name, file)
		return c, true
	case NestClaude:
		const file = ".claude/settings.json"
		b, err := readHome(file)
		if err == nil {
			var s struct {
				Sandbox struct {
					Enabled json.RawMessage `json:"enabled"`
				} `json:"sandbox"`
			}
			if jerr := json.Unmarshal(b, &s); jerr != nil {
				return on("/home/agent/"+file+" is not JSON: "+jerr.Error(), "fix "+file+`: "sandbox": {"enabled": false}`)
			}
			if sandboxOn(s.Sandbox.Enabled) {
				return on(fmt.Sprintf("/home/agent/%s sandbox.enabled: %s", file, s.Sandbox.Enabled),
					fmt.Sprintf(`set "sandbox": {"enabled": false} in home/<uid>/agent/%s/%s`, name, file))
			}
		} else if !isNotExist(err) {
			return on("/home/agent/"+file+" unreadable: "+err.Error(), "fix "+file)
		}
		c.Message = fmt.Sprintf("%s (claude-code): inner sandbox off (%s sandbox.enabled unset or false; off by default); a workspace's .claude/settings.json may still turn it on", name, file)
		return c, true
	}
	return Check{}, false
}

// codexArgSandbox reads a sandbox mode from codex's command line:
// `-c sandbox_mode=X`, `--config sandbox_mode=X`, `--sandbox X`, `-s X`.
func codexArgSandbox(args []string, i int, a string) (string, bool) {
	next := ""
	if i+1 < len(args) {
		next = args[i+1]
	}
	kv := ""
	switch {
	case a == "-c" || a == "--config":
		kv = next
	case strings.HasPrefix(a, "--config="):
		kv = strings.TrimPrefix(a, "--config=")
	case a == "--sandbox" || a == "-s":
		return strings.Trim(next, `"'`), next != ""
	case strings.HasPrefix(a, "--sandbox="):
		return strings.Trim(strings.TrimPrefix(a, "--sandbox="), `"'`), true
	}
	k, v, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) != "sandbox_mode" {
		return "", false
	}
	return strings.Trim(strings.TrimSpace(v), `"'`), true
}

// tomlTopString finds key sandbox_mode among a TOML file's top-level keys
// (before the first [table]); a missing file is not found.
func tomlTopString(b []byte, err error) (string, bool, error) {
	if err != nil {
		if isNotExist(err) {
			return "", false, nil
		}
		return "", false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "sandbox_mode" {
			continue
		}
		v = strings.TrimSpace(v)
		if i := strings.Index(v, "#"); i >= 0 && (strings.Count(v[:i], `"`)%2 == 0) {
			v = strings.TrimSpace(v[:i])
		}
		return strings.Trim(v, `"'`), true, nil
	}
	return "", false, nil
}

// sandboxOn: a settings value that turns a sandbox on — true, or a
// non-empty string other than "false" (Gemini takes "docker", "podman").
func sandboxOn(v json.RawMessage) bool {
	if len(v) == 0 {
		return false
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s != "" && s != "false" && s != "0"
	}
	var o struct {
		Enabled *bool `json:"enabled"`
	}
	if json.Unmarshal(v, &o) == nil && o.Enabled != nil {
		return *o.Enabled
	}
	return false
}

// strconvQuote is v as a JSON string.
func strconvQuote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// NestedProbe is what the in-sandbox probe saw.
type NestedProbe struct {
	Unshare string // "refused", "allowed" or "absent" (/usr/bin/unshare)
	Bwrap   string // the same for a bwrap started inside the sandbox
}

// CheckNestedUserns reports, once, whether a sandbox inside ctx's sandbox
// can be created: expected not (the seccomp filter refuses namespaces).
func CheckNestedUserns(p NestedProbe, err error) Check {
	c := Check{Name: "nested sandbox"}
	switch {
	case err != nil:
		c.Status, c.Message = Warn, "not probed: "+err.Error()
	case p.Unshare == "allowed" || p.Bwrap == "allowed":
		c.Status = Warn
		c.Message = fmt.Sprintf("inside ctx's sandbox a user namespace could be created (unshare -U %s, bwrap %s): the seccomp filter is not in force", p.Unshare, p.Bwrap)
		c.Fix = "see the seccomp check; a sandbox must refuse new namespaces"
	default:
		c.Status = OK
		c.Message = fmt.Sprintf("inside ctx's sandbox no user namespace can be created (unshare -U %s, bwrap %s), as intended: an agent's own sandbox cannot start there, so it is turned off (see the nested sandbox checks of the agents)", p.Unshare, p.Bwrap)
	}
	return c
}

// nestedChecks: one check per acp-v1 agent that sandboxes itself, then the
// probe once — only when there is an acp-v1 agent at all.
func (e *Env) nestedChecks(ctx context.Context, bw BwrapResult) []Check {
	names, err := agentdef.List(e.Layout)
	if err != nil {
		return nil
	}
	var out []Check
	acp := false
	for _, n := range names {
		def, err := agentdef.Load(e.Layout, n)
		if err != nil || def.ABI != agentdef.ABIACP {
			continue
		}
		acp = true
		home := e.Layout.AgentHome(n)
		read := func(rel string) ([]byte, error) { return readAgentFile(filepath.Join(home, rel)) }
		if c, ok := NestedSandbox(n, def.ACP, def.Env, read); ok {
			out = append(out, c)
		}
	}
	if !acp {
		return out
	}
	switch {
	case bw.Path == "":
		out = append(out, CheckNestedUserns(NestedProbe{}, errors.New("no usable bwrap")))
	case e.ProbeNested == nil:
		out = append(out, CheckNestedUserns(NestedProbe{}, errors.New("no probe")))
	default:
		out = append(out, CheckNestedUserns(e.ProbeNested(ctx, bw.Path)))
	}
	return out
}

// probeNested starts a sandbox the way the runtime does (internal/proc adds
// the seccomp filter) and tries, inside it, what an agent's own sandbox
// does first: unshare -U, and bwrap with a new user namespace.
func probeNested(ctx context.Context, bw string) (NestedProbe, error) {
	script := `t() { if [ -x "$1" ]; then shift; if "$@" >/dev/null 2>&1; then echo allowed; else echo refused; fi; else echo absent; fi; }
t /usr/bin/unshare /usr/bin/unshare -U /bin/true
t /usr/bin/bwrap /usr/bin/bwrap --unshare-user --ro-bind / / /bin/true`
	p, err := proc.Start(proc.Options{Bwrap: bw, Spec: bwrap.Spec{System: true, Argv: []string{"/bin/sh", "-c", script}}})
	if err != nil {
		return NestedProbe{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		<-ctx.Done()
		p.Kill()
	}()
	out, _ := io.ReadAll(io.LimitReader(p.Stdout, 4<<10))
	werr := p.Wait()
	lines := strings.Fields(string(out))
	if werr != nil || len(lines) != 2 {
		return NestedProbe{}, fmt.Errorf("the probe sandbox failed: %v: %q %s", werr, out, p.Stderr())
	}
	return NestedProbe{Unshare: lines[0], Bwrap: lines[1]}, nil
}

// maxAgentFile bounds a settings file read from an agent home.
const maxAgentFile = 1 << 20

// readAgentFile reads a settings file in an agent home, which the agent
// writes: no symlink in any component (a planted link never points doctor
// at a host file), a FIFO never blocks (O_NONBLOCK), only a regular file,
// at most maxAgentFile bytes (more is an error, not a cut file).
func readAgentFile(path string) ([]byte, error) {
	f, err := safefs.Open(path, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, safefs.ErrNotRegular)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAgentFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAgentFile {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxAgentFile)
	}
	return b, nil
}
