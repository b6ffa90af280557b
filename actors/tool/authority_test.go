package tool

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCheckLayers: every authority layer refuses alone, named in the
// result, and a call that passes them all is prepared to run the checked
// file at its sandbox path. spec: V3, K1, K2
func TestCheckLayers(t *testing.T) {
	dir := t.TempDir()
	l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: os.Getuid()}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "agent.sh")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	if err := agentdef.Create(l, "a", agentdef.CreateOptions{Exec: exe}); err != nil {
		t.Fatal(err)
	}
	ctl := l.AgentControl("a")
	os.WriteFile(filepath.Join(ctl, "tools"), []byte("ok\nnoexec\nlink\nforbidden\nmissing\n"), 0o644)
	os.WriteFile(filepath.Join(ctl, "policy"), []byte("allow tool *\ndeny tool forbidden\n"), 0o644)
	tools := l.ToolDir()
	os.MkdirAll(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "ok"), []byte("#!/bin/sh\necho ok\n"), 0o755)
	os.WriteFile(filepath.Join(tools, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(tools, "forbidden"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink(filepath.Join(tools, "ok"), filepath.Join(tools, "link"))
	os.MkdirAll(l.BinDir(), 0o755)
	os.WriteFile(filepath.Join(l.BinDir(), "tsh"), []byte("#!/bin/sh\n"), 0o755)
	def, err := agentdef.Load(l, "a")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Layout: l}
	call := func(name string, args ...string) Call {
		return Call{View: sandbox.View{Layout: l, Def: def, Session: "s"}, CallID: "c1", Name: name, Args: args}
	}
	for _, c := range []struct {
		name  string
		call  Call
		layer string
	}{
		{"undeclared", call("bash"), LayerDirectNative},
		{"bad name", call("../ok"), "name"},
		{"not on CTX_PATH", call("missing"), "path"},
		{"symlink", call("link"), "nofollow"},
		{"not executable", call("noexec"), "mode"},
		{"agent policy", call("forbidden"), "agent-policy"},
		{"tsh call of a denied tool", call("tsh", "call", "forbidden"), "agent-policy"},
	} {
		prep, res := check(context.Background(), cfg, c.call)
		if prep != nil || res == nil || res.Layer != c.layer || res.Status != "denied" {
			t.Errorf("%s: prep %v result %+v, want denied by %s", c.name, prep, res, c.layer)
		}
	}
	prep, res := check(context.Background(), cfg, call("ok", "x"))
	if res != nil || prep == nil || prep.tool == nil {
		t.Fatalf("allowed call: %+v", res)
	}
	defer prep.tool.Close()
	if want := layout.SandboxRoot + "/tool/ok"; len(prep.argv) != 2 || prep.argv[0] != want || prep.argv[1] != "x" {
		t.Errorf("argv %v", prep.argv)
	}
}
