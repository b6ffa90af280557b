package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/models"
)

// bwrap's real messages when user namespaces are refused.
const (
	uidMapDenied = "bwrap: setting up uid map: Permission denied"
	noPerms      = "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'."
)

func TestNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stderr   string
		code     int
		err      error
		sc       Sysctls
		status   Status
		msg, fix string // substrings
	}{
		{"works", "", 0, nil, Sysctls{}, OK, "can create", ""},
		{"works despite apparmor knob", "", 0, nil, Sysctls{AppArmorRestrict: "1"}, OK, "AppArmor profile", ""},
		{"ubuntu apparmor", uidMapDenied, 1, nil, Sysctls{AppArmorRestrict: "1", MaxUserNS: "63000"}, Fail, "apparmor_restrict_unprivileged_userns=1", "apparmor_parser -r /etc/apparmor.d/bwrap"},
		{"ubuntu apparmor sysctl fix", uidMapDenied, 1, nil, Sysctls{AppArmorRestrict: "1"}, Fail, "refused", "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
		{"debian clone", noPerms, 1, nil, Sysctls{UsernsClone: "0"}, Fail, "unprivileged_userns_clone=0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"max namespaces", noPerms, 1, nil, Sysctls{MaxUserNS: "0"}, Fail, "max_user_namespaces=0", "user.max_user_namespaces=15000"},
		{"refused, cause unknown", noPerms, 1, nil, Sysctls{MaxUserNS: "1000"}, Fail, "refused", "apparmor_restrict_unprivileged_userns=0"},
		{"eperm", "bwrap: Creating new namespace failed: Operation not permitted", 1, nil, Sysctls{}, Fail, "refused", "user.max_user_namespaces"},
		{"other failure", "bwrap: Can't mount proc on /newroot/proc: Device or resource busy", 1, nil, Sysctls{}, Fail, "exit 1", "check that bubblewrap works"},
		{"did not run", "", -1, errors.New("exec format error"), Sysctls{}, Fail, "did not run", "check that bubblewrap works"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Namespaces("/usr/bin/bwrap", tc.stderr, tc.code, tc.err, tc.sc)
			if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("got %+v", c)
			}
			if c.Status != OK && c.Fix == "" {
				t.Error("a failure without a fix")
			}
		})
	}
}

func TestCheckBwrap(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "bwrap")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, nil, 0o644)
	for _, tc := range []struct {
		configured string
		status     Status
		fix        string
	}{
		{exe, OK, ""},
		{"/nonexistent/bwrap", Fail, "point CTX_BWRAP at an existing bwrap"},
		{noexec, Fail, "CTX_BWRAP"},
		{"bwrap", Fail, "CTX_BWRAP"}, // relative: never looked up through PATH
	} {
		r := CheckBwrap(tc.configured, bwrap.Find)
		if r.Status != tc.status || !strings.Contains(r.Fix, tc.fix) || (tc.status == OK) != (r.Path != "") {
			t.Errorf("%s: %+v", tc.configured, r)
		}
	}
	r := CheckBwrap("", func(string) (string, error) { return "", errors.New("x: " + bwrap.ErrUnavailable.Error()) })
	if r.Status != Fail || !strings.Contains(r.Fix, "apt-get install bubblewrap") {
		t.Errorf("default missing: %+v", r)
	}
}

func fakeStat(m map[string]Info) func(string) (Info, error) {
	return func(p string) (Info, error) {
		if in, ok := m[p]; ok {
			return in, nil
		}
		return Info{}, fs.ErrNotExist
	}
}

