// Package proc starts sandboxed processes (bwrap) in their own process group
// and PID namespace and ends them: SIGTERM to everything inside, a grace
// period, then SIGKILL of the namespace (runtime.md X12).
package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/egress"
	"github.com/cortexfs/ctx/internal/killtree"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/seccomp"
)

// Proc is one started sandbox.
type Proc struct {
	cmd    *exec.Cmd
	Stdout io.ReadCloser
	// Stdin is the write end of the program's stdin when Options.StdinPipe
	// is set (an MCP server's requests); nil otherwise.
	Stdin   io.WriteCloser
	stderr  *Tail
	done    chan struct{}
	err     error
	once    sync.Once
	release func()
	gate    *gate
	// egress serves a net sandbox's network (closed by Wait); info is
	// bwrap's --info-fd while it starts.
	egress *egress.Proxy
	info   *os.File
	infoW  *os.File // closed once bwrap has its copy: a bwrap that dies before writing reads as EOF
}

// Options for Start.
type Options struct {
	Bwrap string     // bwrap binary (absolute)
	Spec  bwrap.Spec // the sandbox
	Stdin []byte     // written then closed
	// StdinPipe gives the program a stdin pipe the caller writes
	// (Proc.Stdin) instead of Stdin: for a long-lived server speaking a
	// protocol (MCP over stdio).
	StdinPipe bool
	StderrMax int // bytes of stderr kept (tail); default 64 KiB
	// Place, when set, runs after bwrap started and before it may run
	// anything (the block pipe holds it): the run's cgroup takes the pid
	// here, so nothing inside escapes its limits. An error ends the start.
	Place func(pid int) error
	// Enter, when set, takes the OS thread that forks bwrap (by tid) into
	// the run's cgroup just before the fork, so bwrap is born inside it:
	// no window in which a daemon crash releases a held sandbox that was
	// not placed yet (bwrap reads EOF on its block pipe and goes on). The
	// thread returns (leave) right after the fork: bwrap's death signal is
	// bound to the thread that forked it, which must outlive the start.
	// Place is then not needed.
	Enter func(tid int) (leave func() error, err error)
	// Roots, when set, registers the sandbox as a launch root carrying
	// Ident before it may run (--block-fd; runtime.md U2).
	Roots *launchroot.Registry
	Ident launchroot.Identity
}

