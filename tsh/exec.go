package tsh

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/cortexfs/ctx/internal/toolpath"
)

// fdExecer executes the checked descriptor, never a path that could have
// been swapped after the check.
//
// Replace uses execveat(fd, "", argv, env, AT_EMPTY_PATH). The descriptor is
// an O_PATH descriptor; its close-on-exec flag is cleared first because for a
// "#!" script the kernel hands the interpreter /dev/fd/N, which must still be
// open after exec (a close-on-exec descriptor makes execveat fail with ENOENT
// for scripts). A binary tool therefore inherits that one O_PATH descriptor
// of its own file, which grants nothing. Scripts need /dev/fd (bwrap --dev
// provides it). Because this is a raw system call, the tool inherits the
// RLIMIT_NOFILE soft limit as raised by the Go runtime at start.
//
// Run (the interactive prompt, which must survive the tool) starts a child
// whose descriptor 3 is the checked descriptor and executes /proc/self/fd/3:
// the magic link names the open file itself, not a path lookup, so the
// child runs the checked file. It needs /proc (bwrap --proc).
type fdExecer struct{}

var _ Execer = fdExecer{}

func (fdExecer) Replace(t *toolpath.Tool, argv, env []string) error {
	if !interactive(t) {
		detach() // No controlling terminal to inject into
	}
	fd := int(t.File.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("clear close-on-exec: %w", err)
	}
	return execveat(fd, argv, env)
}

// execveat is execveat(2) with AT_EMPTY_PATH; x/sys/unix has no wrapper.
func execveat(fd int, argv, env []string) error {
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd),
		uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])),
		uintptr(unsafe.Pointer(&envp[0])),
		unix.AT_EMPTY_PATH, 0)
	return fmt.Errorf("execveat: %w", errno)
}

func (fdExecer) Run(t *toolpath.Tool, argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := &exec.Cmd{
		Path:       "/proc/self/fd/" + strconv.Itoa(3), // descriptor 3 of the child: ExtraFiles[0]
		Args:       argv,
		Env:        env,
		Stdin:      stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{t.File},
	}
	// A tool that did not declare itself interactive runs
	// in a new session without a controlling terminal (no TIOCSTI into the
	// shell's input, kill(0) reaches only its own group); tsh passes ^C and
	// ^\ on to it. An interactive one shares the terminal's foreground
	// group: ^C reaches it, and tsh ignores the signal while it waits.
	detached := !interactive(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: detached}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGQUIT)
	defer signal.Stop(sig)
	err := trackChild(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err == nil {
		pid := cmd.Process.Pid
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case s := <-sig:
					if detached {
						_ = syscall.Kill(-pid, s.(syscall.Signal))
					}
				case <-stop:
					return
				}
			}
		}()
		err = cmd.Wait()
		close(stop)
		untrackChild(pid)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return ExitNotAllowed, fmt.Errorf("run %s: %w", t.Path, err)
	}
	return 0, nil
}

func isTerminalFd(fd int) bool { return term.IsTerminal(fd) }
