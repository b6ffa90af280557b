package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
	"github.com/cortexfs/ctx/internal/termres"
)

// build compiles the real binary once per test.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ctxterm")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("socket %s never appeared", path)
}

// spec: T2, T5 — the binary serves attach, exits with the program's
// status, records events and removes its socket.
func TestBinaryEndToEnd(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "rt", "main.sock")
	events := filepath.Join(dir, "events.jsonl")
	cmd := exec.Command(bin, "--listen", sock, "--events", events, "--", "sh", "-c", `echo hello; read x; echo "got:$x"; exit 7`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitSocket(t, sock)
	w, err := ctxterm.Dial(sock, ctxterm.ModeWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a, err := ctxterm.DialHello(sock, ctxterm.Hello{Mode: ctxterm.ModeAttach, Cols: 90, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Write([]byte("abc\n"))
	var out bytes.Buffer
	st, err := w.CopyOutput(&out)
	if err != nil || st != 7 {
		t.Fatalf("watcher: %d %v", st, err)
	}
	if !strings.Contains(out.String(), "hello") || !strings.Contains(out.String(), "got:abc") {
		t.Fatalf("output %q", out.String())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("ctxterm exit: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left: %v", err)
	}
	evs, err := termres.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range evs {
		seen[e.Type]++
		if e.TS.IsZero() {
			t.Fatalf("event without ts: %+v", e)
		}
		if e.Type == termres.Exited && (e.Status == nil || *e.Status != 7) {
			t.Fatalf("exited event %+v", e)
		}
	}
	if seen[termres.Attached] != 2 || seen[termres.Resized] != 1 || seen[termres.Exited] != 1 {
		t.Fatalf("events %v", seen)
	}
}

// SIGTERM hangs up the PTY: a shell ignoring SIGTERM still ends, with its
// background job, and the socket is removed.
func TestBinarySIGTERM(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "main.sock")
	pidFile := filepath.Join(dir, "pid")
	cmd := exec.Command(bin, "--listen", sock, "--", "sh", "-c", `trap "" TERM; sleep 300 & echo $! > `+pidFile+`; wait`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitSocket(t, sock)
	var pid int
	for deadline := time.Now().Add(5 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		pid = atoi(strings.TrimSpace(string(b)))
	}
	if pid == 0 {
		t.Fatal("no background pid")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("ctxterm did not exit on SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGHUP) && code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit code %d", code)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("background job %d survived", pid)
	}
}

func TestUsage(t *testing.T) {
	var stderr bytes.Buffer
	for _, args := range [][]string{nil, {"--listen", "x"}, {"--", "true"}, {"--bogus"}} {
		if code := run(t.Context(), args, &stderr); code != 2 {
			t.Fatalf("run(%q) = %d, want 2", args, code)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// alive reports whether pid runs (a zombie left to a non-reaping init is dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