// Start starts bwrap with the spec. The process runs in its own process group
// and dies with the daemon (PR_SET_PDEATHSIG → bwrap --die-with-parent). A
// held start (Roots, Place or a net sandbox) runs its program through the gate (gate.go):
// a daemon that dies before the release leaves nothing running.
func Start(o Options) (*Proc, error) {
	// Every sandboxed process runs under the seccomp filter; a
	// start without one fails closed.
	name := argv0(o.Spec)
	filter, err := seccomp.File()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer filter.Close() // bwrap has its own copy once started
	o.Spec.Files = slices.Clip(o.Spec.Files)
	o.Spec.SeccompFD = o.Spec.Pass(filter)
	var info, infoW *os.File
	if o.Spec.Egress != nil || len(o.Spec.Anchors) > 0 {
		// A net sandbox is connected, and a view with anchors checked,
		// while it is held: bwrap's --info-fd names the child whose
		// network namespace gets the listeners and whose view is checked.
		ir, iw, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("start %s: info pipe: %w", name, err)
		}
		defer ir.Close()
		defer iw.Close()
		o.Spec.InfoFD = o.Spec.Pass(iw)
		info, infoW = ir, iw
	}
	// The environment (secrets: an MCP server's --env, an acp-v1 agent's
	// keys, .d/env) goes through a descriptor, never argv. spec: X11, B3
	envf, err := o.Spec.PassEnv()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if envf != nil {
		defer envf.Close() // bwrap has its own copy once started
	}
	if o.Enter != nil {
		o.Place = nil
	}
	// A net sandbox is connected, and a view with anchors checked, while held.
	held := o.Roots != nil || o.Place != nil || o.Spec.Egress != nil || len(o.Spec.Anchors) > 0
	// A held sandbox born inside its run's cgroup (Enter) is held on a
	// latched block (launchroot.Latch), which no EOF releases: if the
	// daemon dies first, its PID 1 stays blocked in the cgroup until the
	// reaper's sweep kills it. Any other held sandbox runs its program
	// through the gate, which the block's EOF aborts.
	latched := held && o.Enter != nil
	// bwrap's argv is made once, when the spec is final: Args stats the
	// host's system directories each time. An unheld start's is final
	// now; a held one's gets its block (and a gated one's the gate) below.
	cmd := exec.Command(o.Bwrap)
	if !held {
		args, err := o.Spec.Args()
		if err != nil {
			return nil, err
		}
		cmd.Args = append(cmd.Args, args...)
	}
	cmd.Env = []string{} // bwrap sets the sandbox's environment itself (--clearenv, then --args EnvFD)
	cmd.Dir = "/"
	var g *gate
	if held && !latched {
		// A held sandbox runs through the gate: the daemon's death before
		// the release aborts it (the block pipe's EOF would release it).
		var r *os.File
		if g, r, err = newGate(o.Stdin, o.StdinPipe); err != nil {
			return nil, fmt.Errorf("start %s: gate: %w", name, err)
		}
		defer r.Close()           // bwrap has its own copy once started
		defer g.abortUnreleased() // unless released below: a failed start never runs the program
		o.Spec.Argv = gateArgv(o.Spec)
		cmd.Stdin = r
	} else if !o.StdinPipe {
		cmd.Stdin = bytes.NewReader(o.Stdin)
	}
	cmd.ExtraFiles = o.Spec.Files // numbered by Spec.Pass
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	max := o.StderrMax
	if max <= 0 {
		max = 64 << 10
	}
	p := &Proc{cmd: cmd, stderr: &Tail{Max: max}, done: make(chan struct{}), gate: g, info: info, infoW: infoW}
	cmd.Stderr = p.stderr
	if p.Stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if g != nil && o.StdinPipe {
		p.Stdin = g.w
	} else if o.StdinPipe {
		if p.Stdin, err = cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	// A net sandbox is held too, even with nothing to place.
	if !held {
		left, err := startIn(cmd, o.Enter)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		if err := awaitLeft(left); err != nil {
			killHeld(cmd)
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		return p, nil
	}
	if o.Roots == nil {
		if err := p.startHeld(o, cmd, name, latched); err != nil {
			return nil, err
		}
		g.open()
		return p, nil
	}
	prepare := o.Roots.Prepare
	if latched {
		prepare = o.Roots.PrepareLatched
	}
	launch, err := prepare(o.Ident, o.Spec.Files)
	if err != nil {
		return nil, err
	}
	o.Spec.BlockFD = launch.BlockFD
	args, err := o.Spec.Args()
	if err != nil {
		launch.Abort()
		return nil, err
	}
	cmd.Args = append([]string{o.Bwrap}, args...)
	cmd.ExtraFiles = launch.ExtraFiles
	left, err := startIn(cmd, o.Enter)
	if err != nil {
		launch.Abort()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if o.Place != nil {
		if err := o.Place(cmd.Process.Pid); err != nil {
			killHeld(cmd) // before the block pipe closes: EOF would release bwrap's child
			launch.Abort()
			return nil, fmt.Errorf("start %s: place: %w", name, err)
		}
	}
	// The root is registered (while bwrap makes the view), the view
	// checked and the network connected, and the program released, while
	// the thread that forked bwrap leaves the run's cgroup.
	var readyErr error
	release, err := launch.Started(cmd.Process, func() error { readyErr = p.attach(o); return readyErr })
	if err != nil {
		_ = cmd.Wait()
		_ = awaitLeft(left)
		launch.Abort()
		if readyErr != nil {
			return nil, p.noView(readyErr)
		}
		return nil, fmt.Errorf("start %s: launch root: %w", name, err)
	}
	g.open() // spec: U2 — only a registered root runs its program (a latched block needs no gate)
	if err := awaitLeft(left); err != nil {
		killHeld(cmd)
		release()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.release = release
	return p, nil
}

// attach checks a held sandbox's view (Spec.Anchors, checkView) and
// connects a net sandbox (Spec.Egress) to the daemon's proxy: the
// listeners are made inside its network namespace before anything of the
// sandbox runs, so no program inside ever sees a network without them.
// Without either it does nothing.
func (p *Proc) attach(o Options) error {
	if o.Spec.Egress == nil && len(o.Spec.Anchors) == 0 {
		return nil
	}
	if p.infoW != nil {
		_ = p.infoW.Close()
	}
	child, err := childPid(p.info, 10*time.Second)
	if err != nil {
		return fmt.Errorf("start %s: %w", o.Spec.Argv[0], err)
	}
	if len(o.Spec.Anchors) > 0 {
		if err := checkView(child, o.Spec.Anchors, 10*time.Second); err != nil {
			return fmt.Errorf("start %s: %w", o.Spec.Argv[0], err)
		}
	}
	if o.Spec.Egress == nil {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start %s: egress helper: %w", o.Spec.Argv[0], err)
	}
	px, err := egress.Attach(child, exe, *o.Spec.Egress, nil)
	if err != nil {
		return fmt.Errorf("start %s: %w", o.Spec.Argv[0], err)
	}
	p.egress = px
	return nil
}

// childPid reads bwrap's --info-fd JSON for the sandbox's first process
// (bwrap writes it after the clone, while the child waits on --block-fd).
func childPid(r *os.File, timeout time.Duration) (int, error) {
	_ = r.SetReadDeadline(time.Now().Add(timeout))
	var info struct {
		Child int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return 0, fmt.Errorf("bwrap --info-fd: %w", err)
	}
	if info.Child <= 0 {
		return 0, errors.New("bwrap --info-fd: no child-pid")
	}
	return info.Child, nil
}

// killHeld ends a bwrap still held on its block pipe, and the child it
// has already cloned (which would otherwise run once the pipe reads EOF),
// then reaps bwrap.
func killHeld(cmd *exec.Cmd) {
	killtree.Kill(cmd.Process.Pid)
	_ = cmd.Wait()
}

// startIn starts cmd; with enter, from an OS thread that enter moved into
// the run's cgroup first, so the child is born there; the thread then
// leaves the cgroup and is unlocked. Once cmd started, the thread leaves
// while the caller goes on (a held sandbox is registered and released
// meanwhile): the caller must receive from left before it returns, and
// fail the start on an error. A thread that cannot leave is never
// unlocked (its goroutine ends, and Go ends the thread): no daemon thread
// may stay in a run's cgroup, which is killed whole. left is nil without
// enter.
func startIn(cmd *exec.Cmd, enter func(tid int) (func() error, error)) (left <-chan error, err error) {
	if enter == nil {
		return nil, cmd.Start()
	}
	errc, leftc := make(chan error, 1), make(chan error, 1)
	go offLeader(isLeader, func() {
		leave, err := enter(unix.Gettid())
		if err != nil {
			if leave == nil || leave() != nil {
				errc <- fmt.Errorf("enter: %w", err) // the thread ends with this goroutine
				return
			}
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter: %w", err)
			return
		}
		if serr := cmd.Start(); serr != nil {
			if lerr := leave(); lerr != nil {
				errc <- fmt.Errorf("leave the run's cgroup: %w", lerr)
				return
			}
			runtime.UnlockOSThread()
			errc <- serr
			return
		}
		errc <- nil
		lerr := leave()
		if lerr == nil {
			runtime.UnlockOSThread()
		}
		leftc <- lerr
	})
	if err := <-errc; err != nil {
		return nil, err
	}
	return leftc, nil
}

// offLeader runs f on a goroutine locked to an OS thread that is not the
// daemon's thread-group leader (f unlocks it, or ends with it locked).
// A thread that enters a run's cgroup must not be the leader: on cgroup
// v1 a memcg OOM in that group picks its victim among the leaders of the
// processes with a thread in it, and the daemon's whole memory would then
// be weighed against the run's. When the locked thread is the leader, it
// stays locked — so f cannot be scheduled on it — until another locked
// thread has taken f.
func offLeader(isLeader func() bool, f func()) {
	runtime.LockOSThread()
	if !isLeader() {
		f()
		return
	}
	taken := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(taken)
		f()
	}()
	<-taken
	runtime.UnlockOSThread()
}

// isLeader reports whether the calling (locked) thread is the process's
// thread-group leader.
func isLeader() bool { return unix.Gettid() == unix.Getpid() }

// awaitLeft waits until the thread that started the process left the
// run's cgroup (startIn); nil left is nothing to wait for.
func awaitLeft(left <-chan error) error {
	if left == nil {
		return nil
	}
	if err := <-left; err != nil {
		return fmt.Errorf("leave the run's cgroup: %w", err)
	}
	return nil
}

// startHeld starts bwrap held on a block pipe of its own, runs o.Place
// (when set) and connects a net sandbox, then releases it: without launch
// roots, placement and the network still come first.
func (p *Proc) startHeld(o Options, cmd *exec.Cmd, name string, latched bool) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start %s: block pipe: %w", name, err)
	}
	if latched {
		lr, err := launchroot.Latch(pr)
		pr.Close()
		if err != nil {
			pw.Close()
			return fmt.Errorf("start %s: %w", name, err)
		}
		pr = lr
	}
	defer pr.Close()
	o.Spec.BlockFD = 3 + len(o.Spec.Files)
	args, err := o.Spec.Args()
	if err != nil {
		pw.Close()
		return err
	}
	cmd.Args = append([]string{o.Bwrap}, args...)
	cmd.ExtraFiles = append(append([]*os.File(nil), o.Spec.Files...), pr)
	left, err := startIn(cmd, o.Enter)
	if err != nil {
		pw.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := awaitLeft(left); err != nil {
		killHeld(cmd)
		pw.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	if o.Place != nil {
		if err := o.Place(cmd.Process.Pid); err != nil {
			killHeld(cmd) // before the block pipe closes: EOF would release bwrap's child
			pw.Close()
			return fmt.Errorf("start %s: place: %w", name, err)
		}
	}
	if err := p.attach(o); err != nil {
		killHeld(cmd)
		pw.Close()
		return p.noView(err)
	}
	_, err = pw.Write([]byte{1})
	pw.Close()
	if err != nil {
		killHeld(cmd)
		return fmt.Errorf("start %s: release: %w", name, err)
	}
	return nil
}

func argv0(s bwrap.Spec) string {
	if len(s.Argv) == 0 {
		return "sandbox"
	}
	return s.Argv[0]
}

// Pid is bwrap's host pid (the process-group leader).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Wait waits for exit (call once, from one goroutine, after stdout is drained).
func (p *Proc) Wait() error {
	p.once.Do(func() {
		p.err = p.cmd.Wait()
		if p.gate != nil {
			p.gate.abort() // ends a stdin writer the program never read
			<-p.gate.done
		}
		if p.egress != nil {
			_ = p.egress.Close() // the run's network ends with its sandbox
		}
		if p.release != nil {
			p.release()
		}
		close(p.done)
	})
	return p.err
}

// Done is closed after Wait returned.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Stderr returns the kept tail of stderr.
func (p *Proc) Stderr() []byte { return p.stderr.Bytes() }

// ExitCode of a finished process (-1 when killed by a signal).
func (p *Proc) ExitCode() int {
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Kill sends SIGKILL to the whole sandbox at once: every descendant and the
// process group. Killing the PID namespace's init ends everything inside it,
// setsid grandchildren included.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return // reaped: its pid (and pgid) may already belong to someone else
	default:
	}
	killtree.Kill(p.Pid()) // spec: X12
}

// Terminate sends SIGTERM to every process inside the sandbox (the agent's
// process group and any setsid descendants), waits up to grace for the
// sandbox to exit, then SIGKILLs it (X12). It returns at once; the grace
// timer ends with ctx, with the process, or after grace.
func (p *Proc) Terminate(ctx context.Context, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	killtree.Signal(p.Pid(), syscall.SIGTERM) // spec: X12
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			p.Kill()
		case <-ctx.Done():
			p.Kill()
		}
	}()
}

