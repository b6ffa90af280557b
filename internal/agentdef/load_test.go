package agentdef

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

func testLayout(t *testing.T) layout.Layout {
	t.Helper()
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: 1000}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	return l
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// execAgent writes an executable agent with the given control files.
func execAgent(t *testing.T, l layout.Layout, name string, controls map[string]string) {
	t.Helper()
	write(t, l.AgentObject(name), "#!/bin/sh\n")
	if _, ok := controls["abi"]; !ok {
		write(t, filepath.Join(l.AgentControl(name), "abi"), "sdk-envelope-v1\n")
	}
	for c, v := range controls {
		write(t, filepath.Join(l.AgentControl(name), c), v)
	}
}

// TestLoadABI: .d/abi must be exactly "sdk-envelope-v1\n". spec: X1
func TestLoadABI(t *testing.T) {
	for _, tc := range []struct {
		abi string
		ok  bool
	}{
		{"sdk-envelope-v1\n", true},
		{"sdk-envelope-v1", false},
		{"sdk-envelope-v1\n\n", false},
		{" sdk-envelope-v1\n", false},
		{"sdk-envelope-v1 \n", false},
		{"sdk-envelope-v1\r\n", false},
		{"SDK-ENVELOPE-V1\n", false},
		{"sdk-envelope-v2\n", false},
		{"\n", false},
		{"", false},
	} {
		l := testLayout(t)
		execAgent(t, l, "a", map[string]string{"abi": tc.abi})
		d, err := Load(l, "a")
		if tc.ok {
			if err != nil || d.Kind != KindExec {
				t.Errorf("abi %q: %+v %v", tc.abi, d, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("abi %q: want ErrInvalid, got %v", tc.abi, err)
		}
	}
}

// TestLoadExecDefaults: an exec agent with only abi gets approval auto,
// the default CTX_PATH and no env. spec: X1, A1, K3
func TestLoadExecDefaults(t *testing.T) {
	l := testLayout(t)
	execAgent(t, l, "a", nil)
	d, err := Load(l, "a")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "a" || d.Kind != KindExec || d.Object != l.AgentObject("a") || d.Control != l.AgentControl("a") ||
		d.Approval != "auto" || d.CTXPath != "/ctx/tool:/ctx/home/1000/tool" || d.Env != nil || d.Tools != nil || d.Models != nil ||
		d.Window != nil || d.Cwd != "" || d.Root != "" {
		t.Fatalf("%+v", d)
	}
}

// TestLoadFull: every control file Load reads. spec: V1, A1, K2, X11, W1
func TestLoadFull(t *testing.T) {
	l := testLayout(t)
	execAgent(t, l, "a", map[string]string{
		"approval": "ask\n", "env": "A=1\nB=x=y\n", "tools": "clock\ngit\n", "path": "/ctx/tool:/opt/tools\n",
		"window": "8192\n", "label": "work\n", "cwd": "/workspace/src\n", "root": "/\n", "model": "anthropic/claude-x\n",
	})
	d, err := Load(l, "a")
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindExec || d.Approval != "ask" || !reflect.DeepEqual(d.Env, []KV{{"A", "1"}, {"B", "x=y"}}) ||
		!reflect.DeepEqual(d.Tools, []string{"clock", "git"}) || d.CTXPath != "/ctx/tool:/opt/tools" ||
		string(d.Window) != "8192\n" || d.Label != "work" || d.Cwd != "/workspace/src" || d.Root != "/" ||
		!reflect.DeepEqual(d.Models, []string{"anthropic/claude-x"}) {
		t.Fatalf("%+v", d)
	}
}

// TestLoadModelAgent: no abi, one or more model candidates. spec: L1, W6
func TestLoadModelAgent(t *testing.T) {
	l := testLayout(t)
	write(t, l.AgentObject("m"), "A helpful model agent.\n")
	write(t, filepath.Join(l.AgentControl("m"), "model"), "anthropic/claude-x\nopenai/gpt-4o\n")
	d, err := Load(l, "m")
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindModel || !reflect.DeepEqual(d.Models, []string{"anthropic/claude-x", "openai/gpt-4o"}) {
		t.Fatalf("%+v", d)
	}
	for name, model := range map[string]string{"empty": "", "bad": "claude\n", "dup": "a/b\na/b\n", "no LF": "a/b"} {
		write(t, filepath.Join(l.AgentControl("m"), "model"), model)
		if _, err := Load(l, "m"); !errors.Is(err, ErrInvalid) {
			t.Errorf("model %s: want ErrInvalid, got %v", name, err)
		}
	}
	os.Remove(filepath.Join(l.AgentControl("m"), "model"))
	if _, err := Load(l, "m"); !errors.Is(err, ErrInvalid) {
		t.Errorf("neither abi nor model: want ErrInvalid, got %v", err)
	}
}

// TestLoadApproval: auto (also when absent) or ask, nothing else. spec: A1
func TestLoadApproval(t *testing.T) {
	for _, tc := range []struct {
		v, want string
	}{
		{"auto\n", "auto"}, {"ask\n", "ask"},
		{"ask", ""}, {"Ask\n", ""}, {"never\n", ""}, {"allow_once\n", ""}, {"auto\nask\n", ""}, {"\n", ""}, {"", ""}, {"ask \n", ""},
	} {
		l := testLayout(t)
		execAgent(t, l, "a", map[string]string{"approval": tc.v})
		d, err := Load(l, "a")
		if tc.want == "" {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("approval %q: want ErrInvalid, got %v", tc.v, err)
			}
		} else if err != nil || d.Approval != tc.want {
			t.Errorf("approval %q: %v %v", tc.v, d, err)
		}
	}
}

// TestLoadRefuses: bad values of the other control files, a bad name, a
// missing agent. spec: V1, K2, X11
func TestLoadRefuses(t *testing.T) {
	for name, ctl := range map[string]map[string]string{
		"env lowercase":  {"env": "a=1\n"},
		"env CTX_":       {"env": "CTX_AGENT=x\n"},
		"tools bad name": {"tools": "../x\n"},
		"tools dup":      {"tools": "a\na\n"},
		"path relative":  {"path": "tool\n"},
		"path two lines": {"path": "/a\n/b\n"},
		"cwd relative":   {"cwd": "src\n"},
		"label no LF":    {"label": "x"},
		"root empty":     {"root": "\n"},
		"too large":      {"label": string(make([]byte, MaxControl+1))},
	} {
		l := testLayout(t)
		execAgent(t, l, "a", ctl)
		if _, err := Load(l, "a"); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", name, err)
		}
	}
	l := testLayout(t)
	if _, err := Load(l, "nope"); !errors.Is(err, ErrNoSuchAgent) {
		t.Errorf("missing agent: %v", err)
	}
	for _, n := range []string{"../x", "", ".a", "a/b"} {
		if _, err := Load(l, n); !errors.Is(err, layout.ErrBadName) {
			t.Errorf("name %q: want ErrBadName, got %v", n, err)
		}
	}
}

