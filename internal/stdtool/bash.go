package stdtool

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/killtree"
)

func init() {
	register(&Tool{
		Name:  "bash",
		Usage: "bash COMMAND_LINE [--timeout S]",
		Min:   1, Max: 1,
		Flags: []Flag{{Name: "--timeout", Value: true}},
		Meta: Meta{Description: `Run a command line with /bin/bash -c in the current directory; stdin is empty.
argv: bash COMMAND_LINE [--timeout S]   (the whole command line is one argument)
The result is the command's stdout, then its stderr after a [stderr] line, then [exit status N]. The call fails when the status is not 0.
--timeout is in seconds (default 120, at most 600); on timeout, or when the call is cancelled, the command and every process it started are ended.
Long output keeps its beginning and its end (about 12 KiB in all): redirect a large output to a file and read it with read --offset.
Example: bash 'go test ./... 2>&1 | tail -n 50' --timeout 300`},
		Run: runBash,
	})
}

const (
	bashDefaultTimeout = 120 * time.Second
	bashMaxTimeout     = 600 * time.Second
	// bashHead and bashTail are how much of the start and of the end of
	// each stream bash keeps in memory.
	bashHead = 4 << 10
	bashTail = 8 << 10
	// bashShow is what the result shows of both streams together; stderr
	// gets at most bashShowErr of it when stdout needs the rest.
	bashShow    = Budget - 1<<10
	bashShowErr = 4 << 10
)

// bashGrace is how long an ended command's processes get between SIGTERM
// and SIGKILL, and how long bash waits for the output pipes after the
// shell exited (a background process may still hold them). Tests lower it.
var bashGrace = 2 * time.Second

func runBash(ctx context.Context, a *Args, out *Output) error {
	line := a.Arg(0, "")
	if strings.TrimSpace(line) == "" {
		return Failf("bash: empty command line")
	}
	timeout, err := a.Seconds("--timeout", bashDefaultTimeout, bashMaxTimeout)
	if err != nil {
		return Failf("bash: %v", err)
	}
	r := runShell(ctx, line, timeout)
	stdout, stderr := r.stdout.show(), r.stderr.show()
	fitStreams(&stdout, &stderr)
	out.WriteString(stdout.text())
	if stdout.n > 0 && !strings.HasSuffix(stdout.text(), "\n") {
		out.WriteString("\n")
	}
	if stderr.n > 0 {
		out.WriteString("[stderr]\n" + stderr.text())
		if !strings.HasSuffix(stderr.text(), "\n") {
			out.WriteString("\n")
		}
	}
	if stdout.cut > 0 || stderr.cut > 0 {
		out.Note("[output cut in the middle; to see all of it, redirect it to a file (cmd > out.txt 2>&1) and read that with read --offset]")
	}
	if r.leftovers {
		out.Note("[processes the command left running were ended: a call's processes do not outlive it]")
	}
	if r.err != nil {
		return fmt.Errorf("run /bin/bash: %w", r.err)
	}
	status := r.status(timeout)
	if r.cmd.ProcessState.Success() && !r.timedOut && !r.cancelled {
		out.Note("%s", status)
		return nil
	}
	return &Failure{Msg: status}
}

// shellRun is how a command line ran.
type shellRun struct {
	stdout, stderr *headTail
	cmd            *exec.Cmd // nil when it did not start
	err            error     // it could not be started
	timedOut       bool
	cancelled      bool
	leftovers      bool // processes were still running after the shell exited
}

func (r *shellRun) status(timeout time.Duration) string {
	switch {
	case r.timedOut:
		return fmt.Sprintf("[timed out after %gs; process group ended]", timeout.Seconds())
	case r.cancelled:
		return "[cancelled; process group ended]"
	}
	ps := r.cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("[killed by signal %d (%s)]", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("[exit status %d]", ps.ExitCode())
}

// runShell runs /bin/bash -c line in its own process group. On timeout or
// when ctx is done the group gets SIGTERM, then SIGKILL after bashGrace;
// after the shell exits, whatever it left in its group is ended the same
// way once its output pipes close (or bashGrace passed).
func runShell(ctx context.Context, line string, timeout time.Duration) *shellRun {
	r := &shellRun{stdout: newHeadTail(bashHead, bashTail), stderr: newHeadTail(bashHead, bashTail)}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "/bin/bash", "-c", line)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The group's ender runs beside Wait (Cancel must not block it) but is
	// owned by this call: runShell returns only after it has finished, so
	// no goroutine of a call outlives the call.
	var ended sync.Once
	var ender sync.WaitGroup
	endGroup := func() {
		ended.Do(func() {
			pgid := cmd.Process.Pid
			ender.Add(1)
			go func() { defer ender.Done(); killGroup(pgid) }()
		})
	}
	cmd.Cancel = func() error {
		endGroup()
		return nil
	}
	// After Cancel (or after the shell exited), Wait waits this long for
	// the pipes, then closes them; a grandchild holding them cannot hang it.
	cmd.WaitDelay = bashGrace + 500*time.Millisecond
	if err := cmd.Start(); err != nil {
		r.err = err
		return r
	}
	r.cmd = cmd
	err := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		r.cancelled = true
	case tctx.Err() != nil:
		r.timedOut = true
	}
	pgid := cmd.Process.Pid
	if !r.cancelled && !r.timedOut && killtree.GroupAlive(pgid) {
		r.leftovers = true
	}
	// Nothing of the group outlives the call: end what is left, and wait
	// for it (SIGKILL at the latest after bashGrace).
	killGroupWait(pgid)
	ender.Wait()
	if cmd.ProcessState == nil { // Wait failed before the shell was reaped
		r.err = err
	}
	return r
}

