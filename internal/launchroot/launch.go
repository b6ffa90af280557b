package launchroot

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/killtree"
)

// Launch is one bwrap start under --block-fd (U2): the sandboxed program
// does not run until the root is registered. Use it as
//
//	l, err := reg.Prepare(ident, extraFiles) // before building bwrap's argv
//	spec.BlockFD = l.BlockFD
//	cmd := exec.Command(bwrapPath, args...)
//	cmd.ExtraFiles = l.ExtraFiles
//	if err := cmd.Start(); err != nil { l.Abort(); ... }
//	release, err := l.Started(cmd.Process, nil) // register, then unblock
//	if err != nil { _ = cmd.Wait(); l.Abort(); ... } // Started killed it
//	... cmd.Wait(); release()
//
// PrepareLatched is the same launch for a sandbox born inside a run
// cgroup: its block never reads EOF (Latch).
type Launch struct {
	// BlockFD is the descriptor number, in the child, of the block pipe's
	// read end: pass it as bwrap.Spec.BlockFD (--block-fd).
	BlockFD int
	// ExtraFiles is the caller's extra files followed by the block pipe's
	// read end: assign it to exec.Cmd.ExtraFiles unchanged.
	ExtraFiles []*os.File

	reg   *Registry
	ident Identity
	r, w  *os.File
	once  sync.Once
}

// Prepare creates the one-shot block pipe for a launch carrying ident.
// extra are the files the caller already passes to the child (fd 3, 4, ...),
// e.g. an --info-fd pipe; the block fd comes after them. The pipe reads
// EOF when the daemon dies, which releases bwrap: the program must be
// started through a gate that the same EOF aborts (internal/proc).
func (r *Registry) Prepare(ident Identity, extra []*os.File) (*Launch, error) {
	return r.prepare(ident, extra, false)
}

// PrepareLatched is Prepare with a latched block (Latch): nothing but
// Started's byte ever releases it. For a sandbox born inside a run cgroup,
// whose held PID 1 the reaper or the next daemon's sweep kills with the
// cgroup if the daemon dies first; no gate is needed in front of it.
func (r *Registry) PrepareLatched(ident Identity, extra []*os.File) (*Launch, error) {
	return r.prepare(ident, extra, true)
}

func (r *Registry) prepare(ident Identity, extra []*os.File, latched bool) (*Launch, error) {
	if ident.UID != r.owner {
		return nil, fmt.Errorf("launchroot: prepare: identity uid %d is not the owner %d", ident.UID, r.owner)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launchroot: block pipe: %w", err)
	}
	if latched {
		lr, err := Latch(pr)
		_ = pr.Close()
		if err != nil {
			_ = pw.Close()
			return nil, err
		}
		pr = lr
	}
	files := append(append([]*os.File(nil), extra...), pr)
	return &Launch{BlockFD: 3 + len(extra), ExtraFiles: files, reg: r, ident: ident, r: pr, w: pw}, nil
}

// Latch opens the pipe whose read end is r once more, read-write, for
// bwrap's --block-fd. bwrap's read(2) on the block goes on at EOF as on a
// byte, and EOF comes when the last write end closes; a descriptor that is
// both ends keeps a writer for as long as the held child has it, so only
// a byte written to the pipe releases the child — a daemon that dies
// first leaves it blocked, never running anything. bwrap closes the block
// descriptor before it starts the program, which therefore does not
// inherit it. (A gate's /bin/sh in front of the program did the same job
// for the price of one more exec in every sandbox.)
func Latch(r *os.File) (*os.File, error) {
	sc, err := r.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("launchroot: latch the block pipe: %w", err)
	}
	fd, oerr := -1, error(nil)
	if err := sc.Control(func(rfd uintptr) {
		fd, oerr = unix.Open("/proc/self/fd/"+strconv.Itoa(int(rfd)), unix.O_RDWR|unix.O_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("launchroot: latch the block pipe: %w", err)
	}
	if oerr != nil {
		return nil, fmt.Errorf("launchroot: latch the block pipe: %w", oerr)
	}
	return os.NewFile(uintptr(fd), "block"), nil
}

// Started registers the started process p (bwrap's host pid) with its start
// time and boot id, and only then releases the block so that bwrap runs the
// sandboxed program. If registration fails, it kills p and what p
// started (a latched child would otherwise stay blocked) and returns the
// error with the block still held: the caller waits for p, then calls
// Abort. bwrap reads the block fd in its sandboxed child, which has no
// parent-death signal yet and goes on at EOF: internal/proc therefore
// starts the program through a gate that the same EOF aborts, or latches
// the block (PrepareLatched), so the sandbox never runs unregistered.
// spec: U2
//
// ready, when not nil, runs after the registration and before the
// release (the sandbox's view checked, its network connected): an error
// from it is handled as a failed registration.
func (l *Launch) Started(p *os.Process, ready func() error) (release func(), err error) {
	// The child holds its own copy of the read end now.
	_ = l.r.Close()
	release, err = l.reg.Register(p.Pid, l.ident)
	if err != nil {
		killtree.Kill(p.Pid) // not yet waited for: the pid is still p's
		return nil, err
	}
	if ready != nil {
		if err := ready(); err != nil {
			killtree.Kill(p.Pid)
			release()
			return nil, err
		}
	}
	// One byte (or EOF) unblocks bwrap's read(2) on --block-fd.
	_, _ = l.w.Write([]byte{'\n'})
	l.close()
	return release, nil
}

// Abort closes the block pipe: when cmd.Start failed, or after waiting
// for a process Started refused. Calling it again is harmless.
func (l *Launch) Abort() {
	_ = l.r.Close()
	l.close()
}

func (l *Launch) close() { l.once.Do(func() { _ = l.w.Close() }) }
