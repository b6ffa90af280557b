package ctlsock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
)

// toolBin is the real agent.update binary, built once into a directory any
// uid can read (the other-uid test runs it as nobody).
var toolBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctlsock-bin-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	toolBin = filepath.Join(dir, "agent.update")
	if out, err := exec.Command("go", "build", "-o", toolBin, "github.com/cortexfs/ctx/cmd/agent.update").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building agent.update: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

var self = launchroot.Identity{UID: os.Getuid(), Agent: "coder", Session: "default", Run: "run-1"}

// env is one daemon's worth of control socket: a CTX_ROOT with the agent
// coder defined, a registry, a ledger file and a served socket.
type env struct {
	t      *testing.T
	lay    layout.Layout
	reg    *launchroot.Registry
	sock   string
	cancel context.CancelFunc
	done   chan error
	ledger *Ledger
	gate   Gate // the server's gate (nil: none)
}

func newEnv(t *testing.T, sockDir string) *env {
	t.Helper()
	root := t.TempDir()
	if sockDir == "" {
		sockDir = t.TempDir()
	}
	lay := layout.Layout{Root: root, Runtime: sockDir, UID: os.Getuid()}
	if err := os.MkdirAll(lay.AgentControl("coder"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lay.AgentObject("coder"), []byte("a coder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, lay: lay, reg: reg, sock: lay.ControlSocket()}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	e.t.Helper()
	l, err := OpenLedger(LedgerPath(e.lay))
	if err != nil {
		e.t.Fatal(err)
	}
	ln, err := Listen(e.sock)
	if err != nil {
		e.t.Fatal(err)
	}
	srv := &Server{Registry: e.reg, Layout: e.lay, Owner: os.Getuid(), Ledger: l, Log: slog.New(slog.NewTextHandler(testWriter{e.t}, nil)), Gate: e.gate}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done, e.ledger = cancel, make(chan error, 1), l
	go func() { e.done <- srv.Serve(ctx, ln) }()
}

// stop cancels Serve and waits for it, as a daemon shutdown does.
func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		e.t.Error("Serve did not return after cancel")
	}
	e.ledger.Close()
	e.cancel = nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(b, "\n"))
	return len(b), nil
}

// launch runs argv as the child of a launch root registered through the
// real --block-fd sequence (a shell stands in for bwrap), with the tool
// environment, and returns the parsed answer and exit code.
func (e *env) launch(ident launchroot.Identity, argv []string, stdin string, extraEnv ...string) (Response, int) {
	e.t.Helper()
	l, err := e.reg.Prepare(ident, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	// The trailing exit keeps sh from exec'ing argv: argv is a grandchild
	// of the launch root's parent, a child of the root.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read x <&3; exec 3<&-; "$0" "$@"; exit $?`}, argv...)...)
	cmd.ExtraFiles = l.ExtraFiles
	cmd.Env = append([]string{
		"PATH=/usr/bin:/bin",
		"CTX_CONTROL_SOCKET=" + e.sock,
		"CTX_AGENT=coder",
		"CTX_AGENT_SUBJECT=" + strconv.Itoa(os.Getuid()) + ":coder:default",
		"CTX_RUN=run-1",
	}, extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		l.Abort()
		e.t.Fatal(err)
	}
	release, err := l.Started(cmd.Process, nil)
	if err != nil {
		_ = cmd.Wait()
		l.Abort()
		e.t.Fatal(err)
	}
	defer release()
	err = cmd.Wait()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	var resp Response
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		e.t.Fatalf("answer %q (stderr %q): %v", stdout.String(), stderr.String(), err)
	}
	return resp, code
}

// update runs the agent.update tool inside a registered launch root.
func (e *env) update(args []string, content string, extraEnv ...string) (Response, int) {
	e.t.Helper()
	return e.launch(self, append([]string{toolBin}, args...), content, extraEnv...)
}

func (e *env) control(name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(e.lay.AgentControl("coder"), name))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b), true
}

func wantErrno(t *testing.T, what string, resp Response, code int, errno string) {
	t.Helper()
	if resp.OK || resp.Errno != errno || code != 1 {
		t.Fatalf("%s: got %+v exit %d, want %s exit 1", what, resp, code, errno)
	}
}

