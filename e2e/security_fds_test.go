package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// inheritedBait opens what a client's shell could hand a daemon: a mode-600
// host file open for reading and appending, a pipe's write end, and a
// terminal (the slave of a PTY whose master the test reads, standing in for
// the user's own terminal).
type inheritedBait struct {
	secret, pipeR, pipeW, master, slave *os.File
	secretPath                          string
}

func newBait(t *testing.T) *inheritedBait {
	t.Helper()
	b := &inheritedBait{secretPath: filepath.Join(t.TempDir(), "host-secret")}
	if err := os.WriteFile(b.secretPath, []byte("HOST-SECRET-CONTENT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.secret, err = os.OpenFile(b.secretPath, os.O_RDWR|os.O_APPEND, 0); err != nil {
		t.Fatal(err)
	}
	if b.pipeR, b.pipeW, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	if b.master, b.slave, err = pty.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{b.secret, b.pipeR, b.pipeW, b.master, b.slave} {
			f.Close()
		}
	})
	return b
}

func (b *inheritedBait) files() []*os.File { return []*os.File{b.secret, b.pipeW, b.slave} }

// check asserts the host side after the attacks: the secret file unchanged,
// nothing written to the terminal, and — once the test's own copies are
// closed — the pipe at EOF (no process, daemon or sandbox, still holds it).
func (b *inheritedBait) check(t *testing.T, outputs ...string) {
	t.Helper()
	got, _ := os.ReadFile(b.secretPath)
	if string(got) != "HOST-SECRET-CONTENT\n" {
		t.Errorf("the mode-600 host file was changed through an inherited descriptor: %q", got)
	}
	for _, out := range outputs {
		if strings.Contains(out, "HOST-SECRET-CONTENT") {
			t.Errorf("the mode-600 host file was read through an inherited descriptor:\n%s", out)
		}
	}
	// Whatever reached the terminal comes out of the master before a
	// sentinel the test writes last.
	if _, err := b.slave.Write([]byte("SENTINEL\n")); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 256)
		for !strings.Contains(string(got), "SENTINEL") {
			n, err := b.master.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		seen <- string(got)
	}()
	select {
	case got := <-seen:
		if before, _, _ := strings.Cut(got, "SENTINEL"); before != "" {
			t.Errorf("something wrote to the user's terminal: %q", before)
		}
	case <-time.After(10 * time.Second):
		t.Error("the terminal's sentinel never arrived")
	}
	b.pipeW.Close()
	done := make(chan []byte, 1)
	go func() { d, _ := io.ReadAll(b.pipeR); done <- d }()
	select {
	case d := <-done:
		if len(d) != 0 {
			t.Errorf("something wrote into the inherited pipe: %q", d)
		}
	case <-time.After(10 * time.Second):
		t.Error("the inherited pipe's write end is still held open by another process")
		b.pipeR.Close()
	}
}

// checkOpen asserts the attack saw exactly stdin, stdout and stderr.
func checkOpen(t *testing.T, what, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "open="); ok {
			if v != "0,1,2" {
				t.Errorf("%s was started with descriptors %s, want 0,1,2:\n%s", what, v, out)
			}
			return
		}
	}
	t.Errorf("%s: no descriptor report:\n%s", what, out)
}

// TestSecurityInheritedDescriptors: a daemon started with extra open
// descriptors (a host file, a pipe, a terminal) hands none of them to a
// tool or an agent step.
func TestSecurityInheritedDescriptors(t *testing.T) {
	b := newBait(t)
	w := newWorld(t)
	w.files = b.files()
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("fd", map[string]string{"tools": "attack\n"})
	tr, _ := callTool(t, w, "fd", t.TempDir(), "attack", "fds")
	checkOpen(t, "a tool", tr.Content)
	r := w.ctx("", "", "agent", "send", "fd", "fds")
	if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "fds: 0->") {
		t.Fatalf("agent step: %d %q %s", r.code, r.stdout, r.stderr)
	}
	for _, f := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(r.stdout), "fds: ")) {
		n, _, _ := strings.Cut(f, "->")
		if fd, _ := strconv.Atoi(n); fd > 2 {
			t.Errorf("an agent step was started with descriptor %s", f)
		}
	}
	if !strings.Contains(w.log.String(), "closed inherited descriptors") {
		t.Errorf("the daemon did not log what it closed:\n%s", w.log)
	}
	w.stop()
	b.check(t, tr.Content, r.stdout)
}

// TestSecurityAutostartDescriptors: the path of the original report — a
// client run from a shell with extra descriptors auto-starts the daemon;
// the tool that daemon runs sees none of them.
func TestSecurityAutostartDescriptors(t *testing.T) {
	b := newBait(t)
	w := newWorld(t)
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	if err := os.MkdirAll(w.run, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, e := range w.env() {
		if e != "CTX_NO_AUTOSTART=1" {
			env = append(env, e)
		}
	}
	create := exec.Command(w.ctxBin, "agent", "create", "fd", "--exec", binDir+"/testagent")
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("create: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(w.root, "agent", "fd.d", "tools"), []byte("attack\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopDaemonOf(t, w.root) })
	send := exec.Command(w.ctxBin, "agent", "send", "fd", "--json", "tool", "attack", "fds")
	send.Env = env
	send.Dir = t.TempDir()
	send.ExtraFiles = b.files()
	out, err := send.Output()
	if err != nil {
		t.Fatalf("send (auto-starting the daemon): %v\n%s", err, out)
	}
	content := ""
	for _, l := range strings.Split(string(out), "\n") {
		var f struct{ Type, Content string }
		if json.Unmarshal([]byte(l), &f) == nil && f.Type == "tool_result" {
			content = f.Content
		}
	}
	checkOpen(t, "a tool of an auto-started daemon", content)
	stopDaemonOf(t, w.root)
	b.check(t, string(out))
}

// stopDaemonOf ends the daemon serving root (found by its environment) and
// waits for it to exit.
func stopDaemonOf(t *testing.T, root string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "daemon") || !strings.Contains(string(env), "CTX_ROOT="+root+"\x00") {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
