// Package e2e holds black-box tests: TestMain builds the real binaries once,
// and each test drives its own daemon on temporary CTX_ROOT and
// CTX_RUNTIME_DIR through real sockets, bwrap sandboxes, signals and files.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/egress"
)

var binDir string

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: bwrap is required (apt-get install bubblewrap)")
		return 1, nil
	}
	dir, err := os.MkdirTemp("", "ctx-e2e-bin")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	binDir = dir
	build := func(out string, tags string, pkgs ...string) error {
		args := []string{"build", "-o", out}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %v: %v\n%s", pkgs, err, b)
		}
		return nil
	}
	if err := build(dir+"/", "", "./cmd/ctx", "./cmd/ctxd", "./cmd/ctx-cluster", "./cmd/ctx-etcd-test", "./cmd/ctxterm", "./cmd/tsh", "./cmd/agent.update", "./examples/demo-agent", "./e2e/testagent", "./e2e/probe", "./e2e/attack", "./e2e/mcpfake", "./e2e/oneshot"); err != nil {
		return 1, err
	}
	if err := os.MkdirAll(dir+"/fault", 0o755); err != nil {
		return 1, err
	}
	// fault/ holds ctxd built with the fault hooks (ctxfault) beside the
	// ordinary client: `ctx daemon` there execs the fault-injecting daemon.
	if err := build(dir+"/fault/ctxd", "ctxfault", "./cmd/ctxd"); err != nil {
		return 1, err
	}
	for _, b := range []string{"ctx", "tsh", "ctxterm"} {
		if err := os.Link(dir+"/"+b, dir+"/fault/"+b); err != nil {
			return 1, err
		}
	}
	// std/ holds ctx with ctxtools beside it: a daemon started from there
	// installs the standard toolset; other worlds do not get it.
	if err := os.MkdirAll(dir+"/std", 0o755); err != nil {
		return 1, err
	}
	for _, b := range []string{"ctx", "ctxd", "tsh", "ctxterm", "agent.update"} {
		if err := os.Link(dir+"/"+b, dir+"/std/"+b); err != nil {
			return 1, err
		}
	}
	if err := build(dir+"/std/ctxtools", "", "./cmd/ctxtools"); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// world is one isolated ctx installation: its own roots and daemon.
type world struct {
	t      testing.TB
	root   string
	run    string
	ctxBin string
	daemon *exec.Cmd
	log    *syncBuffer
	extra  []string
	files  []*os.File // descriptors the daemon inherits (fds 3, 4, …)
	exited chan struct{}
}

func newWorld(t testing.TB) *world {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "ctxe2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &world{t: t, root: base + "/root", run: base + "/run", ctxBin: binDir + "/ctx"}
	// Last, after the daemon stopped: no run cgroup of this root outlives
	// the test, even one whose daemon was killed and never restarted.
	t.Cleanup(func() {
		m := cgroup.New(context.Background(), os.Getuid(), w.root, nil)
		_, _ = m.Sweep()
		m.Release()
	})
	t.Cleanup(w.stopQuiet)
	return w
}

// newStdWorld is a world whose daemon installs the standard toolset
// from the ctxtools beside its ctx.
func newStdWorld(t testing.TB) *world {
	w := newWorld(t)
	w.ctxBin = binDir + "/std/ctx"
	return w
}

// workspace makes a workspace directory that outlives the daemon: it is
// removed with the world's base after the daemon stopped, so nothing the
// daemon still does there (placeholders going) races a test's cleanup.
func (w *world) workspace() string {
	w.t.Helper()
	base := filepath.Dir(w.root)
	if err := os.MkdirAll(base, 0o755); err != nil {
		w.t.Fatal(err)
	}
	d, err := os.MkdirTemp(base, "ws")
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w *world) env(extra ...string) []string {
	return append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + filepath.Dir(w.root),
		"CTX_ROOT=" + w.root,
		"CTX_RUNTIME_DIR=" + w.run,
		"CTX_NO_AUTOSTART=1",
		"CTX_CANCEL_GRACE=500ms",
		// Every daemon a test starts dials only loopback for its sandboxes'
		// network: a broken address check fails a test instead of sending
		// a packet anywhere else (the workplace allows loopback only).
		egress.EnvLoopbackOnly + "=1",
	}, append(w.extra, extra...)...)
}

