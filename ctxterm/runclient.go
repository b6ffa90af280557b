package ctxterm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// DetachKey is Ctrl-\ (0x1c): typed on the local terminal during watch or
// attach it ends the client and leaves the program running. (In raw mode it
// no longer raises SIGQUIT locally; it is never sent to the program.)
const DetachKey byte = 0x1c

// RunClient is `ctx agent watch|attach`: it joins the terminal at path,
// copies its output to stdout and, for attach, stdin to it. When stdin is a
// terminal it is put in raw mode and always restored, and SIGWINCH becomes a
// resize (attach). It returns the program's exit status when the program
// exits; ErrDetached after the detach key; an error wrapping ErrUnavailable
// when the socket does not answer, ErrConnLost or a *ServerError when the
// connection ends otherwise, ctx.Err() when ctx is cancelled.
func RunClient(ctx context.Context, path string, mode Mode, stdin *os.File, stdout io.Writer) (int, error) {
	return RunClientWith(ctx, path, mode, stdin, stdout, nil)
}

// RunClientWith is RunClient calling connected (when not nil) once the
// terminal answered, before the local terminal goes raw: where a client
// says what it joined and how to leave.
func RunClientWith(ctx context.Context, path string, mode Mode, stdin *os.File, stdout io.Writer, connected func()) (int, error) {
	if !mode.Valid() {
		return -1, fmt.Errorf("ctxterm: mode %q: want watch or attach", mode)
	}
	fd := int(stdin.Fd())
	isTerm := term.IsTerminal(fd)
	h := Hello{Mode: mode}
	if isTerm && mode == ModeAttach {
		if cols, rows, err := term.GetSize(fd); err == nil && cols > 0 && rows > 0 {
			h.Cols, h.Rows = cols, rows
		}
	}
	conn, err := DialHello(path, h) // before raw mode, so errors print normally
	if err != nil {
		return -1, err
	}
	defer conn.Close()
	if connected != nil {
		connected()
	}

	if isTerm {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return -1, fmt.Errorf("ctxterm: raw mode: %w", err)
		}
		defer term.Restore(fd, old) // spec: S5 — the local terminal is always restored
	}

	in, restoreIn, err := pollableInput(fd)
	if err != nil {
		return -1, err
	}
	defer restoreIn()

	detach := make(chan struct{})
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				p := buf[:n]
				i := bytes.IndexByte(p, DetachKey)
				if i >= 0 {
					p = p[:i]
				}
				if mode == ModeAttach && len(p) > 0 {
					if _, err := conn.Write(p); err != nil {
						return
					}
				}
				if i >= 0 {
					close(detach)
					return
				}
			}
			if err != nil {
				return // EOF on stdin: keep showing output
			}
		}
	}()

	type result struct {
		status int
		err    error
	}
	outDone := make(chan result, 1)
	go func() {
		st, err := conn.CopyOutput(stdout)
		outDone <- result{st, err}
	}()

	winch := make(chan os.Signal, 1)
	if isTerm && mode == ModeAttach {
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
	}

	var res result
	var outTaken bool
loop:
	for {
		select {
		case <-ctx.Done():
			res = result{-1, ctx.Err()}
			break loop
		case <-detach:
			res = result{-1, ErrDetached}
			break loop
		case res = <-outDone:
			outTaken = true
			break loop
		case <-winch:
			if cols, rows, err := term.GetSize(fd); err == nil && cols > 0 && rows > 0 {
				_ = conn.Resize(cols, rows)
			}
		}
	}
	// Stop both copiers before returning: no goroutine outlives the call.
	conn.Close()
	if !outTaken {
		<-outDone
	}
	_ = in.SetReadDeadline(time.Unix(1, 0))
	<-inDone
	return res.status, res.err
}

// pollableInput returns a duplicate of fd switched to non-blocking mode, so
// its reads go through the runtime poller and a deadline can stop a pending
// read (no stdin reader is left blocked after RunClient returns). O_NONBLOCK
// belongs to the open file description, shared with the caller's fd, so the
// returned func puts the original flags back.
func pollableInput(fd int) (*os.File, func(), error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("ctxterm: stdin flags: %w", err)
	}
	nfd, err := unix.Dup(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("ctxterm: dup stdin: %w", err)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, nil, fmt.Errorf("ctxterm: stdin non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(nfd), "stdin")
	return f, func() {
		f.Close()
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags)
	}, nil
}