func wantOK(t *testing.T, what string, resp Response, code int) {
	t.Helper()
	if !resp.OK || code != 0 {
		t.Fatalf("%s: got %+v exit %d, want ok", what, resp, code)
	}
}

// TestUpdateReplayAndRestart: success writes the file atomically; a replay
// answers EALREADY without writing, also after a server restart.
// spec: U1, U4, U5
func TestUpdateReplayAndRestart(t *testing.T) {
	e := newEnv(t, "")
	resp, code := e.update([]string{"--control", "system.md", "--request-id", "tool-1"}, "be brief\n")
	wantOK(t, "first update", resp, code)
	if got, _ := e.control("system.md"); got != "be brief\n" {
		t.Fatalf("system.md %q", got)
	}
	path := filepath.Join(e.lay.AgentControl("coder"), "system.md")
	st1, _ := os.Stat(path)
	if st1.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st1.Mode())
	}
	if ents, _ := os.ReadDir(e.lay.AgentControl("coder")); len(ents) != 1 {
		t.Fatalf("temp files left: %v", ents)
	}

	resp, code = e.update([]string{"--control", "system.md", "--request-id", "tool-1"}, "replayed\n")
	wantErrno(t, "replay", resp, code, EALREADY)
	st2, _ := os.Stat(path)
	if got, _ := e.control("system.md"); got != "be brief\n" || !os.SameFile(st1, st2) {
		t.Fatalf("replay wrote: %q", got)
	}

	e.stop()
	e.start()
	resp, code = e.update([]string{"--control", "system.md", "--request-id", "tool-1"}, "after restart\n")
	wantErrno(t, "replay after restart", resp, code, EALREADY)
	st3, _ := os.Stat(path)
	if got, _ := e.control("system.md"); got != "be brief\n" || !os.SameFile(st1, st3) {
		t.Fatalf("replay after restart wrote: %q", got)
	}

	// Fresh ids (the tool's default) keep working; the file is replaced.
	resp, code = e.update([]string{"--control", "system.md"}, "be thorough\n")
	wantOK(t, "fresh id", resp, code)
	resp, code = e.update([]string{"--control", "prompt.template.md", "--file", writeTemp(t, "{{input}}\n")}, "")
	wantOK(t, "create prompt.template.md from --file", resp, code)
	if got, _ := e.control("system.md"); got != "be thorough\n" {
		t.Fatalf("system.md %q", got)
	}
	if got, _ := e.control("prompt.template.md"); got != "{{input}}\n" {
		t.Fatalf("prompt.template.md %q", got)
	}
	b, err := os.ReadFile(LedgerPath(e.lay))
	if err != nil || bytes.Count(b, []byte(`"event":"consume"`)) != 3 {
		t.Fatalf("ledger: %v\n%s", err, b)
	}
}

// TestIdentityMismatchRefused: agent, session and run must be the
// capability's own; a refused frame is not authorized and does not consume
// its id. spec: U3, U5
func TestIdentityMismatchRefused(t *testing.T) {
	e := newEnv(t, "")
	for _, args := range [][]string{{"--agent", "other"}, {"--session", "other"}, {"--run", "run-2"}} {
		resp, code := e.update(append(args, "--control", "system.md", "--request-id", "id-x"), "hijack\n")
		wantErrno(t, fmt.Sprint(args), resp, code, EPERM)
	}
	// The environment is only a claim too.
	resp, code := e.update([]string{"--control", "system.md", "--request-id", "id-x"}, "hijack\n", "CTX_AGENT=other")
	wantErrno(t, "CTX_AGENT=other", resp, code, EPERM)
	if _, ok := e.control("system.md"); ok {
		t.Fatal("refused update wrote system.md")
	}
	resp, code = e.update([]string{"--control", "system.md", "--request-id", "id-x"}, "mine\n")
	wantOK(t, "own identity, same id", resp, code)
}