// killGroup ends the group pgid: SIGTERM, then SIGKILL after bashGrace
// when some of it is still there.
func killGroup(pgid int) { killtree.TermGroup(pgid, bashGrace) }

// killGroupWait is killGroup, returning when the group is gone (or a short
// while after SIGKILL: a zombie is its reaper's to collect).
func killGroupWait(pgid int) {
	if !killtree.GroupAlive(pgid) {
		return
	}
	killGroup(pgid)
	for range 50 {
		if !killtree.GroupAlive(pgid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// headTail keeps the first head bytes and the last tail bytes written to
// it, counting what it drops in between. It is safe for concurrent use.
type headTail struct {
	mu         sync.Mutex
	head, tail []byte
	headMax    int
	tailMax    int
	n          int64 // bytes written in all
	lines      int64 // newlines written in all
}

func newHeadTail(head, tail int) *headTail {
	return &headTail{headMax: head, tailMax: tail}
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.n += int64(n)
	h.lines += int64(bytes.Count(p, []byte{'\n'}))
	if room := h.headMax - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= h.tailMax {
		h.tail = append(h.tail[:0], p[len(p)-h.tailMax:]...)
		return n, nil
	}
	if over := len(h.tail) + len(p) - h.tailMax; over > 0 {
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	h.tail = append(h.tail, p...)
	return n, nil
}

// streamView is a stream as the result shows it: its head, what was cut, its
// tail.
type streamView struct {
	head, tail []byte
	n          int64 // bytes written in all
	lines      int64 // newlines written in all
	cut        int64 // bytes left out between head and tail
}

func (h *headTail) show() streamView {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := streamView{head: bytes.Clone(h.head), tail: bytes.Clone(h.tail), n: h.n, lines: h.lines}
	s.cut = h.n - int64(len(s.head)) - int64(len(s.tail))
	if s.cut == 0 {
		s.head = append(s.head, s.tail...)
		s.tail = nil
	}
	return s
}

// size is what s shows, in bytes.
func (s *streamView) size() int { return len(s.head) + len(s.tail) }

// shrink makes s show at most max bytes: a quarter from the head, the rest
// from the tail (the end of a test run or a build matters most).
func (s *streamView) shrink(max int) {
	if s.size() <= max {
		return
	}
	headMax := max / 4
	tailMax := max - headMax
	if s.cut == 0 { // one piece: split it
		all := s.head
		s.head, s.tail = all[:headMax], all[len(all)-tailMax:]
		s.cut = int64(len(all) - headMax - tailMax)
		return
	}
	if len(s.head) > headMax {
		s.cut += int64(len(s.head) - headMax)
		s.head = s.head[:headMax]
	}
	if len(s.tail) > tailMax {
		s.cut += int64(len(s.tail) - tailMax)
		s.tail = s.tail[len(s.tail)-tailMax:]
	}
}

// snap moves the cut points to line boundaries when one is within a
// quarter of each part.
func (s *streamView) snap() {
	if s.cut == 0 {
		return
	}
	if i := bytes.LastIndexByte(s.head, '\n'); i >= 0 && i >= len(s.head)*3/4 {
		s.cut += int64(len(s.head) - i - 1)
		s.head = s.head[:i+1]
	}
	if i := bytes.IndexByte(s.tail, '\n'); i >= 0 && i < len(s.tail)/4 {
		s.cut += int64(i + 1)
		s.tail = s.tail[i+1:]
	}
}

// text is the stream with a marker where it was cut.
func (s *streamView) text() string {
	if s.cut == 0 {
		return string(s.head)
	}
	var b strings.Builder
	b.Write(s.head)
	if len(s.head) > 0 && s.head[len(s.head)-1] != '\n' {
		b.WriteByte('\n')
	}
	lines := s.lines - int64(bytes.Count(s.head, []byte{'\n'})+bytes.Count(s.tail, []byte{'\n'}))
	fmt.Fprintf(&b, "[… %d bytes (%d lines) cut …]\n", s.cut, lines)
	b.Write(s.tail)
	return b.String()
}

// fitStreams shrinks stdout and stderr to fit the result together: stderr
// to bashShowErr when both do not fit, stdout to what is left.
func fitStreams(stdout, stderr *streamView) {
	if stdout.size()+stderr.size() > bashShow {
		stderr.shrink(max(bashShowErr, bashShow-stdout.size()))
		stdout.shrink(bashShow - stderr.size())
	}
	stdout.snap()
	stderr.snap()
}
