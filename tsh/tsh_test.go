package tsh

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/toolpath"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContextTextPinnedOldestKept: the pinned tool is the OLDEST load, so
// an eviction that ignored pinning (oldest first) would drop it; it must
// stay while every unpinned tool goes. ContextPinned is that floor. spec: K5
func TestContextTextPinnedOldestKept(t *testing.T) {
	var st State
	st.Load(Loaded{Name: "keep", Description: "pinned and oldest", Path: "/ctx/tool/keep", Pinned: true})
	st.Load(Loaded{Name: "b", Description: strings.Repeat("tool b ", 10), Path: "/ctx/tool/b"})
	st.Load(Loaded{Name: "c", Description: "tool c", Path: "/ctx/tool/c"})
	full := ContextText(st, 0)
	got := ContextText(st, len(full)-1)
	if !strings.Contains(got, "- keep (pinned)") || strings.Contains(got, "- b:") || !strings.Contains(got, "- c:") {
		t.Fatalf("evict one kept the wrong tools:\n%s", got)
	}
	floor := ContextPinned(st)
	want := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n" +
		"- keep (pinned): pinned and oldest [/ctx/tool/keep]\n(2 unpinned evicted; still callable)\n"
	if floor != want {
		t.Fatalf("ContextPinned =\n%s\nwant\n%s", floor, want)
	}
	if got := ContextText(st, len(floor)); got != floor {
		t.Fatalf("at the floor:\n%s", got)
	}
	if ContextPinned(State{}) != "" {
		t.Fatal("empty state has a floor")
	}
}

