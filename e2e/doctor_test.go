package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type doctorCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// doctor runs `ctx doctor --json` with the world's environment plus extra
// and returns the checks by name and the exit code.
func (w *world) doctor(extra ...string) (map[string]doctorCheck, int, string) {
	w.t.Helper()
	cmd := exec.Command(w.ctxBin, "doctor", "--json")
	cmd.Env = w.env(extra...)
	cmd.Dir = w.t.TempDir()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	var rep struct {
		OK     bool          `json:"ok"`
		Checks []doctorCheck `json:"checks"`
	}
	if err := json.Unmarshal(o.Bytes(), &rep); err != nil {
		w.t.Fatalf("doctor --json printed %q (stderr %q): %v", o.String(), e.String(), err)
	}
	if rep.OK != (code == 0) {
		w.t.Errorf("ok=%v but exit %d", rep.OK, code)
	}
	m := map[string]doctorCheck{}
	for _, c := range rep.Checks {
		m[c.Name] = c
	}
	return m, code, o.String()
}

// expectFail: check name failed and its fix names want.
func expectFail(t *testing.T, checks map[string]doctorCheck, code int, name, want string) {
	t.Helper()
	c, ok := checks[name]
	if code != 1 || !ok || c.Status != "fail" || !strings.Contains(c.Fix, want) {
		t.Errorf("want %s to fail with a fix naming %q (exit 1); exit %d, %+v", name, want, code, c)
	}
}

