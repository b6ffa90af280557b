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

	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/toolpath"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	return &Shell{Env: env(m), Identity: id, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Exec: fe, Budget: toolctx.DefaultContextBudget}, &out, &errb, fe
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
	st, err := toolctx.ReadState(filepath.Join(home, "tsh", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != toolctx.ContextText(st, toolctx.DefaultContextBudget) || !strings.Contains(out.String(), "- grep (pinned): search") {
		t.Fatalf("context %q", out)
	}
	run(0, "unload", "bash")
	out.Reset()
	run(0, "which", "grep")
	if out.String() != filepath.Join(tools, "grep")+"\n" {
		t.Fatalf("which %q", out)
	}
}
