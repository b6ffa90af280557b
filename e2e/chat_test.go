package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyOut collects a PTY's output.
type ptyOut struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (p *ptyOut) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.Write(b)
}

func (p *ptyOut) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.String()
}

// TestChatOnATerminal drives `ctx agent chat` through a real PTY: a line is
// sent and its answer printed; Ctrl+C during a run cancels that run and
// returns to the prompt; Ctrl+C at an idle prompt exits 0. spec: S3 A5 D2
func TestChatOnATerminal(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("c", nil)
	cmd := exec.Command(w.ctxBin, "agent", "chat", "c")
	cmd.Env = append(w.env(), "TERM=xterm")
	cmd.Dir = t.TempDir()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := &ptyOut{}
	go func() { _, _ = bytesCopy(out, f) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, "the prompt", 10*time.Second, func() bool { return strings.Contains(out.String(), "c> ") })

	f.Write([]byte("echo hello there\r"))
	waitFor(t, "the answer", 15*time.Second, func() bool { return strings.Contains(out.String(), "echo: hello there") })

	f.Write([]byte("sleep 30\r"))
	waitFor(t, "the run to start", 10*time.Second, func() bool {
		ev := w.events("c", "default")
		return len(ev) > 0 && ev[len(ev)-1].Type == "delta" && ev[len(ev)-1].Text == "sleeping"
	})
	f.Write([]byte{3}) // Ctrl+C during the run
	waitFor(t, "the run to be cancelled", 10*time.Second, func() bool {
		ev := w.events("c", "default")
		return ev[len(ev)-1].Type == "done" && ev[len(ev)-1].Status == "cancelled"
	})
	waitFor(t, "the prompt again", 10*time.Second, func() bool {
		s := out.String()
		return strings.Contains(s, "(cancelled)") && strings.HasSuffix(strings.TrimRight(s, " "), "c>")
	})
	select {
	case err := <-exited:
		t.Fatalf("chat exited on Ctrl+C during a run: %v\n%s", err, out.String())
	default:
	}
	f.Write([]byte{3}) // Ctrl+C at the idle prompt
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("chat exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("chat did not exit on Ctrl+C at the prompt:\n%s", out.String())
	}
}

func bytesCopy(dst *ptyOut, src interface{ Read([]byte) (int, error) }) (int64, error) {
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			dst.Write(buf[:k])
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}

// TestChatWithoutATerminal: `ctx agent chat` reading a pipe: SIGINT during
// a run cancels that run (it does not leave it going) and chat reads the
// next line; SIGINT when idle exits 130. spec: A5 S3
func TestChatWithoutATerminal(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("pc", nil)
	cmd := exec.Command(w.ctxBin, "agent", "chat", "pc")
	cmd.Env = w.env()
	cmd.Dir = t.TempDir()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &ptyOut{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	stdin.Write([]byte("sleep 30\n"))
	waitFor(t, "the run to start", 15*time.Second, func() bool {
		if _, err := os.Stat(w.sessionDir("pc", "default") + "/events.jsonl"); err != nil {
			return false
		}
		for _, f := range w.events("pc", "default") {
			if f.Type == "start" {
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond) // the client has read its start frame
	cmd.Process.Signal(syscall.SIGINT)
	waitFor(t, "the run to end cancelled", 15*time.Second, func() bool {
		ev := w.events("pc", "default")
		return len(ev) > 0 && ev[len(ev)-1].Type == "done" && ev[len(ev)-1].Status == "cancelled"
	})
	select {
	case err := <-exited:
		t.Fatalf("chat exited on SIGINT during a run: %v\n%s", err, out)
	case <-time.After(300 * time.Millisecond):
	}
	stdin.Write([]byte("echo again\n"))
	waitFor(t, "the next answer", 15*time.Second, func() bool { return strings.Contains(out.String(), "echo: again") })
	// The answer is printed as the run ends, a moment before the chat is
	// idle again: a SIGINT in that moment is the run's.
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("idle SIGINT: %v, want exit 130\n%s", err, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("chat did not exit on SIGINT when idle\n%s", out)
	}
}
