package sandbox

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/workspace"
	"golang.org/x/sys/unix"
)

func view(t *testing.T) View {
	t.Helper()
	dir := t.TempDir()
	l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: 1000}
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	def := &agentdef.Def{Name: "a", Kind: agentdef.KindExec, Object: l.AgentObject("a"), CTXPath: l.DefaultCTXPath(),
		Env: []agentdef.KV{{Key: "FOO", Value: "1"}, {Key: "HOME", Value: "/evil"}}}
	return View{Layout: l, Def: def, Session: "s", Run: "run-1", Workspace: ws}
}

// argsOf is s's bwrap argv, its environment passed by descriptor (as
// internal/proc does): the values are never on argv.
func argsOf(s bwrap.Spec) ([]string, error) {
	f, err := s.PassEnv()
	if err != nil {
		return nil, err
	}
	if f != nil {
		defer f.Close()
	}
	return s.Args()
}

// TestSpecView: the workspace is writable at /workspace with .git
// read-only over it; the session log is read-only; other sessions hidden. spec: B1 B2 X7
func TestSpecView(t *testing.T) {
	v := view(t)
	v.Tsh = true
	a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	ws := v.Workspace
	for _, want := range []string{
		"--bind " + ws + " /workspace --ro-bind " + ws + "/.git /workspace/.git",
		"--bind " + v.Layout.AgentHome("a") + " /home/agent",
		"--tmpfs /home/agent/session",
		"--ro-bind-try " + v.Layout.SessionDir("a", "private", "s") + "/events.jsonl /ctx/home/1000/agent/a/session/s/events.jsonl",
		"--chdir /workspace",
		"--unshare-net",
	} {
		if !strings.Contains(j, want) {
			t.Errorf("missing %q in\n%s", want, j)
		}
	}
}

// TestSpecViewWithoutTsh: an agent step or a checked tool the host runs
// directly sees no session directory and no .d/, yet other sessions stay
// hidden. spec: X7
func TestSpecViewWithoutTsh(t *testing.T) {
	v := view(t)
	a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	if !strings.Contains(j, "--tmpfs /home/agent/session") {
		t.Errorf("other sessions not hidden:\n%s", j)
	}
	if strings.Contains(j, "/session/s") || strings.Contains(j, "/ctx/agent/a.d") {
		t.Errorf("session or .d bound without tsh:\n%s", j)
	}
}

// TestEnvs: tools get exactly the B3 allowlist (+ CTX_RUN, CTX_CONTROL_SOCKET);
// agents get .d/env, then runtime-held variables that .d/env cannot override. spec: B3 X11
func TestEnvs(t *testing.T) {
	v := view(t)
	var keys []string
	for k := range v.ToolEnv() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"CTX_AGENT", "CTX_AGENT_SUBJECT", "CTX_CONTROL_SOCKET", "CTX_HOME", "CTX_PATH", "CTX_ROOT", "CTX_RUN", "HOME", "LANG", "LOGNAME", "SHELL", "TERM", "USER"}
	if !slices.Equal(keys, want) {
		t.Errorf("tool env %v", keys)
	}
	env := v.AgentEnv(3)
	if env["HOME"] != "/home/agent" || env["FOO"] != "1" || env["CTX_STEP"] != "3" || env["CTX_RUN"] != "run-1" {
		t.Errorf("agent env %v", env)
	}
	if _, ok := env["PATH"]; ok {
		t.Error("PATH leaked into the agent environment")
	}
}

// TestSpecNet: `net` and `net local` give the spec an egress policy (its
// own network namespace, served by the daemon) and the proxy environment;
// without them there is neither. spec: V3 (README "The network")
func TestSpecNet(t *testing.T) {
	v := view(t)
	s := v.Spec([]string{"/x"}, v.ToolEnv())
	if s.Egress != nil || s.Env["HTTPS_PROXY"] != "" {
		t.Errorf("no net, yet egress %v env %v", s.Egress, s.Env)
	}
	v.Def.Network = true
	v.Def.NetLocal = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:11434")}
	env := v.ToolEnv()
	s = v.Spec([]string{"/x"}, env)
	if s.Egress == nil || !s.Egress.Public || len(s.Egress.Local) != 1 {
		t.Fatalf("egress %+v", s.Egress)
	}
	if s.Env["HTTPS_PROXY"] != "http://127.0.0.1:3128" || s.Env["CTX_NET_LOCAL"] != "127.0.0.1:11434" || s.Env["CTX_AGENT"] != "a" {
		t.Errorf("env %v", s.Env)
	}
	if _, ok := env["HTTPS_PROXY"]; ok {
		t.Error("the caller's environment map was changed")
	}
	a, _ := argsOf(s)
	if !slices.Contains(a, "--unshare-net") {
		t.Errorf("a net sandbox shares the host's network: %v", a)
	}
}

