package session

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An open, active session does not hold its log: a 24 MiB log of one
// finished run is resumed (served from the file) and replayed by request
// id, and the live heap with the session open stays a small fraction of
// the log — before the log's lines were read back from the file it held every line twice over.
func TestSessionHoldsNotItsLog(t *testing.T) {
	sys := newSystem(t)
	cfg := testConfig(t)
	dir := cfg.Layout.SessionDir(key.Agent, key.Scope, key.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	req, err := ipc.ParseRequest([]byte(`{"op":"send","id":"big","input":"go"}`))
	if err != nil {
		t.Fatal(err)
	}
	const run = "run-1-cccccc"
	var b bytes.Buffer
	seq := int64(0)
	add := func(f ipc.Frame) {
		seq++
		f.Session, f.Seq, f.TS, f.Run = key.Name, seq, "2026-01-02T03:04:05.000Z", run
		b.Write(f.Line())
	}
	add(ipc.Frame{Type: ipc.TypeUser, ID: "big", Text: "go", Digest: req.Digest()})
	add(ipc.Frame{Type: ipc.TypeStart, ID: "big", Op: "send"})
	chunk := strings.Repeat("d", 4000)
	for b.Len() < 24<<20 {
		add(ipc.Frame{Type: ipc.TypeDelta, Text: chunk})
	}
	add(ipc.Frame{Type: ipc.TypeAssistant, Text: "done"})
	add(ipc.Frame{Type: ipc.TypeDone, ID: "big", Status: "ok"})
	logSize := b.Len()
	if err := os.WriteFile(filepath.Join(dir, store.EventsFile), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b = bytes.Buffer{}

	base := heapInUse()
	pid, err := sys.Root.SpawnNamed(Props(cfg, key, NewKeep()), "session")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, sys, pid)

	// Resume: every stored byte, then caught_up.
	cl := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})
	n, last := drain(t, cl, ipc.TypeCaughtUp)
	if n != logSize || !strings.Contains(last, `"caught_up"`) {
		t.Fatalf("resume streamed %d bytes before %q, the log is %d", n, last, logSize)
	}
	// Replay by request id (P4): the run's lines, marked, then its done.
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: req})
	n, last = drain(t, cl, ipc.TypeDone)
	if n < logSize || !strings.Contains(last, `"replay":true`) {
		t.Fatalf("replay streamed %d bytes ending %q", n, last)
	}

	held := int64(heapInUse()) - int64(base)
	t.Logf("log %d MiB; live heap with the session open: %+d KiB", logSize>>20, held>>10)
	if held > int64(logSize)/8 {
		t.Fatalf("the open session holds %d KiB of heap for a %d KiB log", held>>10, logSize>>10)
	}
}

// drain reads frames up to the first of type typ without keeping them and
// returns the bytes before it and that frame's line.
func drain(t *testing.T, cl *client, typ string) (int, string) {
	t.Helper()
	r := bufio.NewReaderSize(cl.c, 1<<16)
	cl.r = r
	n := 0
	for {
		_ = cl.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		ln, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		if strings.Contains(ln, `"type":"`+typ+`"`) {
			return n, ln
		}
		n += len(ln)
	}
}

// The history an active session keeps is bounded: past a quarter more than
// MaxPromptHistory, messages neither history_messages nor the prompt can
// reach are dropped, and both render exactly as from the whole
// conversation. (The messages share one large string, so the test itself
// stays small.) spec: X5, W9
func TestHistoryTrimKeepsWhatTheWindowSees(t *testing.T) {
	big := strings.Repeat("m", 1<<20)
	roles := []string{"user", "tool", "assistant", "error"}
	var all []store.Message
	a := &Actor{}
	for i := range 240 {
		m := store.Message{Role: roles[i%4], Run: "r", Seq: int64(i + 1)}
		switch {
		case m.Role == "tool":
			m.Content, m.Name = big, "bash"
		case i%7 == 0:
			m.Text = "short"
		default:
			m.Text = big
		}
		all = append(all, m)
		a.addMessage(m)
		if i%37 == 0 || i == 239 {
			if got, want := historyJSON(a.msgs), historyJSON(all); got != want {
				t.Fatalf("after %d messages history_messages differs", i+1)
			}
			if got, want := promptHistory(a.msgs), promptHistory(all); !reflect.DeepEqual(got, want) {
				t.Fatalf("after %d messages the prompt's history differs (%d vs %d messages)", i+1, len(got), len(want))
			}
		}
	}
	if len(a.msgs) >= len(all) || a.msgsSize > MaxPromptHistory+MaxPromptHistory/4 {
		t.Fatalf("kept %d of %d messages, %d MiB", len(a.msgs), len(all), a.msgsSize>>20)
	}
}
