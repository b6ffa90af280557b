package tsh

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
)

// TestMCPListing: tsh lists, loads and pins SERVER.TOOL from the host's
// mcp-tools.json, applies the agent policy to it again, and refuses to
// call it itself (the host calls MCP servers).
func TestMCPListing(t *testing.T) {
	root, tools := t.TempDir(), t.TempDir()
	l := layout.Layout{Root: root, UID: 1}
	ctl := l.AgentControl("coder")
	os.MkdirAll(ctl, 0o755)
	os.WriteFile(filepath.Join(ctl, "policy"), []byte("allow tool *\ndeny tool srv.secret\n"), 0o644)
	sess := l.SessionDir("coder", layout.ScopePrivate, "s")
	err := mcpconf.WriteListing(filepath.Join(sess, mcpconf.ListingFileName), &mcpconf.Listing{Tools: []mcpconf.ListedTool{
		{Name: "srv.hello", Description: "Says hello\nat length", Schema: "{name: string}", Hints: "read-only"},
		{Name: "srv.secret", Description: "Must not show"},
	}, Errors: []mcpconf.ServerError{{Server: "broken", Error: "did not start"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"CTX_ROOT": root, "CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "1:coder:s", "CTX_PATH": tools}
	sh, out, errb, _ := shell(t, m)
	if code := sh.Run([]string{"list"}); code != 0 || out.String() != "srv.hello\tSays hello\n" || !strings.Contains(errb.String(), "MCP server broken unavailable") {
		t.Fatalf("list: %d %q %q", code, out, errb)
	}
	sh, out, _, _ = shell(t, m)
	if code := sh.Run([]string{"load", "srv.hello"}); code != 0 {
		t.Fatal("load", code)
	}
	sh.Run([]string{"context"})
	want := "- srv.hello: Says hello [mcp:srv]\n  at length\n  args: {name: string} (tsh call srv.hello key=value… or --json '{…}')\n  hints: read-only\n"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("context %q, want %q", out, want)
	}
	sh, _, errb, _ = shell(t, m)
	if code := sh.Run([]string{"load", "srv.secret"}); code != ExitNotAllowed || !strings.Contains(errb.String(), "deny tool srv.secret") {
		t.Fatalf("load of a denied tool: %d %q", code, errb)
	}
	sh, _, errb, fe := shell(t, m)
	if code := sh.Run([]string{"call", "srv.hello", "name=x"}); code != ExitNotAllowed || fe.path != "" || !strings.Contains(errb.String(), "is an MCP tool") {
		t.Fatalf("call: %d %q", code, errb)
	}
	sh, out, _, _ = shell(t, m)
	if code := sh.Run([]string{"which", "srv.hello"}); code != 0 || out.String() != "mcp:srv\n" {
		t.Fatalf("which: %d %q", code, out)
	}
}