// TestContentAndControlValidation: control name, size, NUL and UTF-8; each
// failure still consumes its id. spec: U4, U5
func TestContentAndControlValidation(t *testing.T) {
	e := newEnv(t, "")
	cases := []struct {
		name, control, content, errno string
	}{
		{"policy", "policy", "x", EINVAL},
		{"path escape", "../coder/system.md", "x", EINVAL},
		{"8 KiB + 1", "system.md", strings.Repeat("a", MaxContent+1), E2BIG},
		{"NUL", "system.md", "a\x00b", EINVAL},
		{"invalid UTF-8", "system.md", "ok \xff\xfe", EINVAL},
		{"truncated rune", "system.md", "é"[:1], EINVAL},
	}
	for i, c := range cases {
		id := "val-" + strconv.Itoa(i)
		resp, code := e.update([]string{"--control", c.control, "--request-id", id}, c.content)
		wantErrno(t, c.name, resp, code, c.errno)
		resp, code = e.update([]string{"--control", "system.md", "--request-id", id}, "valid")
		wantErrno(t, c.name+": id consumed by the failure", resp, code, EALREADY)
	}
	if _, ok := e.control("system.md"); ok {
		t.Fatal("a refused update wrote system.md")
	}
	if _, err := os.Stat(filepath.Join(e.lay.AgentControl("coder"), "policy")); err == nil {
		t.Fatal("policy written")
	}
	full := strings.Repeat("é", MaxContent/2)
	resp, code := e.update([]string{"--control", "system.md"}, full)
	wantOK(t, "exactly 8 KiB", resp, code)
	if got, _ := e.control("system.md"); got != full {
		t.Fatal("8 KiB content differs")
	}
}

// TestNotDescendantRefused: the same binary, started by the test but not
// under any registered launch root. spec: U2
func TestNotDescendantRefused(t *testing.T) {
	e := newEnv(t, "")
	cmd := exec.Command(toolBin, "--control", "system.md")
	cmd.Env = []string{"CTX_CONTROL_SOCKET=" + e.sock, "CTX_AGENT=coder", "CTX_AGENT_SUBJECT=0:coder:default", "CTX_RUN=run-1"}
	cmd.Stdin = strings.NewReader("x")
	out, err := cmd.Output()
	var resp Response
	_ = json.Unmarshal(out, &resp)
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 || resp.Errno != EPERM {
		t.Fatalf("got %q %v", out, err)
	}
	if _, ok := e.control("system.md"); ok {
		t.Fatal("wrote system.md")
	}
}

