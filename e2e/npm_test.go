package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// missing stops a test whose real outside software (an npm package, a
// binary) is absent: a skip that says how to install it, or — under
// CI=true, where .ci/run installed everything — a failure, so a broken
// install never passes as skipped tests.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", why)
	}
	t.Skip(why)
}

// acpAgentsDir is where scripts/acp-agents.sh installed acpx, opencode-ai
// and @zed-industries/claude-code-acp, or "".
func acpAgentsDir() string {
	dirs := []string{os.Getenv("CTX_AGENTS_NPM_DIR"), "/var/cache/ctx/agents"}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, ".cache", "ctx-agents"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "node_modules", "acpx", "package.json")); err == nil {
			return d
		}
	}
	return ""
}

// acpAgentBin is the installed npm bin NAME (acpx, opencode,
// claude-code-acp) from scripts/acp-agents.sh, or the test stops.
func acpAgentBin(t testing.TB, name string) string {
	t.Helper()
	d := acpAgentsDir()
	if d == "" {
		missing(t, "the ACP agents are not installed: run scripts/acp-agents.sh (npm install acpx, opencode-ai, @zed-industries/claude-code-acp into /var/cache/ctx/agents or ~/.cache/ctx-agents)")
	}
	p := filepath.Join(d, "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		missing(t, name+" is not installed in "+d+": run scripts/acp-agents.sh")
	}
	return p
}