// start runs `ctx daemon` and waits until it answers ping.
func (w *world) start(extra ...string) {
	w.t.Helper()
	w.daemon = exec.Command(w.ctxBin, "daemon")
	w.daemon.Env = w.env(extra...)
	w.log = &syncBuffer{}
	w.daemon.Stdout, w.daemon.Stderr = w.log, w.log
	w.daemon.ExtraFiles = w.files
	if err := w.daemon.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.exited = make(chan struct{})
	cmd, done := w.daemon, w.exited
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", w.run+"/system.sock"); err == nil {
			c.Write([]byte("{\"op\":\"ping\"}\n"))
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil && strings.Contains(line, `"pong"`) {
				return
			}
		}
		select {
		case <-done:
			w.t.Fatalf("daemon exited at start:\n%s", w.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
	w.t.Fatalf("daemon did not answer ping:\n%s", w.log)
}

// stop sends SIGTERM and waits.
func (w *world) stop() {
	w.t.Helper()
	if w.daemon == nil {
		return
	}
	_ = w.daemon.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(15 * time.Second):
		w.daemon.Process.Kill()
		w.t.Fatalf("daemon did not stop on SIGTERM:\n%s", w.log)
	}
	w.daemon = nil
}

func (w *world) stopQuiet() {
	if w.daemon != nil {
		_ = w.daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.exited:
		case <-time.After(15 * time.Second):
			w.daemon.Process.Kill()
		}
		if w.t.Failed() {
			w.t.Logf("daemon log:\n%s", w.log)
		}
		w.daemon = nil
	}
}

// kill sends SIGKILL to the daemon.
func (w *world) kill() {
	w.t.Helper()
	_ = w.daemon.Process.Kill()
	<-w.exited
	w.daemon = nil
}

type result struct {
	stdout, stderr string
	code           int
}

// ctx runs the CLI with args in dir ("" = a temp dir).
func (w *world) ctx(dir string, stdin string, args ...string) result {
	w.t.Helper()
	cmd := exec.Command(w.ctxBin, args...)
	cmd.Env = w.env()
	if dir == "" {
		dir = w.t.TempDir()
	}
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	return w.runCmd(cmd)
}

// runCmd runs cmd to its end: its output and exit code (a start failure
// fails the test).
func (w *world) runCmd(cmd *exec.Cmd) result {
	w.t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return result{o.String(), e.String(), code}
}

