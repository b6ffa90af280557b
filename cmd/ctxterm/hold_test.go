package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
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

// ctxterm --view-hold: bwrap makes its view and ctxterm serves the socket,
// but the sandboxed program runs only once a byte comes from the view
// FIFO (the daemon's, after its view check). Every other end of the hold
// — the FIFO's writer gone without a byte; ctxterm stopped (SIGHUP, as the
// built-in launcher's Stop sends) while held; ^C typed by an early attach,
// which ends the outer bwrap (the PTY's foreground group) — ends ctxterm
// (125) with the program never run and nothing of the sandbox left: the
// held process is the init of its PID namespace, deaf to both signals,
// and arms --die-with-parent only once released. spec: B1
func TestViewHold(t *testing.T) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("no bwrap")
	}
	bin := build(t)
	dir := t.TempDir()
	type held struct {
		cmd               *exec.Cmd
		exited            chan error
		fifo, marker, tag string
		sock              string
	}
	start := func(name string) *held {
		h := &held{fifo: filepath.Join(dir, name+".fifo"), marker: filepath.Join(dir, name+".ran"),
			sock: filepath.Join(dir, name, "main.sock"), tag: "ctxterm-view-hold-" + name + "-" + strconv.Itoa(os.Getpid()),
			exited: make(chan error, 1)}
		if err := unix.Mkfifo(h.fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		h.cmd = exec.Command(bin, "--listen", h.sock, "--events", filepath.Join(dir, name+".events"), "--sandboxed", "--view-hold", h.fifo, "--",
			bw, "--unshare-pid", "--as-pid-1", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--bind", dir, dir, "--clearenv", "--", "sh", "-c", "touch "+h.marker+"; sleep 30", h.tag)
		h.cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if err := h.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { h.exited <- h.cmd.Wait() }()
		t.Cleanup(func() {
			h.cmd.Process.Kill()
			<-h.exited
			h.exited <- nil
			for _, pid := range withArg(h.tag) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		waitSocket(t, h.sock)
		return h
	}
	// ended checks that ctxterm ended (125) with nothing run or left.
	ended := func(h *held, how string) {
		t.Helper()
		var err error
		select {
		case err = <-h.exited:
			h.exited <- err
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: ctxterm still runs (its held sandbox keeps it)", how)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitSetup {
			t.Errorf("%s: ctxterm: %v, want exit %d", how, err, exitSetup)
		}
		if _, err := os.Stat(h.marker); err == nil {
			t.Errorf("%s: the held program ran", how)
		}
		if pids := withArg(h.tag); len(pids) > 0 {
			t.Errorf("%s: the held sandbox outlived ctxterm: %v", how, pids)
		}
		// A shell that never ran did not exit: no "exited" event (T5).
		if b, _ := os.ReadFile(filepath.Join(dir, how+".events")); bytes.Contains(b, []byte(`"exited"`)) {
			t.Errorf("%s: an exited event for a shell that never ran:\n%s", how, b)
		}
	}

	h := start("released")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(h.marker); err == nil {
		t.Fatal("the sandboxed program ran before its view was released")
	}
	f, err := os.OpenFile(h.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{'\n'})
	f.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(h.marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed program did not run after the release")
		}
	}
	// A released shell that ends is recorded as exited (the control for
	// the refused ones below, which must not be).
	h.cmd.Process.Signal(unix.SIGHUP)
	select {
	case err := <-h.exited:
		h.exited <- err
	case <-time.After(15 * time.Second):
		t.Fatal("released: ctxterm did not end on SIGHUP")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "released.events")); !bytes.Contains(b, []byte(`"exited"`)) {
		t.Errorf("released: no exited event for a shell that ran and ended:\n%s", b)
	}

	h = start("eof")
	f, err = os.OpenFile(h.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // EOF: no release
	ended(h, "eof")

	h = start("hangup")
	h.cmd.Process.Signal(unix.SIGHUP)
	ended(h, "hangup")

	h = start("interrupt")
	a, err := ctxterm.DialHello(h.sock, ctxterm.Hello{Mode: ctxterm.ModeAttach})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Write([]byte{3, 28}) // ^C, ^\
	ended(h, "interrupt")
}

// withArg lists the processes one of whose arguments is arg.
func withArg(arg string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				out = append(out, pid)
			}
		}
	}
	return out
}

// The gate's three ends, with a sleep standing in for bwrap: a byte on the
// FIFO releases the block (one byte on it) and nothing is killed; no byte
// in time, or ctxterm told to stop, kills what is below (the stand-in)
// and the block is never written — the latched end, itself a writer,
// never reads EOF either. spec: B1
func TestViewGate(t *testing.T) {
	for _, end := range []string{"released", "timeout", "abort"} {
		t.Run(end, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "view.fifo")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			g, err := newViewGate(fifo, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer g.close()
			block := g.blockEnd
			defer block.Close()
			argv, files, err := g.argv([]string{"/usr/bin/bwrap", "--clearenv", "--", "sh"}, nil)
			if err != nil || strings.Join(argv, " ") != "/usr/bin/bwrap --block-fd 3 --clearenv -- sh" || len(files) != 1 || files[0] != block {
				t.Fatalf("argv %q files %v: %v", argv, files, err)
			}
			cmd := exec.Command("sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			defer func() { cmd.Process.Kill(); <-waited }()
			// Below this test binary is more than the stand-in: the
			// gate's sweep is narrowed to it.
			orig := killBelow
			killBelow = func() { cmd.Process.Kill() }
			defer func() { killBelow = orig }()
			timeout := 30 * time.Second
			if end == "timeout" {
				timeout = 200 * time.Millisecond
			}
			g.start(cmd.Process.Pid, timeout)
			switch end {
			case "released":
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.Write([]byte{'\n'})
				f.Close()
				<-g.done
			case "abort":
				g.abort(errors.New("told to stop"))
			}
			if end != "released" {
				select {
				case <-waited:
					waited <- nil
				case <-time.After(10 * time.Second):
					t.Fatal("the held process was not killed")
				}
			}
			unix.SetNonblock(int(block.Fd()), true)
			var b [2]byte
			n, err := unix.Read(int(block.Fd()), b[:])
			if end == "released" && n != 1 {
				t.Errorf("the block read %d bytes (%v) after a release, want 1", n, err)
			}
			if end != "released" && (n > 0 || !errors.Is(err, unix.EAGAIN)) {
				t.Errorf("the block read %d bytes (%v) after a refused hold, want EAGAIN", n, err)
			}
			if end == "released" {
				select {
				case <-waited:
					t.Fatal("a released hold killed what it held")
				default:
				}
				cmd.Process.Kill() // the end's sweep of what is below would do it
			}
			if refused := g.end(); refused != (end != "released") {
				t.Errorf("end() = %v after %s", refused, end)
			}
		})
	}
	if _, _, err := (&viewGate{}).argv([]string{"/usr/bin/bwrap", "--block-fd", "9", "--", "sh"}, nil); err == nil {
		t.Error("an argv with a --block-fd of its own was accepted (bwrap keeps the last one)")
	}
	if _, _, err := (&viewGate{}).argv([]string{"/usr/bin/bwrap", "--", "grep", "--block-fd"}, nil); err != nil {
		t.Errorf("a --block-fd of the program's own arguments was refused: %v", err)
	}
}