// TestDoctorGreen: on this machine, with a daemon running and a valid
// agent, doctor passes (warnings, such as TIOCSTI, are allowed) and names
// the daemon's version.
func TestDoctorGreen(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("clock", "#!/bin/sh\ndate\n")
	w.agent("demo", map[string]string{"tools": "clock\n"})
	checks, code, out := w.doctor()
	if code != 0 {
		t.Fatalf("doctor exit %d:\n%s", code, out)
	}
	for _, n := range []string{"bwrap", "namespaces", "seccomp", "ctx_root", "runtime_dir", "daemon", "launcher", "agent demo"} {
		if checks[n].Status != "ok" {
			t.Errorf("%s: %+v", n, checks[n])
		}
	}
	if !strings.Contains(checks["daemon"].Message, "ctx daemon 0.1.0 answers") {
		t.Errorf("daemon: %+v", checks["daemon"])
	}
	if _, ok := checks["tiocsti"]; !ok {
		t.Error("no tiocsti check")
	}
	// The cgroup mode in force and the default limits; this
	// machine has writable cgroup v1 pids and memory hierarchies.
	cg := checks["cgroup"]
	if !strings.Contains(cg.Message, "tasks 512, memory 4G, cpu-weight 100") {
		t.Errorf("cgroup: no default limits: %+v", cg)
	}
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err == nil && os.Getuid() == 0 {
		if cg.Status != "ok" || !strings.Contains(cg.Message, "cgroup v1 pids=/sys/fs/cgroup/pids/ctx-") || !strings.Contains(cg.Message, "freeze") {
			t.Errorf("cgroup: %+v", cg)
		}
	} else if cg.Status == "" {
		t.Errorf("no cgroup check")
	}
	// The human form: one line per check, exit 0.
	r := w.ctx("", "", "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "ok    namespaces") {
		t.Errorf("doctor: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDoctorNoBwrap: a configured bwrap that does not exist is red, and
// the fix names CTX_BWRAP and the package; PATH is never searched.
func TestDoctorNoBwrap(t *testing.T) {
	w := newWorld(t)
	w.start()
	checks, code, _ := w.doctor("CTX_BWRAP=/nonexistent/bwrap")
	expectFail(t, checks, code, "bwrap", "CTX_BWRAP")
	expectFail(t, checks, code, "bwrap", "apt-get install bubblewrap")
	if checks["namespaces"].Status != "fail" {
		t.Errorf("namespaces probed without bwrap: %+v", checks["namespaces"])
	}
}

// TestDoctorRuntimeDirWorldWritable: spec: A4 — a world-writable
// CTX_RUNTIME_DIR is red with the chmod that fixes it.
func TestDoctorRuntimeDirWorldWritable(t *testing.T) {
	w := newWorld(t)
	w.start()
	if err := os.Chmod(w.run, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(w.run, 0o700)
	checks, code, _ := w.doctor()
	expectFail(t, checks, code, "runtime_dir", "chmod 0700 "+w.run)
	if !strings.Contains(checks["runtime_dir"].Message, "world-writable") {
		t.Errorf("runtime_dir: %+v", checks["runtime_dir"])
	}
}

// TestDoctorWindowOverLimit: spec: W5 — a window file hand-edited above
// its model's limit (claude-sonnet-4-5: 200000) is red; the fix is the
// `ctx agent set` that restores the invariant.
func TestDoctorWindowOverLimit(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("big", map[string]string{"model": "anthropic/claude-sonnet-4-5\n"})
	if err := os.WriteFile(filepath.Join(w.root, "agent", "big.d", "window"), []byte("300000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checks, code, _ := w.doctor()
	expectFail(t, checks, code, "agent big", "ctx agent set big window auto")
	if m := checks["agent big"].Message; !strings.Contains(m, "300000") || !strings.Contains(m, "200000") {
		t.Errorf("agent big: %+v", checks["agent big"])
	}
}

// TestDoctorUserNamespacesRefused: when bwrap cannot create user
// namespaces doctor is red and names the sysctl/AppArmor fix.
//
// Approach: the machine's sysctls are never touched (other tests run in
// parallel). CTX_BWRAP points at a wrapper script that prints bwrap's real
// error text for the refused case and exits 1, as bwrap does — once for
// Ubuntu's AppArmor restriction (uid map), once for Debian's
// unprivileged_userns_clone message.
func TestDoctorUserNamespacesRefused(t *testing.T) {
	w := newWorld(t)
	w.start()
	for _, text := range []string{
		"bwrap: setting up uid map: Permission denied",
		"bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'.",
	} {
		fake := filepath.Join(t.TempDir(), "bwrap")
		script := "#!/bin/sh\ncat >&2 <<'EOF'\n" + text + "\nEOF\nexit 1\n"
		if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		checks, code, _ := w.doctor("CTX_BWRAP=" + fake)
		if checks["bwrap"].Status != "ok" {
			t.Errorf("bwrap: %+v", checks["bwrap"])
		}
		expectFail(t, checks, code, "namespaces", "sysctl -w ")
		c := checks["namespaces"]
		if !strings.Contains(c.Message, "user namespaces are refused") || !strings.Contains(c.Message, text) {
			t.Errorf("namespaces message: %+v", c)
		}
		for _, knob := range []string{"apparmor_restrict_unprivileged_userns", "unprivileged_userns_clone", "max_user_namespaces"} {
			if _, err := os.Stat("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil {
				break // this kernel has the AppArmor knob: the fix is specific to it
			}
			if !strings.Contains(c.Fix, knob) {
				t.Errorf("fix does not name %s: %s", knob, c.Fix)
			}
		}
	}
}

// TestDoctorLimits: an agent's .d/limits in force are reported, and a bad
// one makes the agent check fail with the line named. limits
func TestDoctorLimits(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("small", map[string]string{"limits": "tasks 64\nmemory 256M\n"})
	w.agent("broken", map[string]string{"limits": "tasks unlimited\n"})
	checks, code, _ := w.doctor()
	if c := checks["agent small"]; c.Status != "ok" || !strings.Contains(c.Message, "limits tasks 64, memory 256M, cpu-weight 100") {
		t.Errorf("agent small: %+v", c)
	}
	if c := checks["agent broken"]; code != 1 || c.Status != "fail" || !strings.Contains(c.Message, ".d/limits: line 1: tasks") {
		t.Errorf("agent broken (exit %d): %+v", code, c)
	}
}
