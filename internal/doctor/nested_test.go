package doctor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
)

// homeFiles is an agent home of fixtures: relative path → content.
func homeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(rel string) ([]byte, error) {
		if v, ok := files[rel]; ok {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestNestingAgent(t *testing.T) {
	for _, tc := range []struct {
		launch agentdef.ACPLaunch
		want   string
	}{
		{agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/usr/lib/node_modules/@zed-industries/codex-acp/bin/codex-acp.js"}}, NestCodex},
		{agentdef.ACPLaunch{Command: "/usr/local/bin/codex-acp"}, NestCodex},
		{agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/usr/lib/node_modules/@google/gemini-cli/dist/index.js", "--experimental-acp"}}, NestGemini},
		{agentdef.ACPLaunch{Args: []string{"--experimental-acp"}, Binds: []string{"/opt/gemini"}}, NestGemini},
		{agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/var/cache/ctx/agents/node_modules/@zed-industries/claude-code-acp/dist/index.js"}}, NestClaude},
		{agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/var/cache/ctx/agents/node_modules/opencode-ai/bin/opencode", "acp"}}, ""},
		{agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/srv/my-codexish-agent/index.js"}}, ""},
	} {
		if got := NestingAgent(&tc.launch); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.launch, got, tc.want)
		}
	}
	if NestingAgent(nil) != "" {
		t.Error("nil launch recognised")
	}
}

func TestNestedSandbox(t *testing.T) {
	codex := agentdef.ACPLaunch{Command: "/usr/local/bin/codex-acp"}
	gemini := agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/usr/lib/node_modules/@google/gemini-cli/dist/index.js", "--experimental-acp"}}
	claude := agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/x/node_modules/@zed-industries/claude-code-acp/dist/index.js"}}
	with := func(l agentdef.ACPLaunch, args ...string) agentdef.ACPLaunch {
		l.Args = append(append([]string(nil), l.Args...), args...)
		return l
	}
	for _, tc := range []struct {
		name     string
		launch   agentdef.ACPLaunch
		files    map[string]string
		env      []agentdef.KV
		status   Status
		msg, fix string
	}{
		{"codex default sandboxes", codex, nil, nil, Warn, "no sandbox_mode", `sandbox_mode = "danger-full-access"`},
		{"codex workspace-write", codex, map[string]string{".codex/config.toml": "model = \"o3\"\nsandbox_mode = \"workspace-write\"\n"}, nil, Warn, `sandbox_mode = "workspace-write"`, "danger-full-access"},
		{"codex off in config", codex, map[string]string{".codex/config.toml": "# mine\nsandbox_mode = \"danger-full-access\" # ctx walls it\n[sandbox_workspace_write]\nnetwork_access = true\n"}, nil, OK, "inner sandbox off", ""},
		{"codex key inside a table does not count", codex, map[string]string{".codex/config.toml": "[profiles.x]\nsandbox_mode = \"danger-full-access\"\n"}, nil, Warn, "no sandbox_mode", ""},
		{"codex off by argument", with(codex, "-c", `sandbox_mode="danger-full-access"`), nil, nil, OK, "argument sandbox_mode=danger-full-access", ""},
		{"codex on by argument", with(codex, "--sandbox", "read-only"), nil, nil, Warn, "argument sandbox_mode=read-only", "args"},
		{"gemini default off", gemini, nil, nil, OK, "inner sandbox off", ""},
		{"gemini --sandbox", with(gemini, "--sandbox"), nil, nil, Warn, "argument --sandbox", "drop --sandbox"},
		{"gemini settings sandbox true", gemini, map[string]string{".gemini/settings.json": `{"sandbox": true}`}, nil, Warn, "sandbox: true", `"sandbox": false`},
		{"gemini settings tools.sandbox docker", gemini, map[string]string{".gemini/settings.json": `{"tools": {"sandbox": "docker"}}`}, nil, Warn, `tools.sandbox: "docker"`, `"tools.sandbox": false`},
		{"gemini settings false", gemini, map[string]string{".gemini/settings.json": `{"tools": {"sandbox": false}}`}, nil, OK, "inner sandbox off", ""},
		{"gemini GEMINI_SANDBOX in .d/env", gemini, nil, []agentdef.KV{{Key: "GEMINI_SANDBOX", Value: "docker"}}, Warn, "GEMINI_SANDBOX=docker", "remove GEMINI_SANDBOX"},
		{"gemini GEMINI_SANDBOX false", gemini, nil, []agentdef.KV{{Key: "GEMINI_SANDBOX", Value: "false"}}, OK, "inner sandbox off", ""},
		{"gemini settings not json", gemini, map[string]string{".gemini/settings.json": `{`}, nil, Warn, "not JSON", ""},
		{"claude default off", claude, nil, nil, OK, "inner sandbox off", ""},
		{"claude sandbox enabled", claude, map[string]string{".claude/settings.json": `{"sandbox": {"enabled": true, "autoAllowBashIfSandboxed": true}}`}, nil, Warn, "sandbox.enabled: true", `"sandbox": {"enabled": false}`},
		{"claude sandbox disabled", claude, map[string]string{".claude/settings.json": `{"sandbox": {"enabled": false}}`}, nil, OK, "inner sandbox off", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := NestedSandbox("a", &tc.launch, tc.env, homeFiles(tc.files))
			if !ok || c.Name != "nested sandbox a" || c.Status != tc.status || !strings.Contains(c.Message, tc.msg) || !strings.Contains(c.Fix, tc.fix) {
				t.Fatalf("got %v %+v", ok, c)
			}
			if c.Status == Warn && !strings.Contains(c.Fix, "ctx's sandbox is the wall") {
				t.Errorf("the fix does not say why it is safe: %s", c.Fix)
			}
		})
	}
	if _, ok := NestedSandbox("o", &agentdef.ACPLaunch{Command: "/usr/bin/node", Args: []string{"/x/opencode-ai/bin/opencode", "acp"}}, nil, homeFiles(nil)); ok {
		t.Error("opencode is not a nesting agent")
	}
}

func TestCheckNestedUserns(t *testing.T) {
	if c := CheckNestedUserns(NestedProbe{Unshare: "refused", Bwrap: "refused"}, nil); c.Status != OK || !strings.Contains(c.Message, "no user namespace can be created") {
		t.Errorf("refused: %+v", c)
	}
	if c := CheckNestedUserns(NestedProbe{Unshare: "allowed", Bwrap: "refused"}, nil); c.Status != Warn || !strings.Contains(c.Message, "could be created") {
		t.Errorf("allowed: %+v", c)
	}
	if c := CheckNestedUserns(NestedProbe{}, errors.New("boom")); c.Status != Warn || !strings.Contains(c.Message, "not probed: boom") {
		t.Errorf("error: %+v", c)
	}
}

// TestRunNested: Run adds one check per nesting acp-v1 agent, reading its
// settings from its agent home, and the probe once; none without acp-v1 agents.
func TestRunNested(t *testing.T) {
	l := agentWorld(t, "cx", map[string]string{"abi": "acp-v1\n", "window": "auto\n",
		"acp.json": `{"command":"/usr/local/bin/codex-acp"}`})
	os.MkdirAll(l.AgentControl("gm"), 0o755)
	os.WriteFile(l.AgentObject("gm"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(l.AgentControl("gm"), "abi"), []byte("acp-v1\n"), 0o644)
	os.WriteFile(filepath.Join(l.AgentControl("gm"), "acp.json"), []byte(`{"args":["--experimental-acp"],"binds":["/opt/gemini-cli"]}`), 0o644)
	home := l.AgentHome("cx")
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("sandbox_mode = \"danger-full-access\"\n"), 0o600)
	probes := 0
	env := &Env{Layout: l, ReadFile: os.ReadFile,
		ProbeNested: func(context.Context, string) (NestedProbe, error) {
			probes++
			return NestedProbe{Unshare: "refused", Bwrap: "absent"}, nil
		}}
	got := map[string]Check{}
	for _, c := range env.nestedChecks(context.Background(), BwrapResult{Path: "/usr/bin/bwrap"}) {
		got[c.Name] = c
	}
	if c := got["nested sandbox cx"]; c.Status != OK || !strings.Contains(c.Message, "inner sandbox off") {
		t.Errorf("cx: %+v", c)
	}
	if c := got["nested sandbox gm"]; c.Status != OK || !strings.Contains(c.Message, "gemini") {
		t.Errorf("gm: %+v", c)
	}
	if c := got["nested sandbox"]; c.Status != OK || probes != 1 || len(got) != 3 {
		t.Errorf("probe ran %d times; checks %+v", probes, got)
	}
	// No acp-v1 agent: no check, no probe.
	l2 := agentWorld(t, "e", map[string]string{"abi": "sdk-envelope-v1\n", "window": "auto\n"})
	env.Layout, probes = l2, 0
	if cs := env.nestedChecks(context.Background(), BwrapResult{Path: "/usr/bin/bwrap"}); len(cs) != 0 || probes != 0 {
		t.Errorf("without acp-v1 agents: %+v, %d probes", cs, probes)
	}
}

// The agent writes its home: a settings file planted as a FIFO must not
// block doctor, and one planted as a symlink (last component or a
// directory on the way) must not make doctor read a host file — both are
// refused and reported unreadable; an oversized one is refused too.
func TestReadAgentFileRefusesPlanted(t *testing.T) {
	home := t.TempDir()
	secret := filepath.Join(t.TempDir(), "host.json")
	os.WriteFile(secret, []byte(`{"sandbox":{"enabled":true}}`), 0o600)
	os.MkdirAll(filepath.Join(home, "fifo"), 0o700)
	if err := syscall.Mkfifo(filepath.Join(home, "fifo", "settings.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(home, "link"), 0o700)
	os.Symlink(secret, filepath.Join(home, "link", "settings.json"))
	os.Symlink(filepath.Dir(secret), filepath.Join(home, "dirlink"))
	os.WriteFile(filepath.Join(home, "big.json"), make([]byte, maxAgentFile+1), 0o600)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, rel := range []string{"fifo/settings.json", "link/settings.json", "dirlink/host.json", "big.json"} {
			if b, err := readAgentFile(filepath.Join(home, rel)); err == nil {
				t.Errorf("%s: read %d bytes, want a refusal", rel, len(b))
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a planted FIFO blocked doctor")
	}
	os.WriteFile(filepath.Join(home, "ok.json"), []byte("{}"), 0o600)
	if b, err := readAgentFile(filepath.Join(home, "ok.json")); err != nil || string(b) != "{}" {
		t.Errorf("a regular file: %q %v", b, err)
	}
}
