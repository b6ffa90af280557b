package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ctxterm held on a FIFO (the systemd launcher's --hold) starts nothing —
// neither the socket nor the program — until one byte arrives; a hold on a
// descriptor whose writer goes away without a byte ends ctxterm (125) and
// the program never runs; a descriptor it inherited is not passed on.
// spec: U2
func TestHold(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "hold.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	sock := filepath.Join(dir, "s", "main.sock")
	// The program records which descriptors it got beyond 0–2.
	prog := `ls /proc/self/fd > ` + marker + `; sleep 30`
	cmd := exec.Command(bin, "--listen", sock, "--hold", fifo, "--", "sh", "-c", prog)
	leak, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	cmd.ExtraFiles = []*os.File{leak} // descriptor 3, inherited without close-on-exec
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(unix.SIGTERM); cmd.Wait() })
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran before the hold was released")
	}
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("the socket was bound before the hold was released")
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{'\n'})
	f.Close()
	waitSocket(t, sock)
	var fds []byte
	for deadline := time.Now().Add(5 * time.Second); len(fds) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		fds, _ = os.ReadFile(marker)
	}
	if len(fds) == 0 {
		t.Fatal("the program did not run after the release")
	}
	// "3" is ls's own directory descriptor at most; the inherited one would be a 4th.
	if n := len(fds); n > len("0\n1\n2\n3\n") {
		t.Errorf("the program inherited extra descriptors: %q", fds)
	}

	// A hold descriptor closed without a byte: ctxterm ends, nothing ran.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	marker2 := filepath.Join(dir, "ran2")
	cmd2 := exec.Command(bin, "--listen", filepath.Join(dir, "s2", "main.sock"), "--hold-fd", "3", "--", "sh", "-c", "touch "+marker2)
	cmd2.ExtraFiles = []*os.File{pr}
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	err = cmd2.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitSetup {
		t.Errorf("ctxterm after an unreleased hold: %v, want exit %d", err, exitSetup)
	}
	if _, err := os.Stat(marker2); err == nil {
		t.Error("the program ran although the hold was never released")
	}
}

// The seccomp seam: with a filter, bwrap (argv[0]) gets --seccomp 3 and the
// filter as its first extra file; without one the argv is unchanged.
func TestSandboxArgvSeccomp(t *testing.T) {
	argv := []string{"/usr/bin/bwrap", "--unshare-pid", "--clearenv", "--", "/ctx/bin/tsh"}
	orig := seccompFile
	defer func() { seccompFile = orig }()
	seccompFile = nil
	got, files, err := sandboxArgv(argv, nil)
	if err != nil || len(files) != 1 || strings.Join(got, " ") != "/usr/bin/bwrap --unshare-pid --clearenv --args 3 -- /ctx/bin/tsh" {
		t.Fatalf("no filter: %v %v %v", got, files, err)
	}
	files[0].Close()
	f, err := os.CreateTemp(t.TempDir(), "bpf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seccompFile = func() (*os.File, error) { return f, nil }
	got, files, err = sandboxArgv(argv, nil)
	if err != nil || len(files) != 2 || files[0] != f || len(got) != len(argv)+4 || got[0] != argv[0] || got[1] != "--seccomp" || got[2] != "3" {
		t.Fatalf("with a filter: %v %v %v", got, files, err)
	}
	files[1].Close()
	seccompFile = func() (*os.File, error) { return nil, errors.New("no filter") }
	if _, _, err := sandboxArgv(argv, nil); err == nil {
		t.Error("a filter error was ignored (must fail closed)")
	}
}

// TestSandboxArgvEnv: the sandbox's environment (ctxterm's own) reaches
// bwrap through a descriptor read as --setenv arguments right after
// --clearenv; no key or value is on the command line, and an argv
// without --clearenv fails closed. spec: B3
func TestSandboxArgvEnv(t *testing.T) {
	orig := seccompFile
	defer func() { seccompFile = orig }()
	seccompFile = nil
	argv := []string{"/usr/bin/bwrap", "--clearenv", "--chdir", "/workspace", "--", "/ctx/bin/tsh"}
	got, files, err := sandboxArgv(argv, []string{"HOME=/home/agent", "CTX_CANARY=s3cret value"})
	if err != nil || len(files) != 1 {
		t.Fatalf("%v %v %v", got, files, err)
	}
	defer files[0].Close()
	if j := strings.Join(got, " "); j != "/usr/bin/bwrap --clearenv --args 3 --chdir /workspace -- /ctx/bin/tsh" {
		t.Errorf("argv %q", j)
	}
	b, err := io.ReadAll(files[0])
	if err != nil || string(b) != "--setenv\x00CTX_CANARY\x00s3cret value\x00--setenv\x00HOME\x00/home/agent\x00" {
		t.Errorf("env descriptor %q %v", b, err)
	}
	if _, _, err := sandboxArgv([]string{"/usr/bin/bwrap", "--", "/ctx/bin/tsh"}, nil); err == nil {
		t.Error("an argv without --clearenv was accepted")
	}
}
