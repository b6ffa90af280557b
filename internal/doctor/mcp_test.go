package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// TestCheckMCPFile: a copied .mcp.json fails naming `ctx mcp import`; a
// declared command or bind that is gone, or a missing env file, warns; a
// sound file is ok. (README "MCP servers as tsh tools", Importing: doctor)
func TestCheckMCPFile(t *testing.T) {
	dir := t.TempDir()
	l := layout.Layout{Root: filepath.Join(dir, "root"), UID: 1000}
	present := filepath.Join(dir, "srv")
	os.WriteFile(present, []byte("#!/bin/sh\n"), 0o755)
	gone := filepath.Join(dir, "gone")
	for _, c := range []struct {
		name, data, agent string
		status            Status
		want              []string
	}{
		{"claude copy", `{"mcpServers":{"a":{"command":"x"}}}`, "coder", Fail, []string{"ctx mcp import", "--agent coder", "unknown field"}},
		{"broken", `{"version":1,"servers":{"a":{}}}`, "", Fail, []string{"needs a command"}},
		{"ok", `{"version":1,"servers":{"a":{"command":"` + present + `"},"r":{"url":"https://e/x","net":true}}}`, "", OK, []string{"2 servers (a, r)"}},
		{"command gone", `{"version":1,"servers":{"a":{"command":"` + gone + `"}}}`, "", Warn, []string{gone + " is gone"}},
		{"bind gone", `{"version":1,"servers":{"a":{"command":"` + present + `","binds":["` + gone + `"]}}}`, "", Warn, []string{gone + " is gone"}},
		{"env file missing", `{"version":1,"servers":{"a":{"command":"` + present + `","env":["K"]}}}`, "", Warn, []string{mcpinstall.EnvFile(l, "a") + " is missing"}},
	} {
		p := filepath.Join(dir, c.name+".json")
		os.WriteFile(p, []byte(c.data), 0o600)
		got := CheckMCPFile(l, p, c.agent)
		if got.Status != c.status {
			t.Errorf("%s: %+v, want %s", c.name, got, c.status)
		}
		for _, w := range c.want {
			if !strings.Contains(got.Message+" "+got.Fix, w) {
				t.Errorf("%s: %+v does not say %q", c.name, got, w)
			}
		}
	}
}
