package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/policy"
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

// TestToolTreeView: a tool call's view (CallTools) shows each tool
// directory as one read-only bind of a tool tree holding exactly what
// AllowedTools shows — the allowed tools as hard links of the same files,
// their .d/ — and the same tree again while nothing changed; a tool
// installed again, or a changed verdict, makes another tree. spec: V3
func TestToolTreeView(t *testing.T) {
	v, sys := toolView(t)
	for i := range 20 {
		name := fmt.Sprintf("t%02d", i)
		os.WriteFile(filepath.Join(sys, name), []byte("#!/bin/sh\n"), 0o755)
		os.MkdirAll(filepath.Join(sys, name+".d", "sub"), 0o755)
		os.WriteFile(filepath.Join(sys, name+".d", "tool.json"), []byte("{}"), 0o644)
		os.Symlink("../tool.json", filepath.Join(sys, name+".d", "sub", "link"))
		// An hour old: a change made now has another mtime, whatever the
		// clock's granularity.
		old := time.Now().Add(-time.Hour)
		os.Chtimes(filepath.Join(sys, name+".d"), old, old)
	}
	os.WriteFile(filepath.Join(sys, "denied"), []byte("#!/bin/sh\n"), 0o755)
	allow := func(n int) {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "allow tool t%02d\n", i)
		}
		os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte(b.String()), 0o644)
	}
	allow(20)
	v.Def.CTXPath = "/ctx/tool"
	v.Tools = CallTools
	spec := func() bwrap.Spec { return v.Spec([]string{"/x"}, v.ToolEnv()) }
	s := spec()
	var tree string
	for _, m := range s.Mounts {
		if m.Dst == "/ctx/tool" {
			tree = m.Src
		}
		if strings.HasPrefix(m.Dst, "/ctx/tool/") {
			t.Errorf("a tool bound on its own: %+v", m)
		}
	}
	if tree == "" || !strings.HasPrefix(tree, sys+"/.views/") || slices.Contains(s.Tmpfs, "/ctx/tool") {
		t.Fatalf("no tree bound at /ctx/tool: %+v", s)
	}
	ents, _ := os.ReadDir(tree)
	if len(ents) != 40 {
		t.Errorf("tree has %d entries, want 20 tools and their .d/", len(ents))
	}
	if _, err := os.Lstat(filepath.Join(tree, "denied")); err == nil {
		t.Error("a denied tool is in the tree")
	}
	same := func(a, b string) bool {
		x, err1 := os.Stat(a)
		y, err2 := os.Stat(b)
		return err1 == nil && err2 == nil && os.SameFile(x, y)
	}
	if !same(filepath.Join(tree, "t07"), filepath.Join(sys, "t07")) || !same(filepath.Join(tree, "t07.d", "tool.json"), filepath.Join(sys, "t07.d", "tool.json")) {
		t.Error("tree entries are not the tool's own files")
	}
	if target, err := os.Readlink(filepath.Join(tree, "t07.d", "sub", "link")); err != nil || target != "../tool.json" {
		t.Errorf("symlink in .d/: %q %v", target, err)
	}
	if again := spec(); !slices.Equal(again.Mounts, s.Mounts) {
		t.Error("nothing changed, yet another tree")
	}
	// A tool installed again (a new file renamed over it): another tree.
	os.WriteFile(filepath.Join(sys, ".new"), []byte("#!/bin/sh\necho 2\n"), 0o755)
	os.Rename(filepath.Join(sys, ".new"), filepath.Join(sys, "t03"))
	s2 := spec()
	if slices.Equal(s2.Mounts, s.Mounts) {
		t.Error("a reinstalled tool kept the old tree")
	}
	// A file added to a tool's .d/ (its policy, say): at once.
	os.WriteFile(filepath.Join(sys, "t01.d", "added"), []byte("x"), 0o644)
	for _, m := range spec().Mounts {
		if m.Dst == "/ctx/tool" {
			if _, err := os.Lstat(filepath.Join(m.Src, "t01.d", "added")); err != nil {
				t.Error("a file added to a .d/ is not in the tree")
			}
		}
	}
	// A changed verdict: another tree without the tools now denied.
	allow(10)
	s3 := spec()
	for _, m := range s3.Mounts {
		if m.Dst == "/ctx/tool" {
			if _, err := os.Lstat(filepath.Join(m.Src, "t15")); err == nil {
				t.Error("a tool the policy now denies is in the tree")
			}
			if _, err := os.Lstat(filepath.Join(m.Src, "t05")); err != nil {
				t.Error("an allowed tool is missing from the tree")
			}
		}
	}
	// The mounts of the tool part: one bind, whatever the number of tools.
	n := 0
	for _, m := range s3.Mounts {
		if strings.HasPrefix(m.Dst, "/ctx/tool") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d tool mounts, want 1", n)
	}
}