// spec: A4 — sockets live in a 0700 directory the user owns.
func TestCheckRuntimeDir(t *testing.T) {
	const d = "/run/user/1000/cortexfs"
	for _, tc := range []struct {
		name   string
		info   *Info
		status Status
		fix    string
	}{
		{"missing", nil, OK, ""},
		{"good", &Info{Mode: fs.ModeDir | 0o700, UID: 1000}, OK, ""},
		{"world-writable", &Info{Mode: fs.ModeDir | 0o777, UID: 1000}, Fail, "chmod 0700 " + d},
		{"group-readable", &Info{Mode: fs.ModeDir | 0o750, UID: 1000}, Fail, "chmod 0700"},
		{"someone else's", &Info{Mode: fs.ModeDir | 0o700, UID: 0}, Fail, "directory you own"},
		{"symlink", &Info{Mode: fs.ModeSymlink | 0o777, UID: 1000}, Fail, "rm " + d},
		{"file", &Info{Mode: 0o600, UID: 1000}, Fail, "remove"},
	} {
		m := map[string]Info{}
		if tc.info != nil {
			m[d] = *tc.info
		}
		c := CheckRuntimeDir(d, 1000, fakeStat(m))
		if c.Status != tc.status || !strings.Contains(c.Fix, tc.fix) {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

func TestCheckRoot(t *testing.T) {
	l := layout.Layout{Root: "/r", Runtime: "/run", UID: 1000}
	good := func() map[string]Info {
		m := map[string]Info{}
		for _, d := range []string{l.Root, l.AgentDir(), l.ToolDir(), l.BinDir(), l.UserHome()} {
			m[d] = Info{Mode: fs.ModeDir | 0o755, UID: 1000}
		}
		return m
	}
	if c := CheckRoot(l, fakeStat(good())); c.Status != OK {
		t.Errorf("good: %+v", c)
	}
	if c := CheckRoot(l, fakeStat(nil)); c.Status != Fail || c.Fix != "ctx init" {
		t.Errorf("missing: %+v", c)
	}
	m := good()
	m[l.ToolDir()] = Info{Mode: fs.ModeDir | 0o777, UID: 1000}
	if c := CheckRoot(l, fakeStat(m)); c.Status != Fail || c.Fix != "chmod go-w /r/tool" {
		t.Errorf("writable tool dir: %+v", c)
	}
	m = good()
	m[l.Root] = Info{Mode: fs.ModeDir | 0o755, UID: 4242}
	if c := CheckRoot(l, fakeStat(m)); c.Status != Fail || !strings.Contains(c.Message, "uid 4242") {
		t.Errorf("foreign root: %+v", c)
	}
	m = good()
	delete(m, l.BinDir())
	if c := CheckRoot(l, fakeStat(m)); c.Status != Fail || c.Fix != "ctx init" {
		t.Errorf("no bin: %+v", c)
	}
}

func TestDaemon(t *testing.T) {
	down := errors.New("connect: no such file or directory")
	for _, tc := range []struct {
		name        string
		version     string
		err         error
		noAutostart bool
		status      Status
	}{
		{"up", "0.1.0", nil, false, OK},
		{"other version", "0.0.9", nil, false, Warn},
		{"down, autostart", "", down, false, Warn},
		{"down, no autostart", "", down, true, Fail},
	} {
		c := Daemon("/run/s.sock", tc.version, tc.err, "0.1.0", tc.noAutostart)
		if c.Status != tc.status || (c.Status != OK && c.Fix == "") {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

func TestLauncher(t *testing.T) {
	none := errors.New("Failed to connect to bus")
	for _, tc := range []struct {
		want   string
		err    error
		status Status
		msg    string
	}{
		{"", nil, OK, "transient user units"},
		{"", none, OK, "built-in launcher"},
		{"builtin", nil, OK, "built-in launcher"},
		{"systemd", nil, OK, "transient"},
		{"systemd", none, Fail, "will not start"},
		{"runit", nil, Fail, "refuse"},
	} {
		c := Launcher(tc.want, tc.err)
		if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%q %v: %+v", tc.want, tc.err, c)
		}
	}
}

func TestCheckTIOCSTI(t *testing.T) {
	for _, tc := range []struct {
		b      string
		err    error
		status Status
	}{
		{"0\n", nil, OK},
		{"1\n", nil, Warn},
		{"", fs.ErrNotExist, Warn},
	} {
		c := CheckTIOCSTI([]byte(tc.b), tc.err)
		if c.Status != tc.status || !strings.Contains(c.Message, "legacy_tiocsti") && tc.err == nil {
			t.Errorf("%q: %+v", tc.b, c)
		}
		if tc.status == Warn && !strings.Contains(c.Message, "--new-session") {
			t.Errorf("%q: the warning must say what protects agents: %+v", tc.b, c)
		}
	}
}

// spec: D9 — credentials are named by their source, never printed.
func TestCredentials(t *testing.T) {
	const secrets = "/r/home/1000/secrets/anthropic"
	for _, tc := range []struct {
		name    string
		envSet  bool
		haveKey bool
		keyErr  error
		base    string
		usedBy  []string
		status  Status
		msg     string
	}{
		{"env", true, true, nil, "https://api.anthropic.com", []string{"a"}, OK, "key from ANTHROPIC_API_KEY (used by a)"},
		{"file", false, true, nil, "https://api.anthropic.com", nil, OK, "key from secrets file " + secrets},
		{"none, unused", false, false, nil, "https://api.anthropic.com", nil, OK, "anthropic: none"},
		{"none, used", false, false, nil, "https://api.anthropic.com", []string{"a"}, Fail, "none (used by a)"},
		{"none, local proxy", false, false, nil, "http://127.0.0.1:8080", []string{"a"}, OK, "none"},
		{"refused file", false, false, errors.New("mode 0644"), "https://api.anthropic.com", nil, Fail, "key refused"},
	} {
		c := Credentials("anthropic", tc.base, "ANTHROPIC_API_KEY", tc.envSet, tc.haveKey, tc.keyErr, secrets, tc.usedBy)
		if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

// agentWorld is a CTX_ROOT with one agent's control files.
func agentWorld(t *testing.T, name string, controls map[string]string) layout.Layout {
	t.Helper()
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: os.Getuid()}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(l.AgentControl(name), 0o755)
	obj := "a model agent\n"
	if _, ok := controls["abi"]; ok {
		obj = "#!/bin/sh\n"
	}
	os.WriteFile(l.AgentObject(name), []byte(obj), 0o755)
	for k, v := range controls {
		os.WriteFile(filepath.Join(l.AgentControl(name), k), []byte(v), 0o644)
	}
	return l
}

func TestCheckAgent(t *testing.T) {
	exec := map[string]string{"abi": "sdk-envelope-v1\n", "window": "auto\n"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	model := map[string]string{"model": "anthropic/claude-sonnet-4-5\n", "window": "auto\n"}
	for _, tc := range []struct {
		name     string
		controls map[string]string
		tool     string // install tool/clock with this mode (0: none)
		mode     os.FileMode
		status   Status
		msg, fix string
	}{
		{"exec auto", exec, "", 0, OK, "executable agent", ""},
		{"bad abi", with(exec, "abi", "v2\n"), "", 0, Fail, ".d/abi", "ctx agent show"},
		{"bad window syntax", with(exec, "window", "012\n"), "", 0, Fail, "window", "window auto"},
		{"explicit window, no model", with(exec, "window", "1000\n"), "", 0, Fail, "no known limit", "window auto"},
		{"model auto", model, "", 0, OK, "model agent", ""},
		{"window within limit", with(model, "window", "100000\n"), "", 0, OK, "window 100000", ""},
		// spec: W5 — a hand-edited window above the preferred model's limit.
		{"window over limit", with(model, "window", "300000\n"), "", 0, Fail, "300000", "window 200000"},
		{"fallback unusable", with(model, "window", "150000\n", "model", "anthropic/claude-sonnet-4-5\nopenai/gpt-4o\n"), "", 0, Warn, "fallback unusable", ""},
		{"bad policy", with(exec, "policy", "allow label x\n"), "", 0, Fail, "policy", "POLICY.md"},
		{"good policy", with(exec, "policy", "allow tool clock\n"), "", 0, OK, "policy ok", ""},
		{"tool missing", with(exec, "tools", "clock\n"), "", 0, Fail, `"clock"`, "install clock"},
		{"tool not executable", with(exec, "tools", "clock\n"), "clock", 0o644, Fail, `"clock"`, "chmod 0755"},
		{"tool ok", with(exec, "tools", "clock\n"), "clock", 0o755, OK, "tools clock", ""},
		// spec: X6 — sdk-envelope-v1 keeps 8 calls; model agents take calls.
		{"calls ignored for sdk-envelope", with(exec, "limits", "calls 20\n"), "", 0, Warn, "calls 20 is ignored", "remove the calls line"},
		{"calls for a model agent", with(model, "limits", "calls 20\n"), "", 0, OK, "calls 20", ""},
		{"calls out of range", with(model, "limits", "calls 0\n"), "", 0, Fail, "calls", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := agentWorld(t, "a", tc.controls)
			if tc.tool != "" {
				os.WriteFile(filepath.Join(l.ToolDir(), tc.tool), []byte("#!/bin/sh\ndate\n"), tc.mode)
				os.Chmod(filepath.Join(l.ToolDir(), tc.tool), tc.mode)
			}
			c := CheckAgent(l, "a", models.Builtin(), true)
			if c.Status != tc.status || !strings.Contains(c.Message, tc.msg) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("got %+v", c)
			}
		})
	}
}

// TestRun wires every check through a fake Env and checks the report's
// shape and exit verdict.
func TestRun(t *testing.T) {
	l := agentWorld(t, "a", map[string]string{"abi": "sdk-envelope-v1\n", "window": "auto\n"})
	os.Chmod(l.Runtime, 0o700)
	env := &Env{
		Layout:    l,
		Getenv:    func(string) string { return "" },
		ReadFile:  func(p string) ([]byte, error) { return []byte("0\n"), nil },
		Stat:      lstat,
		FindBwrap: func(string) (string, error) { return "/usr/bin/bwrap", nil },
		Probe: func(context.Context, string, []string) (string, int, error) {
			return "", 0, nil
		},
		Ping:         func(context.Context) (string, error) { return "0.1.0", nil },
		SystemdPing:  func(context.Context) error { return errors.New("no bus") },
		ProbeSeccomp: func(context.Context, string) error { return nil },
		Version:      "0.1.0",
	}
	r := Run(context.Background(), env)
	if r.Failed() {
		var b bytes.Buffer
		r.WriteText(&b)
		t.Fatalf("green machine failed:\n%s", b.String())
	}
	names := map[string]bool{}
	for _, c := range r.Checks {
		names[c.Name] = true
	}
	for _, n := range []string{"bwrap", "namespaces", "seccomp", "ctx_root", "runtime_dir", "daemon", "launcher", "tiocsti", "agent a", "provider anthropic", "provider openai"} {
		if !names[n] {
			t.Errorf("no %q check in %v", n, names)
		}
	}
	// Refused namespaces turn the report red, with the fix.
	env.Probe = func(context.Context, string, []string) (string, int, error) { return uidMapDenied + "\n", 1, nil }
	env.ReadFile = func(p string) ([]byte, error) {
		if p == AppArmorSysctl {
			return []byte("1\n"), nil
		}
		return nil, fs.ErrNotExist
	}
	r = Run(context.Background(), env)
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		OK     bool    `json:"ok"`
		Checks []Check `json:"checks"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil || got.OK {
		t.Fatalf("json %s: %v", js.String(), err)
	}
	if got.Checks[1].Name != "namespaces" || got.Checks[1].Status != Fail || !strings.Contains(got.Checks[1].Fix, "apparmor") {
		t.Errorf("namespaces: %+v", got.Checks[1])
	}
	var txt bytes.Buffer
	r.WriteText(&txt)
	if !strings.Contains(txt.String(), "FAIL  namespaces") || !strings.Contains(txt.String(), "fix: ") {
		t.Errorf("text:\n%s", txt.String())
	}
}

func TestCappedProbeOutput(t *testing.T) {
	var c capped
	c.Write(bytes.Repeat([]byte("x"), 10<<10))
	if len(c.String()) != 8<<10 {
		t.Errorf("kept %d bytes", len(c.String()))
	}
}

// TestCheckSeccomp: the filter's verdicts. seccomp
func TestCheckSeccomp(t *testing.T) {
	for _, c := range []struct {
		name          string
		build, probe  error
		status        Status
		inMsg, fixHas string
	}{
		{"in force", nil, nil, OK, "52 instructions", ""},
		{"no filter", errors.New("no filter for mips"), nil, Fail, "fails closed", "x86_64"},
		{"bwrap refuses", nil, errors.New("unshare -U succeeded"), Fail, "unshare -U succeeded", "--seccomp"},
	} {
		got := CheckSeccomp("x86_64", 52, c.build, c.probe)
		if got.Status != c.status || !strings.Contains(got.Message, c.inMsg) || !strings.Contains(got.Fix, c.fixHas) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

// TestCheckCgroup: a cgroup mode is ok and names where runs go and the
// default limits; rlimits only is a warning that says why it is weak and
// why no cgroup was usable. limits per run
func TestCheckCgroup(t *testing.T) {
	c := CheckCgroup(cgroup.ModeV1, "cgroup v1 pids=/sys/fs/cgroup/pids/ctx-0-abc", "no cgroup v2 hierarchy")
	if c.Status != OK || !strings.Contains(c.Message, "cgroup v1 pids=") || !strings.Contains(c.Message, "tasks 512, memory 4G, cpu-weight 100") {
		t.Errorf("v1: %+v", c)
	}
	c = CheckCgroup(cgroup.ModeRlimit, cgroup.RlimitWeakness, "cgroup v1: no cgroup v1 pids hierarchy mounted")
	if c.Status != Warn || !strings.Contains(c.Message, "RLIMIT_NPROC counts every process of the uid") ||
		!strings.Contains(c.Message, "no cgroup v1 pids hierarchy") || !strings.Contains(c.Fix, "Delegate=yes") {
		t.Errorf("rlimit: %+v", c)
	}
}
