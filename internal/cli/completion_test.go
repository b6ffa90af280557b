package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/cortexfs/ctx/contrib/systemd"
	"github.com/cortexfs/ctx/internal/layout"
)

func parser(t *testing.T) *kong.Kong {
	t.Helper()
	var c CLI
	k, err := kong.New(&c, kong.Name("ctx"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// compWorld is a CTX_ROOT with agents demo and bot, demo with sessions
// default and s2 and a shared session team.
func compWorld(t *testing.T) layout.Layout {
	t.Helper()
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: os.Getuid()}
	l.EnsureRoot()
	for _, a := range []string{"demo", "bot"} {
		os.WriteFile(l.AgentObject(a), []byte("x\n"), 0o755)
		os.MkdirAll(l.AgentControl(a), 0o755)
	}
	for _, s := range []string{"default", "s2"} {
		os.MkdirAll(l.SessionDir("demo", layout.ScopePrivate, s), 0o755)
	}
	os.MkdirAll(l.SessionDir("demo", layout.ScopeShared, "team"), 0o755)
	// What a removal leaves while it deletes is never a candidate.
	os.MkdirAll(filepath.Join(l.SessionsDir("demo", layout.ScopePrivate), ".trash", "old.01"), 0o755)
	os.WriteFile(filepath.Join(l.ToolDir(), "clock"), []byte("#!/bin/sh\n"), 0o755)
	return l
}

func TestComplete(t *testing.T) {
	k := parser(t)
	l := compWorld(t)
	for _, tc := range []struct {
		words []string
		want  string // candidate values joined by spaces, then the directive
	}{
		{[]string{""}, "init daemon agent acp mcp terminal provider doctor logs ps install-units completion"},
		{[]string{"ag"}, "agent"},
		{[]string{"agent", "se"}, "set send sessions"},
		{[]string{"agent", "send", ""}, "bot demo"},
		{[]string{"agent", "send", "d"}, "demo"},
		{[]string{"agent", "send", "demo", "--session", ""}, "default s2"},
		{[]string{"agent", "send", "demo", "--scope", "shared", "--session", ""}, "team"},
		{[]string{"agent", "send", "--session", "x", ""}, "bot demo"}, // a flag's value is not a positional
		{[]string{"agent", "send", "demo", "--session=s"}, "--session=s2"},
		{[]string{"agent", "send", "demo", "--session", "=", "s"}, "--session=s2"}, // bash splits at =
		{[]string{"agent", "send", "demo", "--j"}, "--json"},
		{[]string{"agent", "send", "demo", "--scope", ""}, "private shared"},
		{[]string{"agent", "get", "demo", "win"}, "window"},
		{[]string{"agent", "set", "demo", "approval", ""}, "auto ask"},
		{[]string{"agent", "create", "x", "--tools", "clo"}, "clock"},
		{[]string{"agent", "create", "x", "--model", "openai/gpt-4o,anthropic/claude-sonnet-4-5"}, "openai/gpt-4o,anthropic/claude-sonnet-4-5"},
		{[]string{"agent", "create", "x", "--exec", ""}, ":files"},
		{[]string{"agent", "tsh", "demo", "--", ""}, ""},
		{[]string{"terminal", "status", "demo", ""}, "default s2"},
		{[]string{"completion", ""}, "bash zsh fish"},
		{[]string{"install-units", "--dir", ""}, ":dirs"},
		{[]string{"__complete", "sessions", ""}, "bot demo"},
		{[]string{"agent", "list", ""}, ""},
		// The session commands complete session names.
		{[]string{"agent", "rm-session", ""}, "bot demo"},
		{[]string{"agent", "rm-session", "demo", ""}, "default s2"},
		{[]string{"agent", "rm-session", "demo", "--scope", "shared", ""}, "team"},
		{[]string{"agent", "rm-session", "--scope=shared", "demo", "t"}, "team"},
		{[]string{"agent", "history", "demo", "--session", ""}, "default s2"},
		{[]string{"agent", "history", "demo", "--scope", "shared", "--session", ""}, "team"},
		{[]string{"agent", "sessions", ""}, "bot demo"},
	} {
		cs, dir := complete(k.Model.Node, l, tc.words)
		var got []string
		for _, c := range cs {
			got = append(got, c.value)
		}
		if dir != "" {
			got = append(got, dir)
		}
		if g := strings.Join(got, " "); !strings.HasPrefix(g, tc.want) || (tc.want == "" && g != "") {
			t.Errorf("%q: got %q, want %q", tc.words, g, tc.want)
		}
	}
}

// TestBashScript runs the generated bash script against the real binary's
// completion logic (this test binary stands in for ctx via CTX_COMPLETE_SELF).
func TestBashScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	ctxBin := buildCtx(t)
	l := compWorld(t)
	var script bytes.Buffer
	k := parser(t)
	kctx, err := k.Parse([]string{"completion", "bash"})
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Ctx: context.Background(), Layout: l, Stdout: &script, Stderr: os.Stderr}
	if err := kctx.Run(env); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string // the words, the last one being completed
		want string
	}{
		{"ctx agent send ''", "bot demo"},
		{"ctx agent send demo --session ''", "default s2"},
		{"ctx agent send demo --session = ''", "default s2"}, // --session=<Tab>: bash's words
		{"ctx agent send demo --session = s", "s2"},
		{"ctx doc", "doctor"},
	} {
		sh := script.String() + "\nCOMP_WORDS=(" + strings.Replace(tc.line, "ctx", ctxBin, 1) + ")\n" +
			"COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n_ctx_complete\necho \"${COMPREPLY[*]}\"\n"
		cmd := exec.Command(bash, "--norc", "-c", sh)
		cmd.Env = append(os.Environ(), "CTX_ROOT="+l.Root, "CTX_RUNTIME_DIR="+l.Runtime)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%s: got %q (%v), want %q", tc.line, out, err, tc.want)
		}
	}
}

