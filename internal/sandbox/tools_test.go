package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolView: an agent step's view mounts no tool file; a tool's view
// shows, over a read-only tmpfs, exactly the tools the agent and tool
// policies allow (with their .d/), never a denied one, never a symlink,
// nothing from a directory that is not on CTX_PATH.
func TestToolView(t *testing.T) {
	v := view(t)
	l := v.Layout
	v.Def.Control = l.AgentControl("a")
	os.MkdirAll(v.Def.Control, 0o755)
	sys, user := l.ToolDir(), l.UserToolDir()
	for _, d := range []string{sys, user} {
		os.MkdirAll(d, 0o755)
	}
	tool := func(dir, name string, withD bool) {
		os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755)
		if withD {
			os.MkdirAll(filepath.Join(dir, name+".d"), 0o755)
		}
	}
	tool(sys, "ok", true)
	tool(sys, "denied", true)
	tool(sys, "labelled", true)
	tool(user, "mine", false)
	os.Symlink(filepath.Join(sys, "ok"), filepath.Join(sys, "link"))
	os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte("allow tool ok\nallow tool labelled\nallow tool mine\nallow tool link\n"), 0o644)
	// The tool's own policy refuses this agent (no label).
	os.WriteFile(filepath.Join(sys, "labelled.d", "policy"), []byte("allow label trusted\n"), 0o644)

	args := func(v View) string {
		a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(a, " ")
	}
	step := args(v) // the zero ToolView: an agent step
	if strings.Contains(step, "--tmpfs /ctx/") || strings.Contains(step, "/ctx/tool/") || strings.Contains(step, sys) || strings.Contains(step, user) {
		t.Errorf("an agent step's view mounts tool files:\n%s", step)
	}

	v.Tools = AllowedTools
	j := args(v)
	for _, want := range []string{
		"--tmpfs /ctx/tool", "--tmpfs /ctx/home/1000/tool",
		"--ro-bind " + sys + "/ok /ctx/tool/ok", "--ro-bind " + sys + "/ok.d /ctx/tool/ok.d",
		"--ro-bind " + user + "/mine /ctx/home/1000/tool/mine",
		"--remount-ro /ctx/tool --remount-ro /ctx/home/1000/tool",
	} {
		if !strings.Contains(j, want) {
			t.Errorf("missing %q in\n%s", want, j)
		}
	}
	for _, bad := range []string{"denied", "labelled", "/link", "mine.d", "--ro-bind " + sys + " "} {
		if strings.Contains(j, bad) {
			t.Errorf("the tool view has %q:\n%s", bad, j)
		}
	}
	if strings.Index(j, "--remount-ro") < strings.LastIndex(j, "--ro-bind") {
		t.Errorf("--remount-ro before a bind:\n%s", j)
	}

	// An invalid agent policy fails closed: no tool at all.
	os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte("allow everything\n"), 0o644)
	if j := args(v); strings.Contains(j, "/ctx/tool/") {
		t.Errorf("an invalid policy still shows tools:\n%s", j)
	}
	// Only the system directory on CTX_PATH: the user's is not shown.
	os.Remove(filepath.Join(v.Def.Control, "policy"))
	v.Def.CTXPath = "/ctx/tool"
	if j := args(v); strings.Contains(j, "/ctx/home/1000/tool") || !strings.Contains(j, "/ctx/tool/denied") {
		t.Errorf("CTX_PATH /ctx/tool only:\n%s", j)
	}
}
