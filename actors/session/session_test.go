package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// The session actor starts a log-opening goroutine, a writer goroutine per
// incarnation and one writer per client connection; none may outlive it.
// The actor system is shut down by every test before it returns, so no
// protoactor goroutine needs to be ignored.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	t.Cleanup(sys.Shutdown)
	return sys
}

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	return &config.Config{
		Layout:          layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: os.Getuid()},
		CancelGrace:     100 * time.Millisecond,
		ApprovalTimeout: time.Second,
		Log:             discard,
		Procs:           &sync.WaitGroup{},
	}
}

var key = Key{Agent: "a", Scope: layout.ScopePrivate, Name: "default"}

// seed writes events.jsonl as a daemon SIGKILLed mid-run leaves it: a
// finished run (msg-0) and a run (msg-1) with user, start and a delta, no done.
func seed(t *testing.T, cfg *config.Config) (dir string, doneReq *ipc.Request) {
	t.Helper()
	dir = cfg.Layout.SessionDir(key.Agent, key.Scope, key.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	doneReq, err := ipc.ParseRequest([]byte(`{"op":"send","id":"msg-0","input":"first"}`))
	if err != nil {
		t.Fatal(err)
	}
	frames := []ipc.Frame{
		{Type: ipc.TypeUser, Run: "run-1-aaaaaa", ID: "msg-0", Text: "first", Digest: doneReq.Digest()},
		{Type: ipc.TypeStart, Run: "run-1-aaaaaa", ID: "msg-0", Op: "send"},
		{Type: ipc.TypeAssistant, Run: "run-1-aaaaaa", Text: "one"},
		{Type: ipc.TypeDone, Run: "run-1-aaaaaa", ID: "msg-0", Status: "ok"},
		{Type: ipc.TypeUser, Run: "run-5-bbbbbb", ID: "msg-1", Text: "second"},
		{Type: ipc.TypeStart, Run: "run-5-bbbbbb", ID: "msg-1", Op: "send"},
		{Type: ipc.TypeDelta, Run: "run-5-bbbbbb", Text: "partial"},
	}
	var b bytes.Buffer
	for i, f := range frames {
		f.Session, f.Seq, f.TS = key.Name, int64(i+1), "2026-01-02T03:04:05.000Z"
		b.Write(f.Line())
	}
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, doneReq
}

type event struct {
	ipc.Frame
	raw string
}

func readEvents(t *testing.T, path string) []event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, ln := range strings.SplitAfter(string(b), "\n") {
		if ln == "" {
			continue
		}
		var f ipc.Frame
		if err := json.Unmarshal([]byte(ln), &f); err != nil {
			t.Fatalf("events.jsonl line %q: %v", ln, err)
		}
		out = append(out, event{f, ln})
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client is the far end of a real unix socket pair whose near end is an ipc.Conn.
type client struct {
	t    *testing.T
	conn *ipc.Conn
	c    *net.UnixConn
	r    *bufio.Reader
}

func newClient(t *testing.T) *client {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	server, far := conv(fds[0]), conv(fds[1])
	cred := unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	cl := &client{t: t, conn: ipc.NewConn(server, cred), c: far, r: bufio.NewReader(far)}
	t.Cleanup(func() {
		cl.conn.Close()
		cl.c.Close()
	})
	return cl
}

// next reads one frame (5 s at most).
func (cl *client) next() event {
	cl.t.Helper()
	_ = cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	ln, err := cl.r.ReadString('\n')
	if err != nil {
		cl.t.Fatalf("reading a frame: %v (partial %q)", err, ln)
	}
	var f ipc.Frame
	if err := json.Unmarshal([]byte(ln), &f); err != nil {
		cl.t.Fatalf("frame %q: %v", ln, err)
	}
	return event{f, ln}
}

// until reads frames up to and including the first of type typ.
func (cl *client) until(typ string) []event {
	cl.t.Helper()
	var out []event
	for {
		e := cl.next()
		out = append(out, e)
		if e.Type == typ {
			return out
		}
	}
}

func types(es []event) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

func stop(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatalf("poison: %v", err)
	}
}

// TestRecoverInterruptedRunThenResume: a session whose log shows a run
// with user but no done (a daemon SIGKILLed mid-run) is concluded by the
// host on start — error interrupted, then done with status error and the
// user's request id — and nothing is resumed. A resume then streams the
// stored frames byte for byte and caught_up with active_run null.
// spec: L4, X7, P2 (resume), P5
func TestRecoverInterruptedRunThenResume(t *testing.T) {
	sys := newSystem(t)
	cfg := testConfig(t)
	dir, _ := seed(t, cfg)
	events := filepath.Join(dir, "events.jsonl")

	pid, err := sys.Root.SpawnNamed(Props(cfg, key, NewKeep()), "session")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(t, sys, pid) }() // the pid of the last incarnation

	waitFor(t, "the interrupted run to be concluded", func() bool {
		ev := readEvents(t, events)
		return ev[len(ev)-1].Type == ipc.TypeDone
	})
	ev := readEvents(t, events)
	if len(ev) != 9 {
		t.Fatalf("events.jsonl holds %d frames: %s", len(ev), types(ev))
	}
	e, d := ev[7], ev[8]
	if e.Type != ipc.TypeError || e.Code != ipc.CodeInterrupted || e.Run != "run-5-bbbbbb" || e.Message == "" {
		t.Fatalf("conclusion %s", e.raw)
	}
	if d.Type != ipc.TypeDone || d.Status != "error" || d.ID != "msg-1" || d.Run != "run-5-bbbbbb" {
		t.Fatalf("done %s", d.raw)
	}
	for i, f := range ev {
		if f.Seq != int64(i+1) || f.Session != key.Name {
			t.Fatalf("line %d: seq %d session %q", i+1, f.Seq, f.Session)
		}
	}
	// messages.jsonl carries the error conclusion (X7: one conclusion per run).
	msgs, _ := os.ReadFile(filepath.Join(dir, "messages.jsonl"))
	if !strings.Contains(string(msgs), `"role":"error"`) || strings.Count(string(msgs), "\n") != 4 {
		t.Fatalf("messages.jsonl:\n%s", msgs)
	}

	cl := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})
	got := cl.until(ipc.TypeCaughtUp)
	if len(got) != len(ev)+1 {
		t.Fatalf("resume: %s", types(got))
	}
	for i := range ev {
		if got[i].raw != ev[i].raw {
			t.Fatalf("resume frame %d:\n got %s\nwant %s", i, got[i].raw, ev[i].raw)
		}
	}
	cu := got[len(got)-1]
	if cu.raw != `{"type":"caught_up","session":"default","active_run":null}`+"\n" {
		t.Fatalf("caught_up %s", cu.raw)
	}

	// Starting again concludes nothing twice.
	stop(t, sys, pid)
	pid, err = sys.Root.SpawnNamed(Props(cfg, key, NewKeep()), "session-again")
	if err != nil {
		t.Fatal(err)
	}
	cl2 := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl2.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})
	if got := cl2.until(ipc.TypeCaughtUp); len(got) != len(ev)+1 {
		t.Fatalf("second start: %s", types(got))
	}
	if n := len(readEvents(t, events)); n != len(ev) {
		t.Fatalf("a second start appended %d frames", n-len(ev))
	}
}

