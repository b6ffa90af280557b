package ipc

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair returns both ends of a real AF_UNIX stream socket pair.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(fd int, name string) *net.UnixConn {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close() // FileConn dups the descriptor
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conv(fds[0], "server"), conv(fds[1], "client")
}

func selfCred() unix.Ucred {
	return unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
}

// TestConnDeliversInOrder: lines, frames and a replayed history batch
// arrive in queue order; Close flushes what is queued, then closes. spec: P4
func TestConnDeliversInOrder(t *testing.T) {
	server, client := socketPair(t)
	defer client.Close()
	k := NewConn(server, selfCred())
	stored := [][]byte{
		(&Frame{Type: TypeUser, Session: "s", Seq: 1, TS: "t", Run: "r", ID: "m", Text: "hi"}).Line(),
		(&Frame{Type: TypeDone, Session: "s", Seq: 2, TS: "t", Run: "r", ID: "m", Status: "ok"}).Line(),
	}
	if !k.Send([]byte("{\"type\":\"pong\",\"version\":\"x\"}\n")) ||
		!k.SendBatch(stored, true) ||
		!k.SendBatch(nil, true) ||
		!k.SendBatch(stored, false) ||
		!k.SendFrame(&Frame{Type: TypeCaughtUp, Session: "s"}) {
		t.Fatal("a send to a live, reading client was refused")
	}
	k.Close()
	if k.Send([]byte("late\n")) {
		t.Fatal("Send after Close must report false")
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(all), "\n"), "\n")
	want := []string{`pong`, `user replay`, `done replay`, `user`, `done`, `caught_up`}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines: %q", len(lines), all)
	}
	for i, l := range lines {
		var f Frame
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		got := f.Type
		if f.Replay {
			got += " replay"
		}
		if got != want[i] {
			t.Errorf("line %d: %s, want %s", i, got, want[i])
		}
	}
	if string(stored[0]) != lines[3]+"\n" {
		t.Fatal("a replayed batch modified the stored lines")
	}
	if k.Dropped() {
		t.Fatal("a reading client was marked dropped")
	}
}

// TestConnDropsClientThatNeverReads: a client that reads nothing fills the
// socket buffer and then the bounded queue; it is dropped (and its socket
// closed) while Send never blocks the caller (the session actor).
// spec: STYLE 9 (PTY/frame fan-out never stalls), P2
func TestConnDropsClientThatNeverReads(t *testing.T) {
	server, client := socketPair(t)
	defer client.Close()
	k := NewConn(server, selfCred())
	line := []byte(`{"type":"delta","run":"r","text":"` + strings.Repeat("x", 1000) + `"}` + "\n")

	start := time.Now()
	var slowest time.Duration
	sent := 0
	for i := 0; i < 100*QueueLen; i++ {
		t0 := time.Now()
		ok := k.Send(line)
		if d := time.Since(t0); d > slowest {
			slowest = d
		}
		if !ok {
			break
		}
		sent++
	}
	if sent == 100*QueueLen {
		t.Fatalf("the queue never filled after %d sends", sent)
	}
	if sent < QueueLen {
		t.Fatalf("dropped after only %d sends (queue holds %d)", sent, QueueLen)
	}
	// Send is a non-blocking enqueue: even with -race one call stays far
	// below the 10 s write timeout a blocking send would have waited.
	if slowest > time.Second || time.Since(start) > 5*time.Second {
		t.Fatalf("Send blocked: slowest %v, total %v", slowest, time.Since(start))
	}
	if !k.Dropped() || !k.Closed() {
		t.Fatalf("Dropped %v Closed %v", k.Dropped(), k.Closed())
	}
	if k.Send(line) || k.SendFrame(&Frame{Type: TypeDone}) || k.SendBatch([][]byte{line}, false) {
		t.Fatal("a dropped client accepted more frames")
	}
	k.Close() // idempotent

	// The client, reading at last, gets whole lines and then the end of the
	// stream: the server side was closed (no goroutine is left writing).
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	// The slow_client notice is best effort (its write has a 100 ms
	// deadline); when it gets through it is a whole line among the others.
	r := bufio.NewReader(client)
	n, told := 0, false
	for {
		l, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(l) != 0 {
				t.Fatalf("the stream ends in a partial line of %d bytes", len(l))
			}
			break
		}
		if err != nil {
			t.Fatalf("after %d lines: %v", n, err)
		}
		var f Frame
		if err := json.Unmarshal(l, &f); err != nil {
			t.Fatalf("line %d is not a frame: %v", n, err)
		}
		if f.Type == TypeError && f.Code == CodeSlowClient {
			told = true
		} else {
			n++
		}
	}
	// n may be 0: on a loaded machine the queue can fill before the writer
	// goroutine first runs, and the drop closes the socket at once.
	if n > sent {
		t.Fatalf("read %d lines of %d sent", n, sent)
	}
	t.Logf("sent %d, delivered %d, told slow_client: %v", sent, n, told)
}

// TestConnApprovalSlot: one pending approval per connection; the next line
// belongs to it; a timeout withdraws it. spec: A2, A3
func TestConnApprovalSlot(t *testing.T) {
	server, client := socketPair(t)
	defer client.Close()
	k := NewConn(server, selfCred())
	defer k.Close()
	w1 := &ApprovalWait{Run: "r", ID: "c1"}
	w2 := &ApprovalWait{Run: "r", ID: "c2"}
	if !k.ExpectApproval(w1) {
		t.Fatal("first approval refused")
	}
	if k.ExpectApproval(w2) {
		t.Fatal("a second pending approval was accepted")
	}
	if k.CancelApproval(w2) {
		t.Fatal("cancelled an approval that was not pending")
	}
	if got := k.TakeApproval(); got != w1 {
		t.Fatalf("TakeApproval = %v", got)
	}
	if k.TakeApproval() != nil || k.CancelApproval(w1) {
		t.Fatal("an answered approval is still pending")
	}
	if !k.ExpectApproval(w2) || !k.CancelApproval(w2) || k.TakeApproval() != nil {
		t.Fatal("timeout must withdraw the pending approval")
	}
	k.Close()
	if k.ExpectApproval(w1) {
		t.Fatal("a closed connection accepted an approval")
	}
}