// Tail keeps the last Max bytes written to it.
type Tail struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append([]byte{}, t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of the kept bytes.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte{}, t.b...)
}

// ErrSandbox classifies bwrap's own failures.
var ErrSandbox = fmt.Errorf("sandbox unavailable")

// noView is err with what bwrap said when it is bwrap.ErrNoView (bwrap has
// been waited for: its stderr is whole). It was killed when its child was
// seen gone, usually before it could exit 1 itself: its message alone
// tells its failure (and the fix SandboxFailure names).
func (p *Proc) noView(err error) error {
	if !errors.Is(err, bwrap.ErrNoView) {
		return err
	}
	if serr := SandboxFailure(1, 0, p.Stderr()); serr != nil {
		return fmt.Errorf("%w: %w", bwrap.ErrNoView, serr)
	}
	return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(p.Stderr())))
}

// SandboxFailure recognises an exit that is bwrap failing to build the
// sandbox (not the program inside failing) and names the fix. Ubuntu's
// AppArmor user-namespace restriction is the common cause.
func SandboxFailure(code, stdoutLen int, stderr []byte) error {
	s := string(stderr)
	if code != 1 || stdoutLen != 0 || !strings.HasPrefix(s, "bwrap: ") {
		return nil
	}
	fix := "check that bubblewrap works: bwrap --unshare-all --ro-bind / / true"
	switch {
	case strings.Contains(s, "No permissions to create new namespace"),
		strings.Contains(s, "setting up uid map"), strings.Contains(s, "Operation not permitted"),
		strings.Contains(s, "Permission denied"):
		fix = "user namespaces are refused: on Ubuntu set sysctl kernel.apparmor_restrict_unprivileged_userns=0 or install an AppArmor profile for bwrap; elsewhere check user.max_user_namespaces"
	}
	return fmt.Errorf("%w: %s; %s", ErrSandbox, strings.TrimSpace(s), fix)
}