// TestOtherUIDRefused: a descendant of a registered root running as
// another uid is refused by SO_PEERCRED (no root or other-uid exception).
// The socket is made world-connectable for this test only, so that the
// peer-credential check, not the file mode, is what refuses. spec: U2, A4
func TestOtherUIDRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	uid, gid := otherUser(t)
	dir, err := os.MkdirTemp("", "ctlsock-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, dir)
	if err := os.Chmod(filepath.Dir(e.sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	argv := []string{setpriv, "--reuid=" + uid, "--regid=" + gid, "--clear-groups", toolBin, "--control", "system.md"}
	resp, code := e.launch(self, argv, "other uid\n")
	wantErrno(t, "other uid", resp, code, EPERM)
	// The server's own uid check refused it, before the launch-root walk
	// (which would refuse too, with another message): each guard is
	// tested alone.
	if resp.Message != "peer uid is not the owner" {
		t.Errorf("refused by %q, not by the server's uid check", resp.Message)
	}
	if _, ok := e.control("system.md"); ok {
		t.Fatal("wrote system.md")
	}
	// The same chain as the owner passes: only the uid differed.
	argv = []string{setpriv, "--reuid=0", "--regid=0", "--clear-groups", toolBin, "--control", "system.md"}
	resp, code = e.launch(self, argv, "owner\n")
	wantOK(t, "owner through setpriv", resp, code)
}

// otherUser returns nobody's ids, creating a user with useradd -M if no
// such user exists.
func otherUser(t *testing.T) (string, string) {
	u, err := user.Lookup("nobody")
	if err != nil {
		if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", "ctx-test-other").CombinedOutput(); err != nil {
			t.Skipf("no other user and useradd failed: %v %s", err, out)
		}
		if u, err = user.Lookup("ctx-test-other"); err != nil {
			t.Skip(err)
		}
	}
	return u.Uid, u.Gid
}

// rawEnv registers the test process itself as a launch root, so that the
// test can send hand-made frames.
func rawEnv(t *testing.T) *env {
	e := newEnv(t, "")
	release, err := e.reg.Register(os.Getpid(), self)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return e
}

func (e *env) raw(frame []byte) Response {
	e.t.Helper()
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(frame); err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		e.t.Fatal(err)
	}
	_ = c.(*net.UnixConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		e.t.Fatalf("no answer: %v", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// TestRawFrames: what the tool never sends. spec: U1, U2, U4
func TestRawFrames(t *testing.T) {
	e := rawEnv(t)
	base := `"op":"agent.update","agent":"coder","session":"default","run":"run-1","control":"system.md"`
	cases := []struct {
		name, frame, errno string
	}{
		{"legacy token ignored", `{` + base + `,"request_id":"r1","token":"anything","content":"tok"}`, ""},
		{"surrogate pair", `{` + base + `,"request_id":"r2","content":"\ud83d\ude00"}`, ""},
		{"no trailing newline is still a frame", `{` + base + `,"request_id":"r3","content":"x"}`, ""},
		{"lone high surrogate", `{` + base + `,"request_id":"r4","content":"a\ud800b"}`, EINVAL},
		{"lone low surrogate", `{` + base + `,"request_id":"r5","content":"\udc00"}`, EINVAL},
		{"escaped NUL", `{` + base + `,"request_id":"r6","content":"\u0000"}`, EINVAL},
		{"content missing", `{` + base + `,"request_id":"r7"}`, EINVAL},
		{"content not a string", `{` + base + `,"request_id":"r8","content":5}`, EINVAL},
		{"unknown field", `{` + base + `,"request_id":"r9","content":"x","extra":1}`, EINVAL},
		{"unknown op", `{"op":"agent.delete","request_id":"r10","agent":"coder","session":"default","run":"run-1","control":"system.md","content":"x"}`, EINVAL},
		{"bad request id", `{` + base + `,"request_id":"a b","content":"x"}`, EINVAL},
		{"empty request id", `{` + base + `,"request_id":"","content":"x"}`, EINVAL},
		{"not json", `hello`, EINVAL},
		{"trailing data", `{` + base + `,"request_id":"r11","content":"x"} {}`, EINVAL},
	}
	for _, c := range cases {
		frame := c.frame
		if !strings.HasPrefix(c.name, "no trailing") {
			frame += "\n"
		}
		resp := e.raw([]byte(frame))
		if c.errno == "" && !resp.OK || c.errno != "" && resp.Errno != c.errno {
			t.Errorf("%s: got %+v, want %q", c.name, resp, c.errno)
		}
	}
	if got, _ := e.control("system.md"); got != "x" {
		t.Errorf("system.md %q", got)
	}
	big := `{` + base + `,"request_id":"big","content":"` + strings.Repeat("a", MaxFrame) + `"}` + "\n"
	if resp := e.raw([]byte(big)); resp.Errno != E2BIG {
		t.Errorf("frame > 64 KiB: %+v", resp)
	}
}

// TestConcurrentSameID: one id sent on many connections at once is
// applied exactly once. spec: U5
func TestConcurrentSameID(t *testing.T) {
	e := rawEnv(t)
	frame := []byte(`{"op":"agent.update","request_id":"same","agent":"coder","session":"default","run":"run-1","control":"system.md","content":"once"}` + "\n")
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[string]int{}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.raw(frame)
			mu.Lock()
			count[r.Errno]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if count[""] != 1 || count[EALREADY] != 15 {
		t.Fatalf("answers %v", count)
	}
}

// TestFromInsideSandbox: the tool inside a real bwrap sandbox, with the
// socket bound at /run/cortexfs/control.sock and the default
// CTX_CONTROL_SOCKET; the peer is two pid-namespace hops below bwrap.
// spec: U2
func TestFromInsideSandbox(t *testing.T) {
	bw, err := bwrap.Find("")
	if err != nil {
		t.Skip("bwrap not installed:", err)
	}
	e := newEnv(t, "")
	run := func(args ...string) (Response, int) {
		spec := bwrap.Spec{
			System: true,
			Dirs:   []string{"/run/cortexfs", "/ctx/tool"},
			Mounts: []bwrap.Mount{
				{Src: e.sock, Dst: layout.SandboxControlSocket},
				{Src: toolBin, Dst: "/ctx/tool/agent.update"},
			},
			Env: map[string]string{
				"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": strconv.Itoa(os.Getuid()) + ":coder:default", "CTX_RUN": "run-1",
			},
			Argv: append([]string{"/bin/sh", "-c", `echo sandboxed | /ctx/tool/agent.update "$@"; exit $?`, "sh"}, args...),
		}
		envf, err := spec.PassEnv() // descriptor 3; the block pipe follows
		if err != nil {
			t.Fatal(err)
		}
		defer envf.Close()
		l, err := e.reg.Prepare(self, spec.Files)
		if err != nil {
			t.Fatal(err)
		}
		spec.BlockFD = l.BlockFD
		a, err := spec.Args()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bw, a...)
		cmd.ExtraFiles = l.ExtraFiles
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			l.Abort()
			t.Fatal(err)
		}
		release, err := l.Started(cmd.Process, nil)
		if err != nil {
			_ = cmd.Wait()
			l.Abort()
			t.Fatal(err)
		}
		defer release()
		err = cmd.Wait()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		var resp Response
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("answer %q stderr %q: %v", out.String(), errb.String(), err)
		}
		return resp, code
	}
	resp, code := run("--control", "system.md", "--request-id", "sbx-1")
	wantOK(t, "inside sandbox", resp, code)
	if got, _ := e.control("system.md"); got != "sandboxed\n" {
		t.Fatalf("system.md %q", got)
	}
	resp, code = run("--control", "system.md", "--request-id", "sbx-1")
	wantErrno(t, "replay inside sandbox", resp, code, EALREADY)
	resp, code = run("--control", "policy")
	wantErrno(t, "policy inside sandbox", resp, code, EINVAL)
}

