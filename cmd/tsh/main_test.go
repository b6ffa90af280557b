package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

var tshBin string

// TestMain builds cmd/tsh once. When TSH_TEST_HELPER is set the test binary
// instead acts as a compiled tool: it prints its argv and exits with the
// status in TSH_TEST_EXIT.
func TestMain(m *testing.M) {
	if os.Getenv("TSH_TEST_HELPER") == "1" {
		fmt.Printf("argv=%q\n", os.Args)
		var code int
		fmt.Sscan(os.Getenv("TSH_TEST_EXIT"), &code)
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "tsh-e2e-")
	if err != nil {
		panic(err)
	}
	tshBin = filepath.Join(dir, "tsh")
	out, err := exec.Command("go", "build", "-o", tshBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build cmd/tsh: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type world struct {
	home, tools, pathDir, marker string
}

func newWorld(t *testing.T) world {
	t.Helper()
	base := t.TempDir()
	w := world{
		home:    filepath.Join(base, "home"),
		tools:   filepath.Join(base, "tools"),
		pathDir: filepath.Join(base, "hostbin"),
		marker:  filepath.Join(base, "marker"),
	}
	for _, d := range []string{w.home, w.tools, w.pathDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func script(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func meta(t *testing.T, dir, name, desc string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name+".d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".d", "tool.json"), []byte(fmt.Sprintf(`{"description":%q}`, desc)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// env is a standalone environment: CTX_HOME, CTX_PATH, and a host PATH that
// holds a decoy.
func (w world) env(extra ...string) []string {
	return append([]string{
		"CTX_HOME=" + w.home,
		"CTX_PATH=" + w.tools,
		"PATH=" + w.pathDir + ":/usr/bin:/bin",
		"HOME=" + w.home,
	}, extra...)
}

func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(tshBin, args...)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func noMarker(t *testing.T, w world) {
	t.Helper()
	if _, err := os.Stat(w.marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused tool ran: marker %s exists (%v)", w.marker, err)
	}
}

// spec: D5, K3 — a tool on the host PATH but not on CTX_PATH is not found (127).
func TestPathToolNotOnCtxPath(t *testing.T) {
	w := newWorld(t)
	script(t, w.pathDir, "decoy", "touch "+w.marker, 0o755)
	for _, args := range [][]string{{"call", "decoy"}, {"which", "decoy"}, {"load", "decoy"}} {
		_, stderr, code := run(t, w.env(), args...)
		if code != 127 || !strings.Contains(stderr, "refused by path") {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	noMarker(t, w)
}

// spec: K3 — .tshrc is data: $(...) is an error naming file:line and runs nothing.
func TestTshrcCommandSubstitution(t *testing.T) {
	w := newWorld(t)
	script(t, w.tools, "ok", "echo ran", 0o755)
	rc := filepath.Join(w.home, ".tshrc")
	if err := os.WriteFile(rc, []byte("# mine\nCTX_PATH=$(touch "+w.marker+")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"call", "ok"}, {"which", "ok"}} {
		stdout, stderr, code := run(t, w.env(), args...)
		if code != 2 || !strings.Contains(stderr, rc+":2:") || stdout != "" {
			t.Fatalf("%v: exit %d stdout %q stderr %q", args, code, stdout, stderr)
		}
	}
	noMarker(t, w)
	// A valid .tshrc comes first on the search path.
	rcTools := filepath.Join(w.home, "rctools")
	if err := os.Mkdir(rcTools, 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, rcTools, "ok", "echo rc", 0o755)
	if err := os.WriteFile(rc, []byte("CTX_PATH="+rcTools+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, _, code := run(t, w.env(), "call", "ok"); code != 0 || stdout != "rc\n" {
		t.Fatalf("tshrc first: %d %q", code, stdout)
	}
}

// spec: K4 — inside an agent view .tshrc is ignored; only CTX_PATH counts.
func TestAgentViewIgnoresTshrc(t *testing.T) {
	w := newWorld(t)
	script(t, w.tools, "ok", "echo ran", 0o755)
	if err := os.WriteFile(filepath.Join(w.home, ".tshrc"), []byte("CTX_PATH=$(touch "+w.marker+")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The agent view shows the agent's .d/ (policy, label); without it tsh fails closed.
	if err := os.MkdirAll(filepath.Join(w.home, "root", "agent", "coder.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := w.env("CTX_AGENT=coder", "CTX_AGENT_SUBJECT=0:coder:s", "CTX_ROOT="+filepath.Join(w.home, "root"))
	if stdout, stderr, code := run(t, env, "call", "ok"); code != 0 || stdout != "ran\n" {
		t.Fatalf("%d %q %q", code, stdout, stderr)
	}
	noMarker(t, w)
}

func TestCallScriptAndBinary(t *testing.T) {
	w := newWorld(t)
	script(t, w.tools, "echoargs", `printf '%s|' "$@"; echo; echo "secret=$TSH_SECRET"`, 0o755)
	script(t, w.tools, "fail", "echo out; echo err >&2; exit 7", 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.tools, "bin"), data, 0o755); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := run(t, w.env("TSH_SECRET=s3"), "call", "echoargs", "a b", "", "$HOME")
	if code != 0 || stdout != "a b||$HOME|\nsecret=s3\n" {
		t.Fatalf("script: %d %q %q", code, stdout, stderr)
	}
	// The tool's own exit status is tsh's.
	stdout, stderr, code = run(t, w.env(), "call", "fail")
	if code != 7 || stdout != "out\n" || stderr != "err\n" {
		t.Fatalf("exit status: %d %q %q", code, stdout, stderr)
	}
	// A binary gets the tool name as argv[0] and exits with its status.
	stdout, stderr, code = run(t, w.env("TSH_TEST_HELPER=1", "TSH_TEST_EXIT=3"), "call", "bin", "x", "y z")
	if code != 3 || stdout != `argv=["bin" "x" "y z"]`+"\n" {
		t.Fatalf("binary: %d %q %q", code, stdout, stderr)
	}
}

// Each refusing filesystem layer: exit 126, the layer named, the tool never ran.
func TestRefusingLayers(t *testing.T) {
	w := newWorld(t)
	target := script(t, w.home, "target", "touch "+w.marker, 0o755)
	if err := os.Symlink(target, filepath.Join(w.tools, "link")); err != nil {
		t.Fatal(err)
	}
	script(t, w.tools, "nox", "touch "+w.marker, 0o644)
	if err := os.Mkdir(filepath.Join(w.tools, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(w.tools, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tool, layer string }{
		{"link", "nofollow"}, // spec: V3 nofollow
		{"nox", "mode"},      // spec: V3 mode bits
		{"dir", "regular"},   // spec: V3 regular file
		{"fifo", "regular"},
	} {
		_, stderr, code := run(t, w.env(), "call", tc.tool)
		if code != 126 || !strings.Contains(stderr, "refused by "+tc.layer) {
			t.Fatalf("%s: exit %d %q", tc.tool, code, stderr)
		}
	}
	noMarker(t, w)
	stdout, _, code := run(t, w.env(), "list")
	if code != 0 || stdout != "" {
		t.Fatalf("list shows refused tools: %q", stdout)
	}
}

// spec: V3 noexec placement.
func TestNoExecMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a noexec tmpfs needs root; run as root to cover the noexec layer")
	}
	w := newWorld(t)
	if err := unix.Mount("tmpfs", w.tools, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Skipf("cannot mount tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(w.tools, unix.MNT_DETACH) })
	script(t, w.tools, "t", "touch "+w.marker, 0o755)
	_, stderr, code := run(t, w.env(), "call", "t")
	if code != 126 || !strings.Contains(stderr, "refused by noexec") {
		t.Fatalf("exit %d %q", code, stderr)
	}
	noMarker(t, w)
}

// spec: K5 — load/pin/unload change the tool context; `tsh context` prints it.
func TestContextCommands(t *testing.T) {
	w := newWorld(t)
	script(t, w.tools, "bash", "exit 0", 0o755)
	script(t, w.tools, "grep", "exit 0", 0o755)
	meta(t, w.tools, "bash", "Run a shell.")
	meta(t, w.tools, "grep", "Search text.")
	step := func(args ...string) {
		t.Helper()
		if _, stderr, code := run(t, w.env(), args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, stderr)
		}
	}
	context := func() string {
		t.Helper()
		out, stderr, code := run(t, w.env(), "context")
		if code != 0 {
			t.Fatalf("context: %d %s", code, stderr)
		}
		return out
	}
	if got := context(); got != "" {
		t.Fatalf("initial context %q", got)
	}
	step("load", "bash", "grep")
	step("pin", "grep")
	head := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n"
	want := head + "- bash: Run a shell. [" + w.tools + "/bash]\n- grep (pinned): Search text. [" + w.tools + "/grep]\n"
	if got := context(); got != want {
		t.Fatalf("after load+pin:\n%s\nwant:\n%s", got, want)
	}
	step("unload", "bash")
	step("unpin", "grep")
	want = head + "- grep: Search text. [" + w.tools + "/grep]\n"
	if got := context(); got != want {
		t.Fatalf("after unload+unpin:\n%q\nwant:\n%q", got, want)
	}
	if _, err := os.Stat(filepath.Join(w.home, "tsh", "tools.json")); err != nil {
		t.Fatal(err)
	}
	// A tool need not be loaded to be called (eviction never affects authority).
	if _, _, code := run(t, w.env(), "call", "bash"); code != 0 {
		t.Fatalf("call of an unloaded tool: %d", code)
	}
	out, _, _ := run(t, w.env(), "list")
	if out != "bash\tRun a shell.\ngrep\tSearch text.\n" {
		t.Fatalf("list %q", out)
	}
	out, _, _ = run(t, w.env(), "which", "grep")
	if out != w.tools+"/grep\n" {
		t.Fatalf("which %q", out)
	}
}

// Agent view: the tool context lives in the session named by CTX_AGENT_SUBJECT.
func TestAgentSessionState(t *testing.T) {
	w := newWorld(t)
	root := filepath.Join(w.home, "root")
	script(t, w.tools, "bash", "exit 0", 0o755)
	if err := os.MkdirAll(filepath.Join(root, "agent", "coder.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := w.env("CTX_ROOT="+root, "CTX_AGENT=coder", "CTX_AGENT_SUBJECT=1000:coder:default")
	if _, stderr, code := run(t, env, "pin", "bash"); code != 0 {
		t.Fatalf("%d %s", code, stderr)
	}
	p := filepath.Join(root, "home", "1000", "agent", "coder", "session", "default", "tools.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	bad := w.env("CTX_ROOT="+root, "CTX_AGENT=coder", "CTX_AGENT_SUBJECT=1000:coder:../../x")
	if _, _, code := run(t, bad, "load", "bash"); code != 2 {
		t.Fatalf("bad subject: %d", code)
	}
}

func TestUsage(t *testing.T) {
	w := newWorld(t)
	for _, args := range [][]string{{}, {"frob"}, {"call"}, {"pin", "a", "b"}} {
		if _, _, code := run(t, w.env(), args...); code != 2 {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
}

// The interactive prompt through a real PTY: list, a bare tool name, tab
// completion, history in $HOME/.tsh_history, ^C clears, ^D exits.
func TestPromptPTY(t *testing.T) {
	w := newWorld(t)
	script(t, w.tools, "hello", `echo "hello-ran:$*"`, 0o755)
	meta(t, w.tools, "hello", "Say hello.")
	script(t, w.pathDir, "hostonly", "touch "+w.marker, 0o755)
	script(t, w.tools, "ttycheck", ttyCheck, 0o755)
	script(t, w.tools, "ittycheck", ttyCheck, 0o755)
	interactiveMeta(t, w.tools, "ittycheck")
	cmd := exec.Command(tshBin)
	cmd.Env = w.env("TERM=xterm")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	// expect waits for s after the previous match, so a prompt seen means
	// tsh is back in raw mode before the next input is sent.
	from := 0
	expect := func(s string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			i := strings.Index(buf.String()[from:], s)
			mu.Unlock()
			if i >= 0 {
				from += i + len(s)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no %q in output:\n%s", s, buf.String())
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(f, s); err != nil {
			t.Fatal(err)
		}
	}
	expect("tsh> ")
	send("list\r")
	expect("hello\tSay hello.")
	send("hello a 'b c'\r") // spec: K6 — a bare visible tool name calls it
	expect("hello-ran:a b c")
	expect("tsh> ")
	send("hel\t") // ambiguous: help and hello are listed
	expect("hello  help")
	send("l\t x\r") // tab completion of a tool name
	expect("hello-ran:x")
	expect("tsh> ")
	send("hostonly\r") // spec: D5 — no fallback to host commands
	expect("[exit 127]")
	expect("tsh> ")
	// A tool runs without the controlling terminal (no
	// TIOCSTI into the prompt's input) unless it declared itself interactive.
	send("ttycheck a\r")
	expect("ctty-a:no")
	expect("tsh> ")
	send("ittycheck b\r")
	expect("ctty-b:yes")
	expect("tsh> ")
	send("garbage\x03list\r") // ^C clears the line
	send("\x04")              // ^D on an empty line exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tsh exit: %v", err)
	}
	<-done
	noMarker(t, w)
	hist, err := os.ReadFile(filepath.Join(w.home, ".tsh_history"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hist), "list\nhello a 'b c'\nhello  x\nhostonly\nttycheck a\nittycheck b\nlist\n") {
		t.Fatalf("history %q", hist)
	}
}

// ttyCheck says whether the tool has a controlling terminal.
const ttyCheck = `if (: </dev/tty) 2>/dev/null; then echo "ctty-$1:yes"; else echo "ctty-$1:no"; fi`

func interactiveMeta(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name+".d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".d", "tool.json"), []byte(`{"interactive":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tsh call from a terminal (tsh the session leader, as a PTY's program):
// the tool it becomes has no controlling terminal unless it is interactive.
func TestCallDetachesFromTerminal(t *testing.T) {
	w := newWorld(t)
	script(t, w.tools, "ttycheck", ttyCheck, 0o755)
	script(t, w.tools, "ittycheck", ttyCheck, 0o755)
	interactiveMeta(t, w.tools, "ittycheck")
	for name, want := range map[string]string{"ttycheck": "ctty-x:no", "ittycheck": "ctty-x:yes"} {
		cmd := exec.Command(tshBin, "call", name, "x")
		cmd.Env = w.env("TERM=xterm")
		f, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(f) // EIO once the tool exits
		f.Close()
		if err := cmd.Wait(); err != nil || !strings.Contains(string(out), want) {
			t.Errorf("tsh call %s on a terminal: %v %q, want %s", name, err, out, want)
		}
	}
}
