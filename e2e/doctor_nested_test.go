package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDoctorNestedSandbox: for a real ACP agent that can sandbox itself
// (Claude Code's ACP adapter, installed by scripts/acp-agents.sh) created as
// an acp-v1 agent, doctor reads its agent home's .claude/settings.json:
// sandbox.enabled true is a warning whose fix is the exact setting and says
// why turning it off is safe; false is ok. The probe, run once inside a real
// ctx sandbox, finds that no user namespace can be created there.
func TestDoctorNestedSandbox(t *testing.T) {
	bin := acpAgentBin(t, "claude-code-acp")
	w := newWorld(t)
	w.mustCtx("agent", "create", "cc", "--abi", "acp-v1", "--exec", bin, "--approval", "auto")
	w.mustCtx("agent", "create", "plain", "--exec", "/bin/true")
	home := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", "cc")
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(home, ".claude", "settings.json")
	if err := os.WriteFile(settings, []byte(`{"sandbox": {"enabled": true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	checks, code, out := w.doctor()
	c, ok := checks["nested sandbox cc"]
	if !ok || c.Status != "warn" || !strings.Contains(c.Message, "sandbox.enabled: true") ||
		!strings.Contains(c.Fix, `"sandbox": {"enabled": false}`) || !strings.Contains(c.Fix, "ctx's sandbox is the wall") {
		t.Fatalf("nested sandbox cc: %+v\n%s", c, out)
	}
	if _, ok := checks["nested sandbox plain"]; ok {
		t.Error("an sdk-envelope agent got a nested sandbox check")
	}
	probe := checks["nested sandbox"]
	if probe.Status != "ok" || !strings.Contains(probe.Message, "unshare -U refused") || !strings.Contains(probe.Message, "bwrap refused") {
		t.Errorf("probe: %+v", probe)
	}
	if n := strings.Count(out, `"name":"nested sandbox"`); n != 1 {
		t.Errorf("the probe is reported %d times", n)
	}
	_ = code // other checks (no daemon) decide the exit code
	if err := os.WriteFile(settings, []byte(`{"sandbox": {"enabled": false}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	checks, _, out = w.doctor()
	if c := checks["nested sandbox cc"]; c.Status != "ok" || !strings.Contains(c.Message, "inner sandbox off") {
		t.Fatalf("after turning it off: %+v\n%s", c, out)
	}
}