// TestServeStopsWithIdleConnection: cancelling Serve ends a connection
// that never sends a byte; goleak (TestMain) proves nothing is left.
func TestServeStopsWithIdleConnection(t *testing.T) {
	e := rawEnv(t)
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // let the server block in read
	start := time.Now()
	e.stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("stop took %v", d)
	}
	if _, err := os.Stat(e.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("connection not closed: %v", err)
	}
}

// TestListenHygiene: a live server is not displaced; a stale socket file
// is replaced; the socket is 0600.
func TestListenHygiene(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if _, err := Listen(path); err == nil {
		t.Fatal("displaced a live server")
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	ln, err = Listen(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil {
		t.Fatal("removed a regular file")
	}
}

// TestLedgerReloadTornAndCorrupt. spec: U5
func TestLedgerReloadTornAndCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "ledger.jsonl")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Consume(LedgerRecord{RequestID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Consume(LedgerRecord{RequestID: "a"}); !errors.Is(err, ErrSeen) {
		t.Fatalf("second consume: %v", err)
	}
	l.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"request_id":"torn","ev`)
	f.Close()
	l, err = OpenLedger(path)
	if err != nil {
		t.Fatalf("torn last line: %v", err)
	}
	if !l.Seen("a") || l.Seen("torn") {
		t.Fatal("reload wrong")
	}
	if err := l.Consume(LedgerRecord{RequestID: "b"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, err = OpenLedger(path)
	if err != nil || !l.Seen("b") {
		t.Fatalf("after torn line and append: %v", err)
	}
	l.Close()

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("garbage\n{\"request_id\":\"x\"}\n"), 0o600)
	if _, err := OpenLedger(bad); err == nil {
		t.Fatal("corrupt ledger accepted")
	}
}

// TestEncodeRequest: valid text round-trips through encoding/json; invalid
// UTF-8 is sent raw, not replaced.
func TestEncodeRequest(t *testing.T) {
	req := Request{Op: OpAgentUpdate, RequestID: "r", Agent: "a", Session: "s", Run: "r1", Control: "system.md", Content: "q\"\\\n\t\x01\x7f é 😀 \u2028"}
	var back Request
	if err := json.Unmarshal(EncodeRequest(req), &back); err != nil || back != req {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	req.Content = "\xff"
	if !bytes.Contains(EncodeRequest(req), []byte("\"content\":\"\xff\"")) {
		t.Fatalf("invalid byte not kept raw: %q", EncodeRequest(req))
	}
}

func writeTemp(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "content")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
