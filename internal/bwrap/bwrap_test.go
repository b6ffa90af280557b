package bwrap

import (
	"errors"
	"github.com/cortexfs/ctx/internal/netpolicy"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestArgsStrictDefaults(t *testing.T) {
	a, err := Spec{Argv: []string{"/bin/true"}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--clearenv"} {
		if !slices.Contains(a, want) {
			t.Errorf("missing %s in %v", want, a)
		}
	}
	if i := slices.Index(a, "--cap-drop"); i < 0 || a[i+1] != "ALL" {
		t.Errorf("no --cap-drop ALL: %v", a)
	}
	if a[len(a)-2] != "--" || a[len(a)-1] != "/bin/true" {
		t.Errorf("argv not last: %v", a)
	}
}

func TestArgsMountsOrderEnvSorted(t *testing.T) {
	s := Spec{
		Network: true,
		Mounts: []Mount{
			{Src: "/h/ws", Dst: "/workspace", Write: true},
			{Src: "/h/ws/.git", Dst: "/workspace/.git"},
			{Src: "/h/opt", Dst: "/opt", Try: true},
		},
		Env:   map[string]string{"B": "2", "A": "1 with space"},
		Chdir: "/workspace", InfoFD: 3, BlockFD: 4, EnvFD: 5,
		Argv: []string{"prog", "--flag"},
	}
	a, err := s.Args()
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	for _, want := range []string{
		"--bind /h/ws /workspace --ro-bind /h/ws/.git /workspace/.git --ro-bind-try /h/opt /opt",
		"--clearenv --args 5 --chdir /workspace --info-fd 3 --block-fd 4 -- prog --flag",
	} {
		if !strings.Contains(j, want) {
			t.Errorf("want %q in %q", want, j)
		}
	}
	if slices.Contains(a, "--unshare-net") {
		t.Error("network granted but unshared")
	}
	env, err := s.EnvArgs()
	if err != nil {
		t.Fatal(err)
	}
	if string(env) != "--setenv\x00A\x001 with space\x00--setenv\x00B\x002\x00" {
		t.Errorf("env args %q", env)
	}
}

// TestArgsNoEnvValue: no environment key or value is ever on bwrap's
// command line, which every local user reads (ps, /proc/PID/cmdline); an
// environment without its descriptor is refused. spec: X11, B3
func TestArgsNoEnvValue(t *testing.T) {
	s := Spec{Argv: []string{"prog"}, Env: map[string]string{"GITHUB_TOKEN": "s3cret-canary"}}
	if a, err := s.Args(); err == nil {
		t.Fatalf("an environment without EnvFD was accepted: %v", a)
	}
	f, err := s.PassEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := s.Args()
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	if strings.Contains(j, "s3cret-canary") || strings.Contains(j, "GITHUB_TOKEN") || slices.Contains(a, "--setenv") {
		t.Errorf("environment on argv: %q", j)
	}
	if i := slices.Index(a, "--args"); i < 0 || a[i+1] != "3" || s.EnvFD != 3 || len(s.Files) != 1 {
		t.Errorf("env descriptor: %q fd %d files %d", j, s.EnvFD, len(s.Files))
	}
	if _, err := (Spec{Argv: []string{"x"}, Env: map[string]string{"A": "x\x00y"}, EnvFD: 3}).Args(); err == nil {
		t.Error("a NUL in a value was accepted")
	}
}

func TestArgsRejects(t *testing.T) {
	for _, s := range []Spec{
		{},
		{Argv: []string{"x"}, Env: map[string]string{"A=B": "x"}, EnvFD: 3},
		{Argv: []string{"x"}, Mounts: []Mount{{Src: "/a", Dst: "rel"}}},
	} {
		if _, err := s.Args(); err == nil {
			t.Errorf("want error for %+v", s)
		}
	}
}

func TestFindNeverUsesPATH(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Find("bwrap"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("relative path accepted: %v", err)
	}
	if _, err := Find("/nonexistent/bwrap"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("missing bwrap: %v", err)
	}
}

// TestSystemSandboxRuns runs a real bwrap with the System view: the program
// sees exactly the environment given. spec: X11
func TestSystemSandboxRuns(t *testing.T) {
	bw, err := Find("")
	if err != nil {
		t.Skip("bwrap not installed:", err)
	}
	// A value that reads as a bwrap option stays a value: the descriptor
	// holds --setenv KEY VALUE triples.
	s := Spec{System: true, Env: map[string]string{"ONLY": "this", "SPACE": "a b", "TRICK": "--bind"}, Argv: []string{"/usr/bin/env"}}
	f, err := s.PassEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := s.Args()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bw, a...)
	cmd.ExtraFiles = s.Files
	cmd.Env = []string{"SECRET=leak"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// bwrap itself always sets PWD to the working directory.
	if strings.TrimSpace(string(out)) != "ONLY=this\nSPACE=a b\nTRICK=--bind\nPWD=/" {
		t.Fatalf("env inside: %q", out)
	}
}

// A terminal started by the built-in launcher must outlive the daemon that
// started it; everything else stays strict. spec: T1
func TestArgsOutliveParent(t *testing.T) {
	a, err := Spec{OutliveParent: true, Argv: []string{"/bin/true"}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(a, "--die-with-parent") {
		t.Errorf("--die-with-parent with OutliveParent: %v", a)
	}
	for _, want := range []string{"--new-session", "--unshare-pid", "--unshare-net", "--clearenv"} {
		if !slices.Contains(a, want) {
			t.Errorf("missing %s in %v", want, a)
		}
	}
}

// TestFDMountsAndSeccomp: descriptor mounts and the seccomp fd become
// --bind-fd/--ro-bind-fd and --seccomp with the numbers Pass returned.
func TestFDMountsAndSeccomp(t *testing.T) {
	var s Spec
	f1, f2 := os.NewFile(100, "a"), os.NewFile(101, "b")
	if n := s.Pass(f1); n != 3 {
		t.Fatalf("first Pass = %d", n)
	}
	s.Mounts = []Mount{{FD: 3, Src: "label", Dst: "/workspace", Write: true}}
	s.SeccompFD = s.Pass(f2)
	s.Argv = []string{"/bin/true"}
	a, err := s.Args()
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Join(a, " ")
	for _, want := range []string{"--bind-fd 3 /workspace", "--seccomp 4"} {
		if !strings.Contains(j, want) {
			t.Errorf("argv lacks %q: %s", want, j)
		}
	}
	for _, bad := range []Mount{{FD: 2, Dst: "/x"}, {FD: 3, Dst: "/x", Try: true}, {Dst: "/x"}, {FD: 3, Dst: "x"}} {
		s.Mounts = []Mount{bad}
		if _, err := s.Args(); err == nil {
			t.Errorf("mount %+v accepted", bad)
		}
	}
}

// The terminal's shell keeps its session (its host holds the PTY outside the
// sandbox), runs as PID 1, and read-only remounts come after every mount.
func TestArgsSharedSessionPID1RemountRO(t *testing.T) {
	a, err := Spec{Argv: []string{"/bin/true"}}.Args()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a, "--new-session") || slices.Contains(a, "--as-pid-1") || slices.Contains(a, "--remount-ro") {
		t.Errorf("the zero Spec is not the strictest: %v", a)
	}
	s := Spec{SharedSession: true, AsPID1: true, Argv: []string{"/bin/true"},
		Tmpfs:       []string{"/ctx/tool"},
		Mounts:      []Mount{{Src: "/x", Dst: "/ctx/tool/x"}},
		MountsAfter: []Mount{{Src: "/y", Dst: "/ctx/tool/y"}},
		RemountRO:   []string{"/ctx/tool"}}
	if a, err = s.Args(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(a, "--new-session") || !slices.Contains(a, "--as-pid-1") || !slices.Contains(a, "--cap-drop") {
		t.Errorf("shared session, pid 1: %v", a)
	}
	ro, last := slices.Index(a, "--remount-ro"), slices.Index(a, "/ctx/tool/y")
	if ro < 0 || a[ro+1] != "/ctx/tool" || ro < last {
		t.Errorf("--remount-ro must follow every mount: %v", a)
	}
	if _, err := (Spec{RemountRO: []string{"rel"}, Argv: []string{"/bin/true"}}).Args(); err == nil {
		t.Error("a relative --remount-ro was accepted")
	}
}

// TestArgsEgressKeepsOwnNetwork: a net sandbox (Egress) always gets a
// network namespace of its own, even if Network is set too: the host's
// network is never an agent's. spec: V3 (README "The network")
func TestArgsEgressKeepsOwnNetwork(t *testing.T) {
	s := Spec{Network: true, Egress: &netpolicy.Policy{Public: true}, Argv: []string{"/bin/true"}}
	a, err := s.Args()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a, "--unshare-net") {
		t.Errorf("a net sandbox shares the host's network: %v", a)
	}
}