func TestContextText(t *testing.T) {
	var st State
	if got := ContextText(st, 0); got != "" {
		t.Fatalf("empty state: %q", got)
	}
	st.Load(Loaded{Name: "a", Description: "tool a\nsecond line", Path: "/ctx/tool/a"})
	st.Load(Loaded{Name: "b", Description: "tool b", Path: "/ctx/tool/b"})
	st.Load(Loaded{Name: "c", Description: "tool c", Path: "/ctx/tool/c", Pinned: true})
	full := ContextText(st, 0)
	want := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n" +
		"- a: tool a [/ctx/tool/a]\n" +
		"  second line\n" + // issue 12: a description's lines stay lines, indented under the tool
		"- b: tool b [/ctx/tool/b]\n" +
		"- c (pinned): tool c [/ctx/tool/c]\n"
	if full != want {
		t.Fatalf("ContextText =\n%s\nwant\n%s", full, want)
	}
	if ContextText(st, len(full)) != full {
		t.Fatal("text at exactly the budget changed")
	}
	// spec: K5 — over budget, unpinned metadata goes oldest first; pinned stays.
	got := ContextText(st, len(full)-1)
	if strings.Contains(got, "- a:") || !strings.Contains(got, "- b:") || !strings.Contains(got, "- c (pinned)") ||
		!strings.Contains(got, "(1 unpinned evicted; still callable)\n") || len(got) > len(full)-1 {
		t.Fatalf("evict one:\n%s", got)
	}
	got = ContextText(st, 140)
	if strings.Contains(got, "- b:") || !strings.Contains(got, "- c (pinned)") || len(got) > 140 {
		t.Fatalf("evict two:\n%s", got)
	}
	// Pinned alone over budget: cut on a character boundary, never over.
	st2 := State{}
	st2.Load(Loaded{Name: "p", Description: strings.Repeat("é", 100), Pinned: true})
	got = ContextText(st2, 101)
	if len(got) > 101 || !strings.HasPrefix(got, "Tools loaded") || !isValidUTF8(got) {
		t.Fatalf("cut: %q", got)
	}
	// Eviction is a view: the state still holds every tool.
	if len(st.Tools) != 3 {
		t.Fatal("ContextText changed the state")
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func TestStateOps(t *testing.T) {
	var st State
	st.Load(Loaded{Name: "a"})
	st.Load(Loaded{Name: "b"})
	if err := st.Pin("a"); err != nil {
		t.Fatal(err)
	}
	st.Load(Loaded{Name: "a", Description: "new"}) // reload: newest, keeps pin
	if st.Tools[1].Name != "a" || !st.Tools[1].Pinned || st.Tools[1].Description != "new" {
		t.Fatalf("reload: %+v", st.Tools)
	}
	if err := st.Unpin("zz"); !errors.Is(err, ErrNotLoaded) {
		t.Fatal(err)
	}
	if err := st.Unload("a"); err != nil || st.Find("a") >= 0 {
		t.Fatal("unload")
	}
	if err := st.Unload("a"); !errors.Is(err, ErrNotLoaded) {
		t.Fatal(err)
	}
}

func TestUpdateStateRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", StateFileName)
	_, err := UpdateState(p, func(s *State) error { s.Load(Loaded{Name: "x", Pinned: true}); return nil })
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(p)
	if err != nil || len(st.Tools) != 1 || !st.Tools[0].Pinned || st.Next != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// A failing update writes nothing.
	_, err = UpdateState(p, func(s *State) error { s.Tools = nil; return errors.New("no") })
	if err == nil {
		t.Fatal("want error")
	}
	if st, _ := ReadState(p); len(st.Tools) != 1 {
		t.Fatal("failed update was written")
	}
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(p); err == nil {
		t.Fatal("corrupt state accepted")
	}
}

func env(m map[string]string) Env {
	return Env{Getenv: func(k string) string { return m[k] }}
}

func TestSearchPath(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".tshrc"), []byte("CTX_PATH=/rc1:/rc2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// spec: K3 — standalone: .tshrc first, then the inherited CTX_PATH; never PATH.
	got, err := env(map[string]string{"CTX_HOME": home, "CTX_PATH": "/e1:rel::/e2", "PATH": "/usr/bin"}).SearchPath(0)
	if err != nil || strings.Join(got, ":") != "/rc1:/rc2:/e1:/e2" {
		t.Fatalf("standalone: %q %v", got, err)
	}
	// spec: K4 — agent view: only CTX_PATH, .tshrc ignored.
	got, err = env(map[string]string{"CTX_AGENT": "a", "CTX_HOME": home, "CTX_PATH": "/e1"}).SearchPath(0)
	if err != nil || strings.Join(got, ":") != "/e1" {
		t.Fatalf("agent: %q %v", got, err)
	}
	// spec: D5 — nothing set: no directories, PATH is not a fallback.
	got, err = env(map[string]string{"CTX_HOME": t.TempDir(), "PATH": "/usr/bin:/bin"}).SearchPath(0)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty: %q %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(home, ".tshrc"), []byte("CTX_PATH=$(id)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := env(map[string]string{"CTX_HOME": home}).SearchPath(0); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), ".tshrc:1:") {
		t.Fatalf("invalid tshrc: %v", err)
	}
}

func TestStatePath(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
		err  bool
	}{
		{"standalone", map[string]string{"CTX_HOME": "/h"}, "/h/tsh/tools.json", false},
		{"agent", map[string]string{"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "1000:coder:default"},
			"/ctx/home/1000/agent/coder/session/default/tools.json", false},
		{"agent with root", map[string]string{"CTX_ROOT": "/r", "CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "7:coder:s1"},
			"/r/home/7/agent/coder/session/s1/tools.json", false},
		{"agent mismatch", map[string]string{"CTX_AGENT": "x", "CTX_AGENT_SUBJECT": "1:coder:s"}, "", true},
		{"no subject", map[string]string{"CTX_AGENT": "coder"}, "", true},
		{"bad session", map[string]string{"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "1:coder:../x"}, "", true},
		{"bad uid", map[string]string{"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "01:coder:s"}, "", true},
		{"extra part", map[string]string{"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "1:coder:s:x"}, "", true},
	} {
		got, err := env(tc.env).StatePath(0)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %q %v", tc.name, got, err)
		}
	}
}

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  bash  ", []string{"bash"}, false},
		{"call echo 'a b' \"c \\\"d\\\"\" e\\ f", []string{"call", "echo", "a b", `c "d"`, "e f"}, false},
		{"echo $HOME `id` $(x)", []string{"echo", "$HOME", "`id`", "$(x)"}, false},
		{"a''b", []string{"ab"}, false},
		{"''", []string{""}, false},
		{"'open", nil, true},
		{"\"open", nil, true},
		{"x\\", nil, true},
	} {
		got, err := SplitWords(tc.in)
		if (err != nil) != tc.err || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("SplitWords(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestComplete(t *testing.T) {
	tools := []string{"bash", "base64", "grep", "hello"}
	for _, tc := range []struct {
		line    string
		pos     int
		want    string
		wantPos int
		ok      bool
	}{
		{"gr", 2, "grep ", 5, true},
		{"ba", 2, "bas", 3, true},
		{"bash", 4, "bash ", 5, true},
		{"call g", 6, "call grep ", 10, true},
		{"load bash g", 11, "load bash grep ", 15, true},
		{"which bash g", 12, "", 0, false},
		{"bash g", 6, "", 0, false},
		{"un", 2, "un", 2, false},
		{"unl", 3, "unload ", 7, true},
		{"zz", 2, "", 0, false},
		{"hel", 3, "", 0, false}, // help and hello: ambiguous, candidates shown
	} {
		got, pos, ok, _ := complete(tc.line, tc.pos, tools)
		if ok != tc.ok || (ok && (got != tc.want || pos != tc.wantPos)) {
			t.Errorf("complete(%q) = %q %d %v", tc.line, got, pos, ok)
		}
	}
}

func TestHistory(t *testing.T) {
	home := t.TempDir()
	h := openHistory(home)
	h.Add("list")
	h.Add("")
	h.Add("list")
	h.Add("call bash")
	if h.Len() != 2 || h.At(0) != "call bash" || h.At(1) != "list" {
		t.Fatalf("%q", h.lines)
	}
	h2 := openHistory(home)
	if h2.Len() != 2 || h2.At(0) != "call bash" {
		t.Fatalf("reloaded %q", h2.lines)
	}
}

// fakeExec records the call instead of replacing the process.
type fakeExec struct {
	path string
	argv []string
}

func (f *fakeExec) Replace(t *toolpath.Tool, argv, env []string) error {
	f.path, f.argv = t.Path, argv
	return errors.New("fake exec")
}

func (f *fakeExec) Run(t *toolpath.Tool, argv, env []string, _ io.Reader, _, _ io.Writer) (int, error) {
	f.path, f.argv = t.Path, argv
	return 0, nil
}

func shell(t *testing.T, m map[string]string) (*Shell, *bytes.Buffer, *bytes.Buffer, *fakeExec) {
	t.Helper()
	id, err := toolpath.CurrentIdentity()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	fe := &fakeExec{}
	return &Shell{Env: env(m), Identity: id, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Exec: fe, Budget: DefaultContextBudget}, &out, &errb, fe
}

func mkTool(t *testing.T, dir, name, desc string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	if desc != "" {
		if err := os.MkdirAll(filepath.Join(dir, name+".d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".d", "tool.json"), []byte(`{"description":"`+desc+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// spec: V3 — inside an agent view tsh applies agent and tool policy and
// names the refusing layer; an invalid policy fails closed.
func TestShellPolicy(t *testing.T) {
	root, tools := t.TempDir(), t.TempDir()
	mkTool(t, tools, "bash", "a shell", 0o755)
	mkTool(t, tools, "grep", "", 0o755)
	ctl := filepath.Join(root, "agent", "coder.d")
	if err := os.MkdirAll(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"CTX_ROOT": root, "CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "1:coder:s", "CTX_PATH": tools}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ctl, "policy"), "allow tool *\ndeny tool grep\n")
	sh, out, errb, fe := shell(t, m)
	if code := sh.Run([]string{"call", "grep", "x"}); code != ExitNotAllowed || !strings.Contains(errb.String(), "agent-policy") || fe.path != "" {
		t.Fatalf("agent deny: %d %q", code, errb)
	}
	if code := sh.Run([]string{"list"}); code != 0 || out.String() != "bash\ta shell\n" {
		t.Fatalf("list: %d %q", code, out)
	}
	write(filepath.Join(tools, "bash.d", "policy"), "allow label ops\n")
	errb.Reset()
	if code := sh.Run([]string{"call", "bash"}); code != ExitNotAllowed || !strings.Contains(errb.String(), "tool-policy") {
		t.Fatalf("tool deny: %d %q", code, errb)
	}
	write(filepath.Join(ctl, "label"), "ops\n")
	if code := sh.Run([]string{"call", "bash", "-c", "x"}); code != ExitNotAllowed || fe.path != filepath.Join(tools, "bash") || strings.Join(fe.argv, " ") != "bash -c x" {
		t.Fatalf("allowed: %d %+v", code, fe)
	}
	write(filepath.Join(ctl, "policy"), "allow tool *\nallow tools x\n")
	errb.Reset()
	if code := sh.Run([]string{"which", "bash"}); code != ExitNotAllowed || !strings.Contains(errb.String(), "policy:2") {
		t.Fatalf("invalid policy: %d %q", code, errb)
	}
}

func TestShellContextCommands(t *testing.T) {
	home, tools := t.TempDir(), t.TempDir()
	mkTool(t, tools, "bash", "a shell", 0o755)
	mkTool(t, tools, "grep", "search", 0o755)
	mkTool(t, tools, "off", "", 0o644)
	sh, out, errb, _ := shell(t, map[string]string{"CTX_HOME": home, "CTX_PATH": tools})
	run := func(want int, args ...string) {
		t.Helper()
		if code := sh.Run(args); code != want {
			t.Fatalf("%v: exit %d want %d (%s)", args, code, want, errb)
		}
	}
	run(0, "load", "bash", "grep")
	run(0, "pin", "grep")
	run(ExitNotFound, "load", "nope")
	run(ExitNotAllowed, "load", "off")
	run(ExitError, "unpin", "nope")
	run(ExitUsage, "pin")
	run(ExitUsage, "frobnicate")
	out.Reset()
	run(0, "context")
	st, err := ReadState(filepath.Join(home, "tsh", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != ContextText(st, DefaultContextBudget) || !strings.Contains(out.String(), "- grep (pinned): search") {
		t.Fatalf("context %q", out)
	}
	run(0, "unload", "bash")
	out.Reset()
	run(0, "which", "grep")
	if out.String() != filepath.Join(tools, "grep")+"\n" {
		t.Fatalf("which %q", out)
	}
}

// spec: issue 12 — a multi-line tool description: `tsh list` shows its
// first line, the tool context keeps every line (indented), control
// characters never pass.
func TestMultiLineDescription(t *testing.T) {
	desc := "Print a file with line numbers.\n\nargv: read PATH [--offset N]\nexample: read main.go\x1b[31m\n"
	if got := Summary(desc); got != "Print a file with line numbers." {
		t.Errorf("summary %q", got)
	}
	var st State
	st.Load(Loaded{Name: "read", Description: desc, Path: "/ctx/tool/read"})
	want := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n" +
		"- read: Print a file with line numbers. [/ctx/tool/read]\n" +
		"  argv: read PATH [--offset N]\n" +
		"  example: read main.go [31m\n"
	if got := ContextText(st, DefaultContextBudget); got != want {
		t.Errorf("context:\n%q\nwant\n%q", got, want)
	}
}