// TestControlSocketFollowsPolicy: the control socket is in a view only
// where a call of agent.update would be allowed — the agent policy and the
// tool's own policy, the same verdict (DecideUpdate); an invalid policy
// leaves it out (fails closed). README "Self-iteration".
func TestControlSocketFollowsPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, agentPolicy, toolPolicy string
		mounted                       bool
	}{
		{"no policy", "", "", true},
		{"allowed", "allow tool *\n", "", true},
		{"denied by the agent policy", "allow tool *\ndeny tool agent.update\n", "", false},
		{"not named by the agent policy", "allow tool bash\n", "", false},
		{"denied by the tool policy", "", "deny label *\n", false},
		{"invalid agent policy", "permit everything\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view(t)
			l := v.Layout
			v.Def.Control = l.AgentControl("a")
			os.MkdirAll(v.Def.Control, 0o755)
			os.MkdirAll(filepath.Dir(l.ControlSocket()), 0o700)
			os.MkdirAll(filepath.Join(l.ToolDir(), UpdateTool+".d"), 0o755)
			os.WriteFile(filepath.Join(l.ToolDir(), UpdateTool), []byte("#!/bin/sh\n"), 0o755)
			if tc.agentPolicy != "" {
				os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte(tc.agentPolicy), 0o644)
			}
			if tc.toolPolicy != "" {
				os.WriteFile(filepath.Join(l.ToolDir(), UpdateTool+".d", "policy"), []byte(tc.toolPolicy), 0o644)
			}
			a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
			if err != nil {
				t.Fatal(err)
			}
			j := strings.Join(a, " ")
			if got := strings.Contains(j, filepath.Dir(l.ControlSocket())+" /run/cortexfs"); got != tc.mounted {
				t.Errorf("control socket mounted %v, want %v:\n%s", got, tc.mounted, j)
			}
			if DecideUpdate(l, v.Def).Allowed != tc.mounted {
				t.Errorf("DecideUpdate disagrees with the view")
			}
		})
	}
}

// TestOneEnvBuilder: the tool's, the terminal's and a bare MCP server's
// environments come from one builder and hold exactly what they held when
// each was built by hand: the identity names with the given TERM, SHELL
// only in a view. spec: B3
func TestOneEnvBuilder(t *testing.T) {
	v := view(t)
	tool, term := v.ToolEnv(), v.ShellEnv("xterm-256color")
	for k, want := range map[string]string{"USER": "agent", "LOGNAME": "agent", "LANG": "C.UTF-8", "SHELL": "/ctx/bin/tsh", "HOME": "/home/agent"} {
		if tool[k] != want || term[k] != want {
			t.Errorf("%s: tool %q terminal %q, want %q", k, tool[k], term[k], want)
		}
	}
	if tool["TERM"] != "dumb" || term["TERM"] != "xterm-256color" {
		t.Errorf("TERM: tool %q terminal %q", tool["TERM"], term["TERM"])
	}
	if _, ok := term["CTX_RUN"]; ok {
		t.Error("the terminal's environment names a run")
	}
	bare := IdentityEnv("dumb")
	if len(bare) != 4 || bare["TERM"] != "dumb" || bare["USER"] != "agent" {
		t.Errorf("bare %v", bare)
	}
}

