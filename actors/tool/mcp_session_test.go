package tool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// TestDeclsSessionLevel: a private session sees the servers its editor
// declared (replacing a user server of the same name, with its env file
// beside the declaration); another session and the shared scope do not.
func TestDeclsSessionLevel(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), UID: os.Getuid()}
	def := &agentdef.Def{Name: "a", Control: l.AgentControl("a")}
	user := &mcpconf.File{Version: 1, Servers: map[string]*mcpconf.Server{
		"x": {Command: "/usr/bin/user-x"}, "y": {Command: "/usr/bin/user-y"}}}
	if err := mcpconf.Save(filepath.Join(l.UserHome(), mcpconf.FileName), user); err != nil {
		t.Fatal(err)
	}
	own := &mcpconf.File{Version: 1, Servers: map[string]*mcpconf.Server{
		"x": {Command: "/usr/bin/editor-x", Env: []string{"K"}}, "z": {Command: "/usr/bin/editor-z"}}}
	if err := mcpconf.Save(mcpinstall.SessionFile(l, "a", "acp-1"), own); err != nil {
		t.Fatal(err)
	}
	d, err := Decls(l, def, layout.ScopePrivate, "acp-1")
	if err != nil {
		t.Fatal(err)
	}
	if d["x"] == nil || d["x"].Command != "/usr/bin/editor-x" || d["x"].EnvPath != mcpinstall.SessionEnvFile(l, "a", "acp-1", "x") {
		t.Errorf("x: %+v", d["x"])
	}
	if d["y"] == nil || d["y"].EnvPath != "" || d["z"] == nil {
		t.Errorf("y %+v z %+v", d["y"], d["z"])
	}
	for _, c := range []struct{ scope, session string }{{layout.ScopePrivate, "acp-2"}, {layout.ScopeShared, "acp-1"}, {layout.ScopePrivate, "../acp-1"}} {
		d, err := Decls(l, def, c.scope, c.session)
		if err != nil {
			t.Fatal(err)
		}
		if d["z"] != nil || d["x"].Command != "/usr/bin/user-x" {
			t.Errorf("%s/%s sees the editor's servers: %+v", c.scope, c.session, d)
		}
	}
	// An invalid session declaration fails closed, like the others.
	if err := os.WriteFile(mcpinstall.SessionFile(l, "a", "acp-1"), []byte(`{"version":1,"servers":{"bad name":{}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Decls(l, def, layout.ScopePrivate, "acp-1"); err == nil {
		t.Error("an invalid session declaration was accepted")
	}
}
