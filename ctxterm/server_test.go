package ctxterm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
)

type served struct {
	srv    *Server
	cancel context.CancelFunc
	done   chan struct{}
	status int
	err    error

	mu     sync.Mutex
	events []Event
}

func (s *served) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// wait returns Serve's result.
func (s *served) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
	if s.err != nil {
		t.Fatalf("Serve: %v", s.err)
	}
	return s.status
}

func serve(t *testing.T, argv []string, tweak func(*Config)) *served {
	t.Helper()
	s := &served{done: make(chan struct{})}
	cfg := Config{
		Socket: filepath.Join(t.TempDir(), "run", "main.sock"),
		Argv:   argv,
		Env:    []string{"PATH=/usr/bin:/bin", "TERM=dumb", "LANG=C"},
		Events: func(e Event) { s.mu.Lock(); s.events = append(s.events, e); s.mu.Unlock() },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.status, s.err = srv.Serve(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

func dial(t *testing.T, s *served, h Hello) *Conn {
	t.Helper()
	c, err := DialHello(s.srv.Addr(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expect reads output until it contains want and returns all of it.
func expect(t *testing.T, c *Conn, want string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		f, err := c.Next()
		if err != nil {
			t.Fatalf("waiting for %q: %v; got %q", want, err, got)
		}
		if f.Type == FrameData {
			got = append(got, f.Payload...)
		}
	}
	return string(got)
}

// spec: S5/T2 — two watchers see the same bytes.
func TestTwoWatchersSeeSameBytes(t *testing.T) {
	s := serve(t, []string{"sh", "-c", "stty -echo; read x; seq 1 20000; exit 0"}, nil)
	w1 := dial(t, s, Hello{Mode: ModeWatch})
	w2 := dial(t, s, Hello{Mode: ModeWatch})
	a := dial(t, s, Hello{Mode: ModeAttach})
	var outs [2]bytes.Buffer
	var wg sync.WaitGroup
	for i, w := range []*Conn{w1, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := w.CopyOutput(&outs[i])
			if err != nil || st != 0 {
				t.Errorf("watcher %d: %d %v", i, st, err)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let stty run before the line
	a.Write([]byte("go\n"))
	wg.Wait()
	if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) {
		t.Fatalf("watchers differ: %d vs %d bytes", outs[0].Len(), outs[1].Len())
	}
	if !bytes.Contains(outs[0].Bytes(), []byte("19999\r\n20000\r\n")) {
		t.Fatalf("output incomplete: %q", outs[0].Bytes()[max(0, outs[0].Len()-100):])
	}
	if st := s.wait(t); st != 0 {
		t.Fatalf("status %d", st)
	}
}

// spec: S5/T2 — a watch connection's bytes (and resizes) never reach the PTY.
func TestWatchIsReadOnly(t *testing.T) {
	s := serve(t, []string{"cat"}, nil)
	w := dial(t, s, Hello{Mode: ModeWatch, Cols: 33, Rows: 11})
	if r := w.Ready(); r.Mode != ModeWatch || r.Cols != 80 || r.Rows != 24 {
		t.Fatalf("ready %+v: a watcher's hello size must not apply", r)
	}
	if _, err := w.Write([]byte("SECRET-WATCH\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Resize(10, 5); err != nil {
		t.Fatal(err)
	}
	a := dial(t, s, Hello{Mode: ModeAttach})
	a.Write([]byte("visible\n"))
	// cat echoes (tty echo) and prints: two copies.
	outA := expect(t, a, "visible\r\nvisible\r\n")
	outW := expect(t, w, "visible\r\nvisible\r\n")
	for _, out := range []string{outA, outW} {
		if strings.Contains(out, "SECRET") {
			t.Fatalf("watch input reached the PTY: %q", out)
		}
	}
	a2 := dial(t, s, Hello{Mode: ModeWatch})
	if r := a2.Ready(); r.Cols != 80 || r.Rows != 24 {
		t.Fatalf("watcher resized the PTY: %+v", r)
	}
	for _, e := range s.Events() {
		if e.Type == EventResized {
			t.Fatalf("resize event from a watcher: %+v", e)
		}
	}
}

// spec: S5 — attach input reaches the program; its exit status reaches
// clients and Serve. Events are reported with peer credentials.
func TestAttachInputAndExitStatus(t *testing.T) {
	s := serve(t, []string{"sh", "-c", `read x; echo "got:$x"; exit 7`}, nil)
	a := dial(t, s, Hello{Mode: ModeAttach})
	a.Write([]byte("hello\n"))
	var out bytes.Buffer
	st, err := a.CopyOutput(&out)
	if err != nil || st != 7 {
		t.Fatalf("CopyOutput: %d %v", st, err)
	}
	if !strings.Contains(out.String(), "got:hello") {
		t.Fatalf("output %q", out.String())
	}
	if st := s.wait(t); st != 7 {
		t.Fatalf("Serve status %d", st)
	}
	if _, err := os.Stat(s.srv.Addr()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
	var types []EventType
	for _, e := range s.Events() {
		types = append(types, e.Type)
		if e.Type == EventAttached && (e.PID != os.Getpid() || e.UID != os.Getuid() || e.Mode != ModeAttach) {
			t.Fatalf("attached event %+v", e)
		}
		if e.Type == EventExited && e.Status != 7 {
			t.Fatalf("exited event %+v", e)
		}
	}
	if len(types) != 3 || types[0] != EventAttached || !(types[1] == EventExited || types[2] == EventExited) {
		t.Fatalf("events %v", types)
	}
}

// A signal death is reported as 128+N.
func TestExitBySignal(t *testing.T) {
	s := serve(t, []string{"sh", "-c", "kill -KILL $$"}, nil)
	if st := s.wait(t); st != 128+9 {
		t.Fatalf("status %d", st)
	}
}

// A process the program left behind holding the terminal open (here one
// that ignores the hang-up) does not keep Serve from returning the
// program's status: the master is closed under its reader. spec: T2
func TestOrphanHoldingTheSlave(t *testing.T) {
	tag := "sleep 29." + strconv.Itoa(os.Getpid()) // a duration no other sleep has
	s := serve(t, []string{"sh", "-c", `trap "" HUP; ` + tag + ` & sleep 0.2; exit 3`}, nil)
	t.Cleanup(func() { exec.Command("pkill", "-f", tag).Run() })
	t0 := time.Now()
	if st := s.wait(t); st != 3 {
		t.Fatalf("status %d", st)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("Serve returned %v after the program's exit", took)
	}
	if out, err := exec.Command("pgrep", "-f", tag).Output(); err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Errorf("the orphan was not running while Serve returned (the test proves nothing): %v", err)
	}
}

// spec: S5 — attach resize reaches the program (stty size); the hello size
// applies on join.
func TestResizeReachesProgram(t *testing.T) {
	s := serve(t, []string{"sh", "-c", "stty -echo; while read x; do stty size; done"}, nil)
	a := dial(t, s, Hello{Mode: ModeAttach, Cols: 100, Rows: 40})
	if r := a.Ready(); r.Cols != 100 || r.Rows != 40 {
		t.Fatalf("ready %+v", r)
	}
	time.Sleep(50 * time.Millisecond)
	a.Write([]byte("\n"))
	expect(t, a, "40 100")
	if err := a.Resize(120, 50); err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("\n"))
	expect(t, a, "50 120")
	var n int
	for _, e := range s.Events() {
		if e.Type == EventResized {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d resized events, want 2", n)
	}
}

// spec: T2 — a late joiner gets a bounded scrollback replay, then live output.
func TestScrollbackReplay(t *testing.T) {
	const sb = 4096
	s := serve(t, []string{"sh", "-c", `i=0; while [ $i -lt 400 ]; do echo "line-$i-padding-padding"; i=$((i+1)); done; echo END; read x; echo LIVE`},
		func(c *Config) { c.Scrollback = sb })
	a := dial(t, s, Hello{Mode: ModeAttach})
	expect(t, a, "END\r\n")
	late := dial(t, s, Hello{Mode: ModeWatch})
	late.SetDeadline(time.Now().Add(5 * time.Second))
	f, err := late.Next()
	if err != nil || f.Type != FrameData {
		t.Fatalf("first frame %v %v", f.Type, err)
	}
	replay := string(f.Payload)
	if len(replay) != sb || !strings.HasSuffix(replay, "line-399-padding-padding\r\nEND\r\n") || strings.Contains(replay, "line-0-") {
		t.Fatalf("replay of %d bytes: ...%q", len(replay), replay[max(0, len(replay)-60):])
	}
	late.SetDeadline(time.Time{})
	a.Write([]byte("\n"))
	expect(t, late, "LIVE")
}

// spec: T2 — a client that never reads is dropped with a reason; another
// client keeps receiving everything and nobody stalls.
func TestSlowClientDropped(t *testing.T) {
	const total = 8 << 20
	s := serve(t, []string{"sh", "-c", "stty -echo raw; read x; head -c " + strconv.Itoa(total) + " /dev/zero; exit 0"},
		func(c *Config) { c.ClientQueue = 256 << 10 })
	slow, err := net.Dial("unix", s.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slow.Write(Hello{Mode: ModeWatch}.Marshal())
	fast := dial(t, s, Hello{Mode: ModeAttach})
	time.Sleep(100 * time.Millisecond)
	fast.Write([]byte("go\n"))
	var n countWriter
	start := time.Now()
	st, err := fast.CopyOutput(&n)
	if err != nil || st != 0 {
		t.Fatalf("fast client: %d %v", st, err)
	}
	if int(n) < total {
		t.Fatalf("fast client got %d of %d bytes", n, total)
	}
	t.Logf("fast client: %d bytes in %v", n, time.Since(start))
	s.wait(t)
	var dropped bool
	for _, e := range s.Events() {
		if e.Type == EventDetached && strings.Contains(e.Reason, "too slow") {
			dropped = true
		}
	}
	if !dropped {
		t.Fatalf("slow client not dropped: %+v", s.Events())
	}
	// The slow client finds its connection closed (possibly after a
	// partial frame) rather than hanging.
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, slow); err != nil {
		t.Fatalf("slow client: %v", err)
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// A bad hello or a bad frame gets an error frame and a close; the server
// keeps serving everyone else.
func TestBadInputClosesOnlyThatClient(t *testing.T) {
	s := serve(t, []string{"cat"}, nil)
	keeper := dial(t, s, Hello{Mode: ModeAttach})
	hello := string(Hello{Mode: ModeAttach}.Marshal())
	tests := []struct {
		name string
		send string
	}{
		{"not json", "hello there\n"},
		{"bad mode", `{"mode":"spy"}` + "\n"},
		{"bad version", `{"mode":"watch","v":9}` + "\n"},
		{"hello too long", strings.Repeat("x", MaxHelloLen+10)},
		{"unknown frame", hello + string(AppendFrame(nil, 0x7f, nil))},
		{"oversized frame", hello + string([]byte{FrameData, 0x7f, 0, 0, 0})},
		{"short resize", hello + string(AppendFrame(nil, FrameResize, []byte{1, 2, 3}))},
		{"exit from client", hello + string(AppendFrame(nil, FrameExit, ExitPayload(0)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("unix", s.srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte(tt.send))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			d := NewDecoder(c, 0)
			var last Frame
			for {
				f, err := d.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("want a clean close, got %v", err)
					}
					break
				}
				last = Frame{f.Type, bytes.Clone(f.Payload)}
			}
			if last.Type != FrameError {
				t.Fatalf("last frame %#x %q, want an error frame", last.Type, last.Payload)
			}
			t.Logf("reason: %s", last.Payload)
		})
	}
	keeper.Write([]byte("still-here\n"))
	expect(t, keeper, "still-here\r\nstill-here\r\n")
}

// spec: T2 — SO_PEERCRED: a uid not allowed is refused before its hello is
// read.
func TestPeerUIDRefusedByConfig(t *testing.T) {
	s := serve(t, []string{"cat"}, func(c *Config) { c.AllowedUIDs = []int{os.Getuid() + 4242} })
	_, err := Dial(s.srv.Addr(), ModeWatch)
	var se *ServerError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "permission denied") {
		t.Fatalf("err %v, want permission denied", err)
	}
}

// spec: T2 — SO_PEERCRED with a real second uid: the socket file is opened
// up on purpose so only the credential check stands in the way.
func TestPeerUIDRefusedOtherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	const nobody = 65534
	s := serve(t, []string{"cat"}, nil)
	dir := filepath.Dir(s.srv.Addr())
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	os.Chmod(s.srv.Addr(), 0o777)
	// The test binary must be executable by nobody.
	bin := filepath.Join(t.TempDir(), "client.test")
	os.Chmod(filepath.Dir(bin), 0o755)
	self, _ := os.ReadFile(os.Args[0])
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(uid int) string {
		cmd := exec.Command(setpriv, "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups", bin)
		cmd.Env = []string{helperEnv + "=" + s.srv.Addr()}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as uid %d: %v: %s", uid, err, out)
		}
		return string(out)
	}
	if out := run(nobody); !strings.Contains(out, "refused") || !strings.Contains(out, "permission denied") {
		t.Fatalf("uid %d: %s", nobody, out)
	}
	if out := run(0); !strings.Contains(out, "accepted") {
		t.Fatalf("uid 0: %s", out)
	}
}

// spec: T2 — socket hygiene: 0700 dir, 0600 socket, a live socket refused,
// a stale one replaced.
func TestSocketHygiene(t *testing.T) {
	s := serve(t, []string{"cat"}, nil)
	st, _ := os.Stat(s.srv.Addr())
	dst, _ := os.Stat(filepath.Dir(s.srv.Addr()))
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Fatalf("socket %v dir %v", st.Mode(), dst.Mode())
	}
	if _, err := New(Config{Socket: s.srv.Addr(), Argv: []string{"true"}}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second server on a live socket: %v", err)
	}

	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	s2 := serve(t, []string{"cat"}, func(c *Config) { c.Socket = stale })
	dial(t, s2, Hello{Mode: ModeWatch})

	notSock := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notSock, nil, 0o600)
	if _, err := New(Config{Socket: notSock, Argv: []string{"true"}}); err == nil {
		t.Fatal("a regular file was replaced by a socket")
	}
	if _, err := Dial(filepath.Join(t.TempDir(), "none.sock"), ModeWatch); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("dial missing socket: %v", err)
	}
}

// Cancelling Serve hangs up the PTY: a shell ignoring SIGTERM still ends,
// clients get the exit frame, the socket goes away.
func TestCancelHangsUp(t *testing.T) {
	s := serve(t, []string{"sh", "-c", `trap "" TERM; echo ready; while :; do sleep 1; done`}, nil)
	w := dial(t, s, Hello{Mode: ModeWatch})
	expect(t, w, "ready")
	start := time.Now()
	s.cancel()
	st := s.wait(t)
	if st != 128+int(syscall.SIGHUP) {
		t.Fatalf("status %d", st)
	}
	if d := time.Since(start); d > DefaultHangupGrace {
		t.Fatalf("hangup took %v", d)
	}
	if _, err := w.CopyOutput(io.Discard); err != nil {
		t.Fatalf("watcher after hangup: %v", err)
	}
	if _, err := os.Stat(s.srv.Addr()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left: %v", err)
	}
}

// Too many clients are refused with a reason.
func TestMaxClients(t *testing.T) {
	s := serve(t, []string{"cat"}, func(c *Config) { c.MaxClients = 1 })
	dial(t, s, Hello{Mode: ModeWatch})
	if _, err := Dial(s.srv.Addr(), ModeWatch); err == nil || !strings.Contains(err.Error(), "too many") {
		t.Fatalf("err %v", err)
	}
}

// spec: S5 — RunClient attach with a pipe as stdin: input flows, the exit
// status comes back.
func TestRunClientAttachPipe(t *testing.T) {
	s := serve(t, []string{"sh", "-c", `read x; echo "got:$x"; exit 5`}, nil)
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	w.Write([]byte("piped\n"))
	var out lockedBuffer
	st, err := RunClient(context.Background(), s.srv.Addr(), ModeAttach, r, &out)
	if err != nil || st != 5 {
		t.Fatalf("RunClient: %d %v", st, err)
	}
	if !strings.Contains(out.String(), "got:piped") {
		t.Fatalf("out %q", out.String())
	}
}

// spec: S5 — on a real terminal: raw mode while joined, the detach key ends
// the client without sending it, and the terminal is restored.
func TestRunClientDetachRestoresTerminal(t *testing.T) {
	s := serve(t, []string{"cat"}, nil)
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	defer tty.Close()
	before, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	type res struct {
		st  int
		err error
	}
	done := make(chan res, 1)
	go func() {
		st, err := RunClient(context.Background(), s.srv.Addr(), ModeAttach, tty, &out)
		done <- res{st, err}
	}()
	// Wait for raw mode, then type a line and the detach key.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := term.GetState(int(tty.Fd()))
		if st != nil && *st != *before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("terminal never entered raw mode")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ptm.Write([]byte("typed\r"))
	for !strings.Contains(out.String(), "typed") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ptm.Write([]byte{DetachKey})
	r := <-done
	if !errors.Is(r.err, ErrDetached) {
		t.Fatalf("RunClient: %d %v", r.st, r.err)
	}
	after, _ := term.GetState(int(tty.Fd()))
	if *after != *before {
		t.Fatal("terminal not restored")
	}
	if !strings.Contains(out.String(), "typed") {
		t.Fatalf("out %q", out.String())
	}
	// The program is still running: detach is not exit.
	dial(t, s, Hello{Mode: ModeWatch})
}

// spec: T4 — nothing on the socket: ErrUnavailable (the CLI's exit 3).
func TestRunClientUnavailable(t *testing.T) {
	_, err := RunClient(context.Background(), filepath.Join(t.TempDir(), "x.sock"), ModeWatch, os.Stdin, io.Discard)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