// TestBuildAnchorsNested (spec: B1): every protected mount below a
// subdirectory of the workspace carries an anchor — the directory the
// walk listed it in and what is bound — so the starter can check the
// finished view; a name at the workspace's top (whose directory is the
// mount's own root) carries none. (A nested protected path gone from
// where the walk saw it fails the build with bwrap.ErrMoved: e2e
// TestSecurityProtectedRepoMoved meets it.)
func TestBuildAnchorsNested(t *testing.T) {
	v := view(t)
	v.Placeholders = workspace.NewRegistry()
	ws := v.Workspace
	for _, d := range []string{"sub/.git", "deep/er/.vscode", "bare.git/objects", "bare.git/refs"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	os.WriteFile(filepath.Join(ws, "bare.git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "bare.git", "config"), nil, 0o644)
	s, h, err := v.Build([]string{"/x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Ended()
	h.Started()
	id := idIn(t, ws)
	got := map[string]bwrap.Anchor{}
	for _, a := range s.Anchors {
		got[a.Dst] = a
	}
	for _, c := range []struct{ dst, dir, mounted string }{
		{"/workspace/sub/.git", "sub", "sub/.git"},
		{"/workspace/deep/er/.vscode", "deep/er", "deep/er/.vscode"},
		{"/workspace/bare.git/config", "bare.git", "bare.git/config"},
	} {
		a, ok := got[c.dst]
		if !ok {
			t.Errorf("no anchor for %s in %+v", c.dst, s.Anchors)
			continue
		}
		if a.Dir != id(c.dir) || a.Mounted != id(c.mounted) || a.Under != id(c.mounted) || a.Pin {
			t.Errorf("anchor %+v: want dir %v mounted and under %v", a, id(c.dir), id(c.mounted))
		}
	}
	// Every directory on the way is pinned (bound over itself,
	// writable), parents first, in its own parent.
	var pins []string
	for _, a := range s.Anchors {
		if a.Pin {
			rel := strings.TrimPrefix(a.Dst, "/workspace/")
			pins = append(pins, rel)
			if a.Mounted != id(rel) || a.Under != id(rel) || a.Dir != id(filepath.Dir(rel)) {
				t.Errorf("pin %+v: want dir %v, mounted and under %v", a, id(filepath.Dir(rel)), id(rel))
			}
		}
	}
	// Only on the way to repositories (deep/er/.vscode is no repository).
	if want := []string{"bare.git", "sub"}; !slices.Equal(pins, want) {
		t.Errorf("pins %v, want %v", pins, want)
	}
	// In bwrap's argv each pin is a writable bind of the directory over
	// itself, before the read-only binds below it.
	a, err := argsOf(s)
	if err != nil {
		t.Fatal(err)
	}
	at := func(op, dst string) int {
		for i := 0; i+2 < len(a); i++ {
			if a[i] == op && a[i+2] == dst {
				return i
			}
		}
		return -1
	}
	for _, c := range [][2]string{{"/workspace/sub", "/workspace/sub/.git"}, {"/workspace/bare.git", "/workspace/bare.git/config"}} {
		pin, below := at("--bind-fd", c[0]), at("--ro-bind-fd", c[1])
		if pin < 0 || below < 0 || pin > below {
			t.Errorf("pin of %s at %d, %s at %d, in %v", c[0], pin, c[1], below, a)
		}
	}
	// The absent hooks/ of the bare repository: its placeholder's absent
	// source is what is mounted, in the bare repository's directory.
	if a, ok := got["/workspace/bare.git/hooks"]; !ok || a.Dir != id("bare.git") || a.Under != id("bare.git/hooks") {
		t.Errorf("hooks placeholder anchor %+v (found %v)", a, ok)
	}
	for dst, a := range got {
		if strings.Count(strings.TrimPrefix(dst, "/workspace/"), "/") == 0 && !a.Pin {
			t.Errorf("a name at the top has an anchor: %s", dst)
		}
	}
	if len(got) != 6 {
		t.Errorf("%d anchors, want 6 (4 paths, 2 pins): %+v", len(got), s.Anchors)
	}
}

// TestHideAnchored (spec: B1): CTX_ROOT inside the workspace below a
// subdirectory is hidden by a tmpfs anchored in the directory Open found
// holding it, over it, so a sandbox whose tmpfs landed elsewhere (that
// directory moved meanwhile) never runs; the directory is pinned, so no
// sandbox can move it.
func TestHideAnchored(t *testing.T) {
	v := view(t)
	ws := v.Workspace
	v.Layout.Root = filepath.Join(ws, "data", "root")
	os.MkdirAll(v.Layout.Root, 0o755)
	s, h, err := v.Build([]string{"/x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Ended()
	h.Started()
	id := idIn(t, ws)
	want := bwrap.Anchor{Dst: "/workspace/data/root", Dir: id("data"), Under: id("data/root"), Tmpfs: true}
	pin := bwrap.Anchor{Dst: "/workspace/data", Dir: id("."), Mounted: id("data"), Under: id("data"), Pin: true}
	if !slices.Contains(s.Anchors, want) || !slices.Contains(s.Anchors, pin) || !slices.Contains(s.TmpfsAfter, want.Dst) {
		t.Errorf("anchors %+v, tmpfs %v: want %+v and %+v", s.Anchors, s.TmpfsAfter, want, pin)
	}
}

// idIn gives the identity of a path below dir.
func idIn(t *testing.T, dir string) func(rel string) safefs.Identity {
	return func(rel string) safefs.Identity {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, rel), &st); err != nil {
			t.Fatal(err)
		}
		return safefs.Identity{Dev: st.Dev, Ino: st.Ino}
	}
}