// TestLoadRefusesSymlinkedObject: the agent object is a regular file,
// never a symlink (interfaces.md "Locations"). spec: V3 (nofollow)
func TestLoadRefusesSymlinkedObject(t *testing.T) {
	l := testLayout(t)
	real := filepath.Join(l.Root, "elsewhere")
	write(t, real, "#!/bin/sh\n")
	if err := os.Symlink(real, l.AgentObject("a")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(l.AgentControl("a"), "abi"), "sdk-envelope-v1\n")
	if _, err := Load(l, "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("symlinked object: want ErrInvalid, got %v", err)
	}
	// A directory is not an agent object either.
	os.Remove(l.AgentObject("a"))
	os.Mkdir(l.AgentObject("a"), 0o755)
	if _, err := Load(l, "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("directory object: want ErrInvalid, got %v", err)
	}
}

// TestLoadRefusesSymlinkedControl: control files are opened with
// O_NOFOLLOW — a symlink (even to a valid value, even dangling) is refused,
// never followed and never taken as absent. Load promises errors that wrap
// ErrNoSuchAgent or ErrInvalid. spec: X1, A1, V3
func TestLoadRefusesSymlinkedControl(t *testing.T) {
	for _, ctl := range []string{"abi", "approval", "env"} {
		for _, dangling := range []bool{false, true} {
			l := testLayout(t)
			execAgent(t, l, "a", nil)
			target := filepath.Join(l.Root, "value")
			if !dangling {
				write(t, target, map[string]string{"abi": "sdk-envelope-v1\n", "approval": "auto\n", "env": "A=1\n"}[ctl])
			}
			p := filepath.Join(l.AgentControl("a"), ctl)
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			d, err := Load(l, "a")
			if err == nil {
				t.Errorf("%s symlink (dangling %v) followed: %+v", ctl, dangling, d)
				continue
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s symlink (dangling %v): refused, but the error wraps neither ErrInvalid nor ErrNoSuchAgent: %v", ctl, dangling, err)
			}
		}
	}
}

// TestLoadRefusesNonRegularControl: a directory or a FIFO in place of a
// control file is refused — and a FIFO must not block Load (the run actor
// loads the definition at every run). spec: V1
func TestLoadRefusesNonRegularControl(t *testing.T) {
	l := testLayout(t)
	execAgent(t, l, "a", nil)
	if err := os.Mkdir(filepath.Join(l.AgentControl("a"), "approval"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(l, "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("directory control: want ErrInvalid, got %v", err)
	}

	l = testLayout(t)
	execAgent(t, l, "a", nil)
	fifo := filepath.Join(l.AgentControl("a"), "approval")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := loadBeside(t, l, fifo); !errors.Is(err, ErrInvalid) {
		t.Fatalf("FIFO control: want ErrInvalid, got %v", err)
	}
}

// loadBeside is Load(l, "a") failing the test if it blocks for 2 s on the
// FIFO at fifo — then opened for writing, so the stuck open ends and the
// goroutine with it.
func loadBeside(t *testing.T, l layout.Layout, fifo string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := Load(l, "a"); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatalf("Load blocked for 2 s opening the FIFO %s", fifo)
		return nil
	}
}

// TestLoadControlDirNotADirectory: a control directory that is a file or
// a FIFO fails the definition (closed) at once — the FIFO's open never
// blocks Load. spec: X1, V3
func TestLoadControlDirNotADirectory(t *testing.T) {
	for _, kind := range []string{"file", "fifo"} {
		l := testLayout(t)
		write(t, l.AgentObject("a"), "#!/bin/sh\n")
		var err error
		if kind == "file" {
			err = os.WriteFile(l.AgentControl("a"), []byte("sdk-envelope-v1\n"), 0o644)
		} else {
			err = syscall.Mkfifo(l.AgentControl("a"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := loadBeside(t, l, l.AgentControl("a")); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", kind, err)
		}
	}
}
