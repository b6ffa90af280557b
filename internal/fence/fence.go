// Package fence keeps a cluster node from acting past its ownership
// deadline when it cannot stop itself. A node is owner of its sessions
// only until its last acknowledged lease renewal's send time + TTL −
// margin; a node that is paused (SIGSTOP), swapped out or hung cannot
// notice that time passing. So a small parent process — the fence —
// starts the node, reads every new deadline the node reports on a pipe,
// and when a deadline passes without a newer one kills the node and every
// process below it (its sandboxes, MCP servers, agents), then exits with
// the lost-lease status. systemd's watchdog plays the same part in
// production; the fence is what `ctx-cluster daemon` runs by default.
//
// The fence knows nothing of etcd or sessions: it holds no lease and can
// therefore not be paused past anything it owns. It imports only the
// standard library and internal/killtree.
package fence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/killtree"
)

// EnvFD names the environment variable that tells a fenced child which
// descriptor to report its deadlines on.
const EnvFD = "CTX_FENCE_FD"

// Parent runs cmd as the fenced child and returns its exit status. The
// child gets the write end of a pipe (EnvFD names it) and reports each
// new deadline on it (Reporter). Until the first report nothing is
// fenced: a node owns nothing before it joined. When the latest deadline
// passes, the child and its descendants are killed (SIGKILL works on a
// stopped process) and Parent returns exitcode.LostLease. SIGTERM,
// SIGINT and SIGHUP sent to the fence are passed on to the child, whose
// own status is then returned. The child dies with the fence
// (PR_SET_PDEATHSIG).
func Parent(cmd *exec.Cmd, log *slog.Logger) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return exitcode.RunError, fmt.Errorf("fence: pipe: %w", err)
	}
	defer r.Close()
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, EnvFD+"="+strconv.Itoa(fd))
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		w.Close()
		return exitcode.RunError, fmt.Errorf("fence: start %s: %w", cmd.Path, err)
	}
	w.Close() // the child's copy is the only writer: EOF when it is gone
	child := cmd.Process.Pid

	deadlines := make(chan time.Time)
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		defer close(deadlines)
		var b [8]byte
		for {
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return
			}
			deadlines <- time.Unix(0, int64(binary.BigEndian.Uint64(b[:])))
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var timer *time.Timer
	var fire <-chan time.Time
	fenced := false
	reports := (<-chan time.Time)(deadlines)
	for {
		select {
		case d, ok := <-reports:
			if !ok {
				reports = nil // the child closed its end; it still runs or is exiting
				continue
			}
			if timer != nil {
				timer.Stop()
			}
			timer = time.NewTimer(time.Until(d))
			fire = timer.C
		case <-fire:
			if !fenced {
				fenced = true
				log.Error("fence: the node passed its ownership deadline; killing it and everything it started", "pid", child)
				kill(child)
			}
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-exited:
			if timer != nil {
				timer.Stop()
			}
			r.Close()
			for range deadlines { // let the reader end
			}
			readers.Wait()
			if fenced {
				return exitcode.LostLease, nil
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
					return 128 + int(st.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			if err != nil {
				return exitcode.RunError, fmt.Errorf("fence: wait: %w", err)
			}
			return exitcode.OK, nil
		}
	}
}

// kill ends pid and everything below it. The descendants are listed
// first (the tree is still whole), then all get SIGKILL: none can run
// again, stopped or not, so none outlives the deadline by more than the
// kernel's delivery.
func kill(pid int) {
	tree := killtree.Descendants(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	// One forked between the walk and the kills dies with its parent:
	// every sandbox is bwrap --die-with-parent, every helper
	// PR_SET_PDEATHSIG.
}

// Reporter is the child's end: it tells the fence each new deadline.
type Reporter struct {
	mu sync.Mutex
	f  *os.File
}

// FromEnv returns the Reporter of a fenced child, or nil when the process
// is not fenced. The variable is cleared so no process the node starts
// inherits the claim.
func FromEnv() (*Reporter, error) {
	v, ok := os.LookupEnv(EnvFD)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(EnvFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("fence: %s=%q is not a descriptor", EnvFD, v)
	}
	syscall.CloseOnExec(fd)
	return &Reporter{f: os.NewFile(uintptr(fd), "fence")}, nil
}

// Report tells the fence the node's new deadline. A failed write means
// the fence is gone; the node dies with it anyway (PR_SET_PDEATHSIG).
func (p *Reporter) Report(deadline time.Time) error {
	if p == nil {
		return nil
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(deadline.UnixNano()))
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.f.Write(b[:]); err != nil {
		return fmt.Errorf("fence: report deadline: %w", err)
	}
	return nil
}

// Close closes the child's end.
func (p *Reporter) Close() error {
	if p == nil {
		return nil
	}
	return p.f.Close()
}
