package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// floodWorld is a started world with the agent fl (spew N floods a run).
func floodWorld(t *testing.T) *world {
	w := newWorld(t)
	w.start()
	w.agent("fl", nil)
	return w
}

func drops(w *world) int { return strings.Count(w.log.String(), "dropped a client") }

func starts(w *world, agent string, session ...string) int {
	s := "default"
	if len(session) > 0 {
		s = session[0]
	}
	if _, err := os.Stat(w.sessionDir(agent, s) + "/events.jsonl"); err != nil {
		return 0
	}
	n := 0
	for _, f := range w.events(agent, s) {
		if f.Type == "start" {
			n++
		}
	}
	return n
}

// TestChatSurvivesADrop: `ctx agent chat` (no terminal) stopped while its
// run floods it is dropped by the daemon (slow_client); continued, it
// follows the run again with the same id — replayed, not run twice (P4) —
// prints the answer and goes on reading lines, exit 0 at EOF. spec: P4 S3
func TestChatSurvivesADrop(t *testing.T) {
	w := floodWorld(t)
	cmd := exec.Command(w.ctxBin, "agent", "chat", "fl")
	cmd.Env, cmd.Dir = w.env(), t.TempDir()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	io.WriteString(stdin, "spew 30000\n")
	waitFor(t, "the run to start", 20*time.Second, func() bool { return starts(w, "fl") == 1 })
	cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(t, "the run to finish and chat to be dropped", 90*time.Second, func() bool {
		ev, err := os.ReadFile(w.sessionDir("fl", "default") + "/events.jsonl")
		return err == nil && strings.Contains(string(ev), `"type":"done"`) && drops(w) >= 1
	})
	cmd.Process.Signal(syscall.SIGCONT)
	io.WriteString(stdin, "echo after the drop\n")
	waitFor(t, "the next line's answer", 30*time.Second, func() bool {
		return starts(w, "fl") == 2 && strings.Contains(lastOf(w.events("fl", "default"), "done").Status, "ok")
	})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("chat: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "lost") {
		t.Errorf("chat reported a lost connection: %s", stderr.String())
	}
	out := stdout.String()
	if strings.Count(out, strings.Repeat("x", 99)) < 1000 || !strings.Contains(out, "echo: after the drop") {
		t.Errorf("chat printed %d bytes, ending %q", len(out), out[max(0, len(out)-200):])
	}
	if n := starts(w, "fl"); n != 2 {
		t.Errorf("%d runs started, want 2 (the flood ran once)", n)
	}
}

// TestResumeSurvivesADrop: `ctx agent resume` following a live run that
// floods it, its output unread for a while, is dropped (slow_client),
// resumes again and prints every line of the run exactly once, exit 0.
// spec: P2 P4
func TestResumeSurvivesADrop(t *testing.T) {
	w := floodWorld(t)
	send := exec.Command(w.ctxBin, "agent", "send", "--id", "flood-r", "fl", "spew", itoa(30000))
	send.Env, send.Dir, send.Stdout = w.env(), t.TempDir(), io.Discard
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	defer send.Process.Kill()
	waitFor(t, "the run to start", 20*time.Second, func() bool { return starts(w, "fl") == 1 })
	before := drops(w)
	cmd := exec.Command(w.ctxBin, "agent", "resume", "fl")
	cmd.Env, cmd.Dir = w.env(), t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, "the run to finish and resume to be dropped", 90*time.Second, func() bool {
		ev, err := os.ReadFile(w.sessionDir("fl", "default") + "/events.jsonl")
		return err == nil && strings.Contains(string(ev), `"type":"done"`) && drops(w) > before
	})
	got, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr.String())
	}
	_ = send.Wait()
	if n := strings.Count(string(got), strings.Repeat("x", 99)+"\n"); n != 30000 {
		t.Errorf("resume printed %d of the run's 30000 lines (each must come once)", n)
	}
	if n := strings.Count(string(got), "> spew 30000"); n != 1 {
		t.Errorf("the user line printed %d times", n)
	}
	if n := starts(w, "fl"); n != 1 {
		t.Errorf("%d runs started, want 1", n)
	}
}

// TestACPSurvivesADrop: `ctx acp` stopped while its prompt's run floods it
// is dropped by the daemon (slow_client); continued, it follows the run
// again — replayed, not run twice (P4) — and the editor gets every line
// of the answer exactly once and the prompt's end_turn. spec: P4
func TestACPSurvivesADrop(t *testing.T) {
	w := floodWorld(t)
	ws := t.TempDir()
	r := w.acpRaw(ws, "fl")
	sid := r.newSession(ws)
	r.send(promptLine(3, sid, "spew 30000"))
	waitFor(t, "the run to start", 20*time.Second, func() bool { return starts(w, "fl", sid) == 1 })
	r.cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(t, "the run to finish and ctx acp to be dropped", 90*time.Second, func() bool {
		ev, err := os.ReadFile(w.sessionDir("fl", sid) + "/events.jsonl")
		return err == nil && strings.Contains(string(ev), `"type":"done"`) && drops(w) >= 1
	})
	r.cmd.Process.Signal(syscall.SIGCONT)
	got := r.until(`"id":3`, 90*time.Second)
	last := got[len(got)-1]
	if !strings.Contains(last, `"stopReason":"end_turn"`) {
		t.Fatalf("the prompt ended %s\nstderr: %s", last, r.err.String())
	}
	if n := strings.Count(strings.Join(got, "\n"), strings.Repeat("x", 99)); n != 30000 {
		t.Errorf("the editor got %d of the answer's 30000 lines (each must come once)", n)
	}
	if n := starts(w, "fl", sid); n != 1 {
		t.Errorf("%d runs started, want 1", n)
	}
}
