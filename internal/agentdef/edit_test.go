package agentdef

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

func readCtl(t *testing.T, l layout.Layout, name, ctl string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.AgentControl(name), ctl))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCreate: exec and model agents; window always written (W1); names
// that could be confused with another agent's socket or control directory
// are refused. spec: W1, X1, A1, K2 (interfaces.md "Locations")
func TestCreate(t *testing.T) {
	l := testLayout(t)
	exe := filepath.Join(t.TempDir(), "agent-bin")
	write(t, exe, "#!/bin/sh\necho hi\n")

	if err := Create(l, "x", CreateOptions{Exec: exe, Approval: "ask", Tools: []string{"clock", "git"}}); err != nil {
		t.Fatal(err)
	}
	if readCtl(t, l, "x", "abi") != "sdk-envelope-v1\n" || readCtl(t, l, "x", "window") != "auto\n" ||
		readCtl(t, l, "x", "approval") != "ask\n" || readCtl(t, l, "x", "tools") != "clock\ngit\n" {
		t.Fatal("exec agent control files")
	}
	st, err := os.Lstat(l.AgentObject("x"))
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o755 {
		t.Fatalf("agent object: %v %v", err, st.Mode())
	}
	if b, _ := os.ReadFile(l.AgentObject("x")); string(b) != "#!/bin/sh\necho hi\n" {
		t.Fatalf("object content %q", b)
	}
	if d, err := Load(l, "x"); err != nil || d.Kind != KindExec || d.Approval != "ask" {
		t.Fatalf("Load after Create: %+v %v", d, err)
	}

	if err := Create(l, "m", CreateOptions{Models: []string{"anthropic/claude-x", "openai/gpt-4o"}, Window: "8192"}); err != nil {
		t.Fatal(err)
	}
	if readCtl(t, l, "m", "model") != "anthropic/claude-x\nopenai/gpt-4o\n" || readCtl(t, l, "m", "window") != "8192\n" {
		t.Fatal("model agent control files")
	}
	if d, err := Load(l, "m"); err != nil || d.Kind != KindModel {
		t.Fatalf("Load model agent: %+v %v", d, err)
	}

	for _, tc := range []struct {
		name string
		o    CreateOptions
		want error
	}{
		{"x", CreateOptions{Exec: exe}, ErrExists},
		{"a.d", CreateOptions{Exec: exe}, layout.ErrBadName},
		{"a.sock", CreateOptions{Exec: exe}, layout.ErrBadName},
		{"../a", CreateOptions{Exec: exe}, layout.ErrBadName},
		{".a", CreateOptions{Exec: exe}, layout.ErrBadName},
		{"n", CreateOptions{}, ErrInvalid},
		{"n", CreateOptions{Models: []string{"claude"}}, ErrInvalid},
		{"n", CreateOptions{Exec: exe, Approval: "never"}, ErrInvalid},
		{"n", CreateOptions{Exec: exe, Tools: []string{"../sh"}}, layout.ErrBadName},
	} {
		if err := Create(l, tc.name, tc.o); !errors.Is(err, tc.want) {
			t.Errorf("Create(%q, %+v): want %v, got %v", tc.name, tc.o, tc.want, err)
		}
	}
	for _, n := range []string{"a.d", "a.sock", "n"} {
		if _, err := os.Lstat(l.AgentObject(n)); err == nil {
			t.Errorf("refused create %q left an object", n)
		}
	}
}