// TestToolTreeFallsBack: where a tree cannot be made (here .views/ is a
// file), a tool call's view shows the directory bind by bind, exactly as
// the terminal's: never nothing, never the whole directory. spec: V3
func TestToolTreeFallsBack(t *testing.T) {
	v, sys := toolView(t)
	os.WriteFile(filepath.Join(sys, "ok"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(sys, "no"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(sys, treesDir), []byte("in the way"), 0o644)
	os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte("allow tool ok\n"), 0o644)
	v.Def.CTXPath = "/ctx/tool"
	v.Tools = CallTools
	a, err := argsOf(v.Spec([]string{"/x"}, v.ToolEnv()))
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	for _, want := range []string{"--tmpfs /ctx/tool", "--ro-bind " + sys + "/ok /ctx/tool/ok", "--remount-ro /ctx/tool"} {
		if !strings.Contains(j, want) {
			t.Errorf("missing %q in\n%s", want, j)
		}
	}
	if strings.Contains(j, "/ctx/tool/no") || strings.Contains(j, "--ro-bind "+sys+" /ctx/tool") {
		t.Errorf("the fallback shows a denied tool or the whole directory:\n%s", j)
	}
}

// toolView is a view of agent "a" with its control directory and an empty
// system tool directory (returned) made.
func toolView(t *testing.T) (View, string) {
	t.Helper()
	v := view(t)
	v.Def.Control = v.Layout.AgentControl("a")
	os.MkdirAll(v.Def.Control, 0o755)
	sys := v.Layout.ToolDir()
	os.MkdirAll(sys, 0o755)
	return v, sys
}

// TestListToolsIsDecideTool: the names a view's listing shows are exactly
// the regular files DecideTool allows, in name order — for tools with and
// without a .d/, a .d/ that is a symlink, a denying, an invalid (fails
// closed) and a non-regular policy, an agent policy that is invalid —
// and the quick key changes when a tool is replaced. spec: V3
func TestListToolsIsDecideTool(t *testing.T) {
	v, dir := toolView(t)
	tool := func(name string) { os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755) }
	policyOf := func(name, text string) {
		os.MkdirAll(filepath.Join(dir, name+".d"), 0o755)
		os.WriteFile(filepath.Join(dir, name+".d", "policy"), []byte(text), 0o644)
	}
	for _, n := range []string{"zeta", "alpha", "nod", "withd", "deny", "invalid", "fifo", "linked", "other"} {
		tool(n)
	}
	os.MkdirAll(filepath.Join(dir, "withd.d"), 0o755)
	policyOf("deny", "deny label *\n")
	policyOf("invalid", "allow sometimes\n")
	os.MkdirAll(filepath.Join(dir, "fifo.d"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.d", "policy"), 0o644); err != nil {
		t.Fatal(err)
	}
	policyOf("other", "deny label *\n")
	os.Symlink(filepath.Join(dir, "other.d"), filepath.Join(dir, "linked.d")) // followed, as a path open would
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	os.Symlink(filepath.Join(dir, "alpha"), filepath.Join(dir, "asym"))

	check := func(label string) string {
		t.Helper()
		v.Def.Label = label
		ap, aerr := policy.Load(policy.AgentPolicy, filepath.Join(v.Def.Control, "policy"))
		names, qk, qerr, err := listTools(dir, label, ap, aerr)
		if err != nil || qerr != nil {
			t.Fatal(err, qerr)
		}
		if want := decided(v, dir); !slices.Equal(names, want) {
			t.Errorf("label %q: listed %v, DecideTool allows %v", label, names, want)
		}
		return qk
	}
	qk := check("")
	check("trusted")
	if got := check(""); got != qk {
		t.Error("the quick key changed with nothing changed")
	}
	os.Remove(filepath.Join(dir, "alpha"))
	tool("alpha")
	if check("") == qk {
		t.Error("the quick key did not change when a tool was replaced")
	}
	os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte("allow tool alpha\nallow tool zeta\n"), 0o644)
	check("")
	os.WriteFile(filepath.Join(v.Def.Control, "policy"), []byte("allow nothing-valid\n"), 0o644)
	ap, aerr := policy.Load(policy.AgentPolicy, filepath.Join(v.Def.Control, "policy"))
	if names, _, _, _ := listTools(dir, "", ap, aerr); len(names) != 0 || aerr == nil {
		t.Errorf("an invalid agent policy listed %v (%v)", names, aerr)
	}
}

// decided lists, in name order, the regular files of dir (not a .d/)
// that DecideTool allows v's agent, each read afresh: what a listing of
// dir must show.
func decided(v View, dir string) []string {
	ents, _ := os.ReadDir(dir)
	var want []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), ".d") && DecideTool(v.Def, dir, e.Name()).Allowed {
			want = append(want, e.Name())
		}
	}
	return want
}