// TestResumeRightAfterStart: a resume that reaches the session while it is
// still opening its log (the first request after a daemon restart) must see
// the interrupted run's host conclusion in the history it streams before
// caught_up — otherwise the client is told nothing is active while the run
// it follows never shows its done. spec: L4, P2 (resume streams the stored
// frames, then caught_up)
func TestResumeRightAfterStart(t *testing.T) {
	sys := newSystem(t)
	cfg := testConfig(t)
	seed(t, cfg)
	cl := newClient(t)

	pid, err := sys.Root.SpawnNamed(Props(cfg, key, NewKeep()), "session")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sys, pid)
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})

	got := cl.until(ipc.TypeCaughtUp)
	want := "user start assistant done user start delta error done caught_up"
	if types(got) != want {
		t.Fatalf("resume right after start:\n got %s\nwant %s", types(got), want)
	}
}

// TestReplayAndConflict: a repeated request id replays the durable frames
// marked replay:true and runs nothing; the same id with another payload is
// id_conflict; a cancel with no active run is not_found. spec: P4
func TestReplayAndConflict(t *testing.T) {
	sys := newSystem(t)
	cfg := testConfig(t)
	dir, doneReq := seed(t, cfg)
	events := filepath.Join(dir, "events.jsonl")

	pid, err := sys.Root.SpawnNamed(Props(cfg, key, NewKeep()), "session")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sys, pid)
	waitFor(t, "recovery", func() bool { ev := readEvents(t, events); return ev[len(ev)-1].Type == ipc.TypeDone })
	before := readEvents(t, events)

	cl := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: doneReq})
	got := cl.until(ipc.TypeDone)
	if types(got) != "user start assistant done" {
		t.Fatalf("replay: %s", types(got))
	}
	for i, e := range got {
		if !e.Replay || e.Run != "run-1-aaaaaa" || e.raw != string(ipc.MarkReplay([]byte(before[i].raw))) {
			t.Fatalf("replayed frame %d: %s", i, e.raw)
		}
	}

	other, _ := ipc.ParseRequest([]byte(`{"op":"send","id":"msg-0","input":"something else"}`))
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: other})
	if e := cl.next(); e.Type != ipc.TypeError || e.Code != ipc.CodeIDConflict || e.ID != "msg-0" {
		t.Fatalf("reused id with another payload: %s", e.raw)
	}

	cancel, _ := ipc.ParseRequest([]byte(`{"op":"cancel","session":"default"}`))
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: cancel})
	if e := cl.next(); e.Type != ipc.TypeError || e.Code != ipc.CodeNotFound {
		t.Fatalf("cancel with nothing active: %s", e.raw)
	}

	// Nothing ran: the log is unchanged.
	if after := readEvents(t, events); len(after) != len(before) {
		t.Fatalf("replay appended %d frames", len(after)-len(before))
	}
}

// TestCorruptLogRefusesRequests: a corrupt line in the middle makes the
// session refuse every request with session_corrupt; nothing is appended.
// spec: L4 (durable history is never rewritten to fit)
func TestCorruptLogRefusesRequests(t *testing.T) {
	sys := newSystem(t)
	cfg := testConfig(t)
	dir := cfg.Layout.SessionDir(key.Agent, key.Scope, key.Name)
	os.MkdirAll(dir, 0o700)
	content := `{"type":"user","session":"default","seq":1,"ts":"t","run":"r","id":"m","text":"x"}` + "\nnot json\n" +
		`{"type":"done","session":"default","seq":3,"ts":"t","run":"r","id":"m","status":"ok"}` + "\n"
	os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(content), 0o600)

	pid, err := sys.Root.SpawnNamed(Props(cfg, key, NewKeep()), "session")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sys, pid)
	cl := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})
	e := cl.next()
	if e.Type != ipc.TypeError || e.Code != ipc.CodeSessionCorrupt || !strings.Contains(e.Message, "events.jsonl:2") {
		t.Fatalf("corrupt log: %s", e.raw)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "events.jsonl")); string(b) != content {
		t.Fatal("a corrupt log was modified")
	}
}
