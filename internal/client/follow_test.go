package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ipc"
)

// server is a daemon stand-in on a real unix socket: each connection is
// handed to the next of script, which gets the lines the client sent.
type server struct {
	path string
	ln   *net.UnixListener
	got  chan []string // per connection, the request lines it read
}

func newServer(t *testing.T, script ...func(c *net.UnixConn, r *bufio.Reader, got *[]string)) *server {
	t.Helper()
	s := &server{path: filepath.Join(t.TempDir(), "a.sock"), got: make(chan []string, len(script))}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, step := range script {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			var got []string
			step(c, r, &got)
			c.Close()
			s.got <- got
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return s
}

func (s *server) dial(context.Context) (*Conn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, lr: ipc.NewLineReaderSize(c, ipc.MaxFrameLine), w: bufio.NewWriter(c)}, nil
}

func readLine(r *bufio.Reader, got *[]string) string {
	l, _ := r.ReadString('\n')
	l = strings.TrimSuffix(l, "\n")
	*got = append(*got, l)
	return l
}

func frame(c *net.UnixConn, f ipc.Frame) {
	b, _ := json.Marshal(f)
	c.Write(append(b, '\n'))
}

// TestFollowReattachesAfterADrop: dropped with slow_client after three
// frames, the follower dials again, sends the same request, asks again for
// the cancel it asked before the drop, skips the replayed frames by seq
// and answers an approval on the connection that carries the run now: the
// caller sees every frame once, in order. spec: P4 P2
func TestFollowReattachesAfterADrop(t *testing.T) {
	run := "r1"
	s := newServer(t,
		func(c *net.UnixConn, r *bufio.Reader, got *[]string) {
			readLine(r, got) // the send
			for i := int64(1); i <= 3; i++ {
				frame(c, ipc.Frame{Type: ipc.TypeDelta, Run: run, Seq: i, Text: fmt.Sprint(i)})
			}
			readLine(r, got) // the cancel asked before the drop
			frame(c, ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeSlowClient, Message: "slow"})
		},
		func(c *net.UnixConn, r *bufio.Reader, got *[]string) {
			readLine(r, got)                 // the send again
			readLine(r, got)                 // the cancel again
			for i := int64(1); i <= 4; i++ { // a replay, then one new frame
				frame(c, ipc.Frame{Type: ipc.TypeDelta, Run: run, Seq: i, Text: fmt.Sprint(i)})
			}
			frame(c, ipc.Frame{Type: ipc.TypeApprovalRequest, Run: run, ID: "a1", Seq: 5})
			readLine(r, got) // the approval's answer, here
			frame(c, ipc.Frame{Type: ipc.TypeDone, Run: run, Seq: 6, Status: ipc.StatusCancelled})
		},
	)
	conn, err := s.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f, err := Follow(context.Background(), conn, Send("id-1", "default", "private", "/w", "hi"), s.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seqs []int64
	for it := range f.Items() {
		if it.Err != nil {
			t.Fatalf("after %v: %v", seqs, it.Err)
		}
		seqs = append(seqs, it.Frame.Seq)
		switch it.Frame.Type {
		case ipc.TypeDelta:
			if it.Frame.Seq == 3 {
				if err := f.Cancel(run); err != nil {
					t.Fatal(err)
				}
			}
		case ipc.TypeApprovalRequest:
			if err := f.Approve(run, it.Frame.ID, ipc.DecisionDeny); err != nil {
				t.Fatal(err)
			}
		}
		if it.Frame.Type == ipc.TypeDone {
			break
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6]" {
		t.Errorf("delivered seqs %v, want each of 1…6 once", seqs)
	}
	first, second := <-s.got, <-s.got
	if len(first) != 2 || !strings.Contains(first[0], `"op":"send"`) || !strings.Contains(first[1], `"op":"cancel"`) {
		t.Errorf("first connection read %q", first)
	}
	if len(second) != 3 || second[0] != first[0] || !strings.Contains(second[1], `"id":"r1"`) ||
		!strings.Contains(second[2], `"op":"approve"`) || !strings.Contains(second[2], `"decision":"deny"`) {
		t.Errorf("second connection read %q", second)
	}
}

// TestFollowGivesUp: a following whose reattaches bring nothing new ends
// with an error after MaxReattach, and one without redial ends at the
// first drop — it never loops for ever.
func TestFollowGivesUp(t *testing.T) {
	var steps []func(*net.UnixConn, *bufio.Reader, *[]string)
	for i := 0; i <= MaxReattach; i++ {
		steps = append(steps, func(c *net.UnixConn, r *bufio.Reader, got *[]string) {
			readLine(r, got)
			frame(c, ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeSlowClient})
		})
	}
	s := newServer(t, steps...)
	conn, _ := s.dial(context.Background())
	f, err := Follow(context.Background(), conn, Resume("default", "private"), s.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	select {
	case it := <-f.Items():
		if it.Err == nil || !strings.Contains(it.Err.Error(), "not keeping up") {
			t.Fatalf("item %+v, want the drop as the error", it)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the follower never gave up")
	}
	for i := 0; i <= MaxReattach; i++ {
		<-s.got
	}
}

// TestFollowCutMidFrame: a connection cut in the middle of a frame (the
// daemon dropping a client mid-write) is a drop, not a bad frame: the
// follower reattaches and delivers every frame once.
func TestFollowCutMidFrame(t *testing.T) {
	s := newServer(t,
		func(c *net.UnixConn, r *bufio.Reader, got *[]string) {
			readLine(r, got)
			frame(c, ipc.Frame{Type: ipc.TypeDelta, Run: "r", Seq: 1, Text: "a"})
			c.Write([]byte(`{"type":"delta","run":"r","se`))
		},
		func(c *net.UnixConn, r *bufio.Reader, got *[]string) {
			readLine(r, got)
			frame(c, ipc.Frame{Type: ipc.TypeDelta, Run: "r", Seq: 1, Text: "a"})
			frame(c, ipc.Frame{Type: ipc.TypeDelta, Run: "r", Seq: 2, Text: "b"})
			frame(c, ipc.Frame{Type: ipc.TypeDone, Run: "r", Seq: 3, Status: ipc.StatusOK})
		},
	)
	conn, _ := s.dial(context.Background())
	f, err := Follow(context.Background(), conn, Send("id-2", "default", "private", "/w", "hi"), s.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seqs []int64
	for it := range f.Items() {
		if it.Err != nil {
			t.Fatalf("after %v: %v", seqs, it.Err)
		}
		seqs = append(seqs, it.Frame.Seq)
		if it.Frame.Type == ipc.TypeDone {
			break
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Errorf("delivered %v", seqs)
	}
	<-s.got
	<-s.got
}