func (w *world) mustCtx(args ...string) string {
	w.t.Helper()
	r := w.ctx("", "", args...)
	if r.code != 0 {
		w.t.Fatalf("ctx %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// agent creates an executable agent running testagent, with control files.
func (w *world) agent(name string, controls map[string]string) {
	w.t.Helper()
	w.mustCtx("agent", "create", name, "--exec", binDir+"/testagent")
	for k, v := range controls {
		if err := os.WriteFile(filepath.Join(w.root, "agent", name+".d", k), []byte(v), 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
}

// tool installs a system tool object.
func (w *world) tool(name, script string) {
	w.t.Helper()
	dir := filepath.Join(w.root, "tool")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) sessionDir(agent, session string) string {
	return filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", agent, "session", session)
}

func (w *world) events(agent, session string) []frame {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.sessionDir(agent, session), "events.jsonl"))
	if err != nil {
		w.t.Fatal(err)
	}
	var out []frame
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var f frame
		if err := json.Unmarshal(l, &f); err != nil {
			w.t.Fatalf("events.jsonl line %q: %v", l, err)
		}
		f.raw = string(l)
		out = append(out, f)
	}
	return out
}

// frame is a decoded frame, loosely typed for assertions.
type frame struct {
	Type      string   `json:"type"`
	Session   string   `json:"session"`
	Seq       int64    `json:"seq"`
	Run       string   `json:"run"`
	ID        string   `json:"id"`
	Op        string   `json:"op"`
	Text      string   `json:"text"`
	CallID    string   `json:"call_id"`
	Name      string   `json:"name"`
	Args      []string `json:"args"`
	Status    string   `json:"status"`
	Content   string   `json:"content"`
	Truncated bool     `json:"truncated"`
	Code      string   `json:"code"`
	Message   string   `json:"message"`
	Decision  string   `json:"decision"`
	Layer     string   `json:"layer"`
	ActiveRun *string  `json:"active_run"`
	Replay    bool     `json:"replay"`
	raw       string
}

// client is a raw socket client.
type client struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

// etcReady waits until the daemon's /etc snapshot exists. An agent actor
// builds it in the background when it starts, and a sandbox made before
// then binds /etc file by file (18 mounts more). The e2e runtime directory
// lies on the test machine's disk, where the build takes 0.4–0.8 s (8 ms
// on a tmpfs /run/user); a benchmark of the steady state waits for it, as
// a daemon that has run for a second would have it.
func (w *world) etcReady(tb testing.TB) {
	tb.Helper()
	waitUntil(10*time.Second, func() bool { _, err := os.Readlink(filepath.Join(w.run, "etc")); return err == nil })
	if _, err := os.Readlink(filepath.Join(w.run, "etc")); err != nil {
		tb.Fatalf("no /etc snapshot after 10 s: %v", err)
	}
}

func (w *world) dial(agent string) *client {
	w.t.Helper()
	p := filepath.Join(w.run, "agent", agent+".sock")
	var c net.Conn
	var err error
	for i := 0; i < 100; i++ {
		if c, err = net.Dial("unix", p); err == nil {
			break
		}
		time.Sleep(30 * time.Millisecond)
	}
	if err != nil {
		w.t.Fatalf("dial %s: %v", p, err)
	}
	cl := &client{t: w.t, c: c, r: bufio.NewReaderSize(c, 1<<20)}
	w.t.Cleanup(func() { c.Close() })
	return cl
}

func (c *client) send(v any) {
	c.t.Helper()
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		b, _ = json.Marshal(v)
	}
	if _, err := c.c.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) next(timeout time.Duration) (frame, error) {
	c.c.SetReadDeadline(time.Now().Add(timeout))
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		return frame{}, fmt.Errorf("bad frame %q: %w", line, err)
	}
	f.raw = string(bytes.TrimSpace(line))
	return f, nil
}

func (c *client) must(timeout time.Duration) frame {
	c.t.Helper()
	f, err := c.next(timeout)
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return f
}

// until reads frames until one of type typ (inclusive).
func (c *client) until(typ string, timeout time.Duration) []frame {
	c.t.Helper()
	var out []frame
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.next(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting for %s: %v (got %v)", typ, err, types(out))
		}
		out = append(out, f)
		if f.Type == typ {
			return out
		}
	}
}

// follow sends req on a new connection and reads its frames to done. A
// connection the daemon drops for falling behind (slow_client, or just
// closed when even that did not fit) is replaced by one sending the same
// request, which replays what was recorded and follows the run (P4), as
// ctx agent send does; frames seen before are skipped by seq.
func (w *world) follow(agent string, req map[string]any, timeout time.Duration) []frame {
	w.t.Helper()
	var out []frame
	var last int64
	deadline := time.Now().Add(timeout)
	for attempt := 0; attempt < 5; attempt++ {
		c := w.dial(agent)
		c.send(req)
		for {
			f, err := c.next(time.Until(deadline))
			if err != nil || (f.Type == "error" && f.Run == "" && f.Code == "slow_client") {
				if time.Now().After(deadline) {
					w.t.Fatalf("waiting for done: %v (got %v)", err, types(out))
				}
				break // dropped: follow again
			}
			if f.Seq != 0 && f.Seq <= last {
				continue
			}
			last = max(last, f.Seq)
			out = append(out, f)
			if f.Type == "done" {
				return out
			}
		}
		c.c.Close()
	}
	w.t.Fatalf("dropped five times (got %v)", types(out))
	return nil
}

func types(fs []frame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Type)
	}
	return out
}

func sendReq(id, input string, extra ...any) map[string]any {
	m := map[string]any{"op": "send", "id": id, "session": "default", "input": input}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// procsWith lists host pids whose command line contains marker.
func procsWith(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = context.Background

// syncBuffer is a bytes.Buffer safe for the daemon's output copier and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
