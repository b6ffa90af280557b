package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// TestCommitImportRestoresSecrets: when the declaration file cannot be
// replaced, the secrets files already written are put back as they were
// (an old one restored, a new one removed): nothing is half-written.
func TestCommitImportRestoresSecrets(t *testing.T) {
	dir := t.TempDir()
	env := &Env{Ctx: context.Background(), Layout: layout.Layout{Root: filepath.Join(dir, "root"), UID: os.Getuid()}, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	old := mcpinstall.EnvFile(env.Layout, "mem")
	os.MkdirAll(filepath.Dir(old), 0o700)
	os.WriteFile(old, []byte("K=old\n"), 0o600)
	plan := []*imported{
		{name: "mem", server: &mcpconf.Server{Command: "/bin/true", Env: []string{"K"}}, env: map[string]string{"K": "new"}},
		{name: "fresh", server: &mcpconf.Server{Command: "/bin/true", Env: []string{"T"}}, env: map[string]string{"T": "v"}},
	}
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o600)
	f := &mcpconf.File{Version: mcpconf.Version, Servers: map[string]*mcpconf.Server{}}
	if _, err := commitImport(env, filepath.Join(blocker, "mcp.json"), f, plan); err == nil {
		t.Fatal("the declaration file under a regular file was written")
	}
	if b, _ := os.ReadFile(old); string(b) != "K=old\n" {
		t.Errorf("old env file: %q", b)
	}
	if _, err := os.Stat(mcpinstall.EnvFile(env.Layout, "fresh")); !os.IsNotExist(err) {
		t.Errorf("a new env file stayed: %v", err)
	}
	path := filepath.Join(dir, "mcp.json")
	f = &mcpconf.File{Version: mcpconf.Version, Servers: map[string]*mcpconf.Server{}}
	if n, err := commitImport(env, path, f, plan); err != nil || n != 2 {
		t.Fatalf("commit: %d %v", n, err)
	}
	if b, _ := os.ReadFile(old); string(b) != "K=new\n" {
		t.Errorf("env file after the commit: %q", b)
	}
	if got, err := mcpconf.Load(path); err != nil || len(got.Servers) != 2 {
		t.Errorf("declarations: %+v %v", got, err)
	}
}