// TestSet: a valid value atomically replaces the control file (no temp
// file left, a new inode); an invalid one is refused and the file stays
// byte-identical. spec: A1, X1, W2, K2, X11
func TestSet(t *testing.T) {
	l := testLayout(t)
	execAgent(t, l, "a", map[string]string{"approval": "auto\n", "env": "A=1\n", "window": "auto\n"})
	ctlDir := l.AgentControl("a")

	ok := []struct{ ctl, value, want string }{
		{"approval", "ask", "ask\n"},
		{"approval", "auto\n", "auto\n"},
		{"env", "A=1\nB=$X y", "A=1\nB=$X y\n"},
		{"tools", "clock,git", "clock\ngit\n"},
		{"model", "anthropic/claude-x,openai/gpt-4o", "anthropic/claude-x\nopenai/gpt-4o\n"},
		{"path", "/ctx/tool", "/ctx/tool\n"},
		{"window", "4096", "4096\n"},
		{"system.md", "You are terse.\n\nReally.", "You are terse.\n\nReally.\n"},
		{"abi", "sdk-envelope-v1", "sdk-envelope-v1\n"},
	}
	for _, tc := range ok {
		if err := Set(l, "a", tc.ctl, tc.value, nil); err != nil {
			t.Errorf("Set %s %q: %v", tc.ctl, tc.value, err)
			continue
		}
		if got := readCtl(t, l, "a", tc.ctl); got != tc.want {
			t.Errorf("Set %s %q wrote %q, want %q", tc.ctl, tc.value, got, tc.want)
		}
	}

	bad := []struct{ ctl, value string }{
		{"approval", "never"},
		{"approval", ""},
		{"approval", "auto\nask"},
		{"env", "a=1"},
		{"env", "CTX_PATH=/x"},
		{"env", "A=1\nA=2"},
		{"env", "A=1\r"},
		{"tools", "clock,../sh"},
		{"tools", "a,a"},
		{"model", "claude"},
		{"path", "rel"},
		{"path", "/a\n/b"},
		{"abi", "sdk-envelope-v2"},
		{"window", ""},
		{"label", "a\nb"},
		{"nonsense", "x"},
		{"../abi", "x"},
	}
	for _, tc := range bad {
		p := filepath.Join(ctlDir, tc.ctl)
		before, beforeErr := os.ReadFile(p)
		err := Set(l, "a", tc.ctl, tc.value, nil)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Set %s %q: want ErrInvalid, got %v", tc.ctl, tc.value, err)
		}
		after, afterErr := os.ReadFile(p)
		if !bytes.Equal(before, after) || (beforeErr == nil) != (afterErr == nil) {
			t.Errorf("Set %s %q: refused, but the file changed: %q -> %q", tc.ctl, tc.value, before, after)
		}
	}

	// The extra validator (window vs model, W5) can refuse a syntactically fine value.
	p := filepath.Join(ctlDir, "window")
	before, _ := os.ReadFile(p)
	err := Set(l, "a", "window", "999999", func(ctl string, v []byte) error {
		if ctl == "window" && string(v) != "auto\n" {
			return errors.New("above the model's limit")
		}
		return nil
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("validator refusal: %v", err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("validator refusal changed the file")
	}

	// Atomic replacement: a new inode, no temp files left behind.
	ino := inode(t, filepath.Join(ctlDir, "approval"))
	if err := Set(l, "a", "approval", "ask", nil); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(ctlDir, "approval")) == ino {
		t.Fatal("Set rewrote the file in place (a reader could see a partial value)")
	}
	ents, _ := os.ReadDir(ctlDir)
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}

	if err := Set(l, "nope", "approval", "ask", nil); !errors.Is(err, ErrNoSuchAgent) {
		t.Fatalf("Set on a missing agent: %v", err)
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// TestSetGetRefuseBadNames: an agent name is a path part; Set and Get must
// refuse names that escape agent/ exactly as Load and Create do.
// spec: interfaces.md "Locations" (names: no path can escape its directory)
func TestSetGetRefuseBadNames(t *testing.T) {
	l := testLayout(t) // has Root/bin, Root/tool, Root/home
	for _, name := range []string{"../bin", "../tool", ".."} {
		if err := Set(l, name, "approval", "ask", nil); !errors.Is(err, layout.ErrBadName) {
			t.Errorf("Set(%q): want ErrBadName, got %v", name, err)
		}
		if _, err := Get(l, name, "approval"); !errors.Is(err, layout.ErrBadName) {
			t.Errorf("Get(%q): want ErrBadName, got %v", name, err)
		}
	}
	for _, p := range []string{filepath.Join(l.Root, "bin.d"), filepath.Join(l.Root, "tool.d"), filepath.Join(l.AgentDir(), "...d")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("Set created %s outside any agent's control directory", p)
		}
	}
}

// TestGet reads a control file raw. spec: V1
func TestGet(t *testing.T) {
	l := testLayout(t)
	execAgent(t, l, "a", map[string]string{"env": "A=1\n"})
	if b, err := Get(l, "a", "env"); err != nil || string(b) != "A=1\n" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := Get(l, "a", "bogus"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown control: %v", err)
	}
	if _, err := Get(l, "nope", "env"); !errors.Is(err, ErrNoSuchAgent) {
		t.Fatalf("missing agent: %v", err)
	}
	// Absent: the default Load uses, else "not set" naming the fix.
	if b, err := Get(l, "a", "approval"); err != nil || string(b) != "auto\n" {
		t.Errorf("absent approval: %q %v, want the default auto", b, err)
	}
	if b, err := Get(l, "a", "path"); err != nil || string(b) != l.DefaultCTXPath()+"\n" {
		t.Errorf("absent path: %q %v, want the default CTX_PATH", b, err)
	}
	if _, err := Get(l, "a", "label"); !errors.Is(err, ErrNotSet) || !strings.Contains(err.Error(), "ctx agent set a label") {
		t.Errorf("absent label: %v", err)
	}
	if _, err := Get(l, "a", "model"); !errors.Is(err, ErrNotSet) || !strings.Contains(err.Error(), "has no model: it runs the executable") {
		t.Errorf("an executable agent's model: %v", err)
	}
}

// TestListAndRemove: List shows regular agent objects only (not .d
// directories, sockets, symlinks or temp files); Remove deletes the
// definition but keeps sessions. spec: L4, L6
func TestListAndRemove(t *testing.T) {
	l := testLayout(t)
	if names, err := List(layout.Layout{Root: filepath.Join(t.TempDir(), "none")}); err != nil || names != nil {
		t.Fatalf("no agent dir: %v %v", names, err)
	}
	execAgent(t, l, "b", nil)
	execAgent(t, l, "a", nil)
	write(t, filepath.Join(l.AgentDir(), ".a.tmp-123"), "x")
	if err := os.Symlink(l.AgentObject("a"), l.AgentObject("link")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: l.AgentSocket("a"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	names, err := List(l)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("List = %v", names)
	}

	session := l.SessionDir("a", layout.ScopePrivate, "default")
	write(t, filepath.Join(session, "events.jsonl"), "{}\n")
	if err := Remove(l, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(l.AgentObject("a")); err == nil {
		t.Fatal("object kept")
	}
	if _, err := os.Lstat(l.AgentControl("a")); err == nil {
		t.Fatal("control dir kept")
	}
	if _, err := os.Stat(filepath.Join(session, "events.jsonl")); err != nil {
		t.Fatalf("Remove deleted a session: %v", err) // spec: L6
	}
	if err := Remove(l, "a"); !errors.Is(err, ErrNoSuchAgent) {
		t.Fatalf("second Remove: %v", err)
	}
	if err := Remove(l, "../bin"); !errors.Is(err, layout.ErrBadName) {
		t.Fatalf("Remove bad name: %v", err)
	}
	if names, _ := List(l); !reflect.DeepEqual(names, []string{"b"}) {
		t.Fatalf("List after Remove = %v", names)
	}
}