func buildCtx(t *testing.T) string {
	t.Helper()
	ctxBin := filepath.Join(t.TempDir(), "ctx")
	if out, err := exec.Command("go", "build", "-o", ctxBin, "../../cmd/ctx").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return ctxBin
}

// TestZshFishScripts drives the zsh and fish scripts when those shells are
// installed: fish through `complete -C`, zsh with _describe and _files
// replaced by printers.
func TestZshFishScripts(t *testing.T) {
	zsh, zerr := exec.LookPath("zsh")
	fish, ferr := exec.LookPath("fish")
	if zerr != nil && ferr != nil {
		t.Skip("neither zsh nor fish installed")
	}
	ctxBin := buildCtx(t)
	l := compWorld(t)
	env := append(os.Environ(), "CTX_ROOT="+l.Root, "CTX_RUNTIME_DIR="+l.Runtime, "PATH="+filepath.Dir(ctxBin)+":"+os.Getenv("PATH"))
	run := func(bin string, args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", bin, err, out)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	if ferr == nil {
		got := run(fish, "--no-config", "-c", `ctx completion fish | source; complete -C "ctx agent send "; complete -C "ctx agent send demo --session=s"`)
		if got != "bot demo --session=s2" {
			t.Errorf("fish: %q", got)
		}
	}
	if zerr == nil {
		got := run(zsh, "-f", "-c", `autoload -U compinit; compinit -u -D; source <(ctx completion zsh)
_describe() { print -l -- "${(@P)${@[-1]}}" }
_files() { print FILES }
words=(ctx agent send ""); CURRENT=4; _ctx
words=(ctx agent send demo --session ""); CURRENT=6; _ctx
words=(ctx agent create x --exec ""); CURRENT=6; _ctx`)
		if got != "bot demo default s2 FILES" {
			t.Errorf("zsh: %q", got)
		}
	}
}

func TestScriptsNameTheProgram(t *testing.T) {
	for _, s := range []string{bashScript, zshScript, fishScript} {
		if !strings.Contains(s, "@CTX@ __complete words --") && !strings.Contains(s, "__complete words --") {
			t.Errorf("script does not call __complete words:\n%s", s)
		}
	}
	for sh, bin := range map[string]string{"zsh": "zsh", "fish": "fish"} {
		p, err := exec.LookPath(bin)
		if err != nil {
			continue
		}
		script := map[string]string{"zsh": zshScript, "fish": fishScript}[sh]
		script = strings.ReplaceAll(script, "@CTX@", "ctx")
		if out, err := exec.Command(p, "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
}

func TestInstallUnits(t *testing.T) {
	dir := t.TempDir()
	k := parser(t)
	kctx, err := k.Parse([]string{"install-units", "--dir", dir, "--bin", "/opt/ctx/bin/ctx"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CTX_ROOT", "/srv/ctx")
	var out bytes.Buffer
	env := &Env{Ctx: context.Background(), Layout: layout.Layout{Root: "/srv/ctx"}, Stdout: &out, Stderr: &out}
	if err := kctx.Run(env); err != nil {
		t.Fatal(err)
	}
	svc, _ := os.ReadFile(filepath.Join(dir, "ctx.service"))
	sock, _ := os.ReadFile(filepath.Join(dir, "ctx.socket"))
	for _, want := range []string{"Type=notify", "ExecStart=/opt/ctx/bin/ctx daemon\nEnvironment=\"CTX_ROOT=/srv/ctx\"\n", "WatchdogSec="} {
		if !strings.Contains(string(svc), want) {
			t.Errorf("ctx.service lacks %q:\n%s", want, svc)
		}
	}
	for _, want := range []string{"ListenStream=%t/cortexfs/system.sock", "SocketMode=0600", "DirectoryMode=0700"} {
		if !strings.Contains(string(sock), want) {
			t.Errorf("ctx.socket lacks %q:\n%s", want, sock)
		}
	}
	if _, err := systemd.Render("ctx.service", "/has space/ctx", nil); err == nil {
		t.Error("a path with a space was accepted")
	}
	if _, err := systemd.Render("ctx.service", "relative/ctx", nil); err == nil {
		t.Error("a relative path was accepted")
	}
}

// TestHelpReadsLikeAManPage: every command has a one-line summary with an
// example. The commands of this issue must; the others are listed.
func TestHelpReadsLikeAManPage(t *testing.T) {
	k := parser(t)
	mine := map[string]bool{"doctor": true, "install-units": true, "completion": true}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, ch := range n.Children {
			if ch.Hidden || ch.Type != kong.CommandNode {
				continue
			}
			path := strings.TrimSpace(strings.TrimPrefix(ch.Path(), "ctx"))
			gap := ""
			switch {
			case ch.Help == "":
				gap = "no summary"
			case !strings.Contains(ch.Help, "Example:") && !strings.Contains(ch.Detail, "Example") && len(ch.Children) == 0:
				gap = "no example"
			}
			for _, p := range ch.Positional {
				if p.Help == "" {
					gap += " <" + p.Name + "> has no help;"
				}
			}
			if gap != "" {
				if mine[path] {
					t.Errorf("ctx %s: %s", path, gap)
				} else {
					t.Logf("gap (not in this issue's files): ctx %s: %s", path, gap)
				}
			}
			walk(ch)
		}
	}
	walk(k.Model.Node)
}
