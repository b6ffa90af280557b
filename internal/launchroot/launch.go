package launchroot

import (
	"fmt"
	"os"
	"sync"
)

// Launch is one bwrap start under --block-fd (U2): the sandboxed program
// does not run until the root is registered. Use it as
//
//	l, err := reg.Prepare(ident, extraFiles) // before building bwrap's argv
//	spec.BlockFD = l.BlockFD
//	cmd := exec.Command(bwrapPath, args...)
//	cmd.ExtraFiles = l.ExtraFiles
//	if err := cmd.Start(); err != nil { l.Abort(); ... }
//	release, err := l.Started(cmd.Process) // register, then unblock
//	if err != nil { _ = cmd.Wait(); l.Abort(); ... } // Started killed it
//	... cmd.Wait(); release()
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
// e.g. an --info-fd pipe; the block fd comes after them.
func (r *Registry) Prepare(ident Identity, extra []*os.File) (*Launch, error) {
	if ident.UID != r.owner {
		return nil, fmt.Errorf("launchroot: prepare: identity uid %d is not the owner %d", ident.UID, r.owner)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launchroot: block pipe: %w", err)
	}
	files := append(append([]*os.File(nil), extra...), pr)
	return &Launch{BlockFD: 3 + len(extra), ExtraFiles: files, reg: r, ident: ident, r: pr, w: pw}, nil
}

// Started registers the started process p (bwrap's host pid) with its start
// time and boot id, and only then releases the block so that bwrap runs the
// sandboxed program. If registration fails, it kills p and returns the
// error with the block still held: the caller waits for p, then calls
// Abort. bwrap reads the block fd in its sandboxed child, which has no
// parent-death signal yet and goes on at EOF: internal/proc therefore
// starts the program through a gate that the same EOF aborts, so the
// sandbox never runs unregistered. spec: U2
func (l *Launch) Started(p *os.Process) (release func(), err error) {
	// The child holds its own copy of the read end now.
	_ = l.r.Close()
	release, err = l.reg.Register(p.Pid, l.ident)
	if err != nil {
		_ = p.Kill()
		return nil, err
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
