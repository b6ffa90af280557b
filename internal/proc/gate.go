package proc

import (
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/cortexfs/ctx/internal/bwrap"
)

// GateShell is the program a held sandbox not born inside its run's
// cgroup runs first: the host's /bin/sh, which every System view binds.
const GateShell = "/bin/sh"

// GateExit is the gate's exit status when its start was never released.
const GateExit = 125

// A gate holds the sandboxed program until its start is released, and
// aborts it when the release never comes.
//
// bwrap's --block-fd proceeds on EOF as on a byte, so a daemon that dies
// while a sandbox is held on it (after bwrap cloned, before the launch
// root was registered or the cgroup placed) would release that sandbox:
// unregistered, possibly outside its run's cgroup, after the next daemon's
// sweep. bwrap cannot be changed, so the program is started through a
// gate: /bin/sh reads one line from its stdin, exits GateExit on EOF, and
// only then execs the real argv. The release line is written to stdin by
// the daemon after the block is released; a dead daemon's stdin pipe reads
// EOF. The gate opens no descriptor of its own (stdin is the program's
// stdin, whose data follows the release line), so the program inherits
// exactly what it would without it; --as-pid-1 keeps working since the
// program replaces the gate in place (exec), keeping its pid.
//
// A sandbox born inside its run's cgroup (Options.Enter, cgroup v1) has
// no gate: its block is latched (launchroot.Latch), so no EOF releases
// it, and a held PID 1 its daemon left behind is in a run cgroup, which
// the reaper sweeps. That saves every such sandbox the gate's exec.
type gate struct {
	w    io.WriteCloser
	rest []byte // written after the release line, then w is closed
	pipe bool   // Options.StdinPipe: w stays open for the caller
	once sync.Once
	done chan struct{} // closed when the writer goroutine ended
}

// gateArgv wraps argv in the gate. The environment is untouched: bwrap
// sets PWD itself, and dash passes it on as it found it.
func gateArgv(s bwrap.Spec) []string {
	return append([]string{GateShell, "-c", "IFS= read -r ctx_gate || exit " + strconv.Itoa(GateExit) + `; exec "$@"`, "ctx-gate"}, s.Argv...)
}

// newGate returns a gate whose read end is the program's stdin: stdin
// (written after the release line, then closed) or, with pipe, the write
// end the caller keeps (Proc.Stdin).
func newGate(stdin []byte, pipe bool) (g *gate, r *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	return &gate{w: w, rest: stdin, pipe: pipe, done: make(chan struct{})}, r, nil
}

// open releases the program: one line, then stdin's data. A nil gate
// (a start without one) does nothing.
func (g *gate) open() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		if _, err := g.w.Write([]byte{'\n'}); err != nil || g.pipe {
			close(g.done)
			return
		}
		go func() {
			defer close(g.done)
			_, _ = g.w.Write(g.rest) // EPIPE when the program ignores its stdin
			_ = g.w.Close()
		}()
	})
}

// abortUnreleased closes a gate that was never opened: the program
// never runs (the gate reads EOF). After open it does nothing.
func (g *gate) abortUnreleased() {
	g.once.Do(func() {
		close(g.done)
		_ = g.w.Close()
	})
}

// abort is abortUnreleased, and after open it also ends a writer blocked
// on a program that exited without reading its stdin (not the caller's
// own stdin pipe).
func (g *gate) abort() {
	g.abortUnreleased()
	if !g.pipe {
		_ = g.w.Close()
	}
}
