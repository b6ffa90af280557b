package supervisor

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/actors/session"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

func testLayout(t *testing.T) layout.Layout {
	t.Helper()
	d := t.TempDir()
	return layout.Layout{Root: filepath.Join(d, "root"), Runtime: filepath.Join(d, "run"), UID: os.Getuid()}
}

// ask sends one line on the system socket and returns the answer.
func ask(t *testing.T, l layout.Layout, line string) string {
	t.Helper()
	c, err := net.Dial("unix", l.SystemSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestDaemonRunStopsEverything: a daemon started and cancelled answers
// ping, refuses a second daemon on its CTX_ROOT, and on cancel stops every
// component it started — Run returns, the system socket is gone, the lock
// is free, and no goroutine of its is left.
func TestDaemonRunStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l := testLayout(t)
	s := config.Settings{Layout: l, CancelGrace: 200 * time.Millisecond, ApprovalTimeout: time.Second, DiskReserve: 0}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- (&Daemon{Settings: s, Log: discardLog}).Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", l.SystemSocket()); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-ran:
			t.Fatalf("Run returned before it served: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the system socket never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, want := ask(t, l, `{"op":"ping"}`), string((&ipc.Frame{Type: ipc.TypePong, Version: config.Version}).Line()); got != want {
		t.Fatalf("ping: %q, want %q", got, want)
	}
	// The frame built through ErrorFrame is the bytes the hand-built one was.
	old := &ipc.Frame{Type: ipc.TypeError, Code: ipc.CodeBadRequest, Message: "the system socket serves ping and terminal.start|stop|status; send send to the agent socket"}
	if got := ask(t, l, `{"op":"send","id":"m1","input":"hi"}`); got != string(old.Line()) {
		t.Fatalf("send on the system socket: %q, want %q", got, old.Line())
	}
	// A second daemon on the same CTX_ROOT fails at its first component
	// and stops nothing of the first one's.
	if err := (&Daemon{Settings: s, Log: discardLog}).Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Fatalf("second daemon: %v, want ErrRunning", err)
	}
	if got := ask(t, l, `{"op":"ping"}`); got == "" {
		t.Fatal("the first daemon stopped with the second")
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if _, err := os.Lstat(l.SystemSocket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("system socket left behind: %v", err)
	}
	unlock, err := lockDaemon(l.UserHome())
	if err != nil {
		t.Fatalf("the daemon lock was not released: %v", err)
	}
	unlock()
}

// drainActor stands for the sessions: on Drain it concludes the counted
// runs after a while, as a session does once its cancelled run's done is
// committed.
type drainActor struct {
	runs  *config.RunCount
	after time.Duration
	n     int64
}

func (a *drainActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*session.Drain); ok {
		runs, n := a.runs, a.n
		time.AfterFunc(a.after, func() {
			for range n {
				runs.Add(-1)
			}
		})
	}
}

// TestDrainWaitsOnTheRunsThemselves: the drain returns when the last run
// concludes (a notification, not a poll), and at its deadline when runs
// are still active.
func TestDrainWaitsOnTheRunsThemselves(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	for _, tc := range []struct {
		name      string
		concluded int64 // runs the stand-in concludes
		wantIdle  bool
	}{{"all conclude", 2, true}, {"one stays", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			runs := &config.RunCount{}
			runs.Add(2)
			const after, deadline = 150 * time.Millisecond, 600 * time.Millisecond
			pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &drainActor{runs: runs, after: after, n: tc.concluded} }))
			defer sys.Root.Stop(pid)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			t0 := time.Now()
			drain(ctx, sys, pid, runs, discardLog)
			took := time.Since(t0)
			if tc.wantIdle {
				if runs.Load() != 0 || took < after || took >= deadline {
					t.Fatalf("drain returned after %v with %d runs; want when the last concluded (%v)", took, runs.Load(), after)
				}
			} else if runs.Load() != 1 || took < deadline {
				t.Fatalf("drain returned after %v with %d runs; want at its deadline (%v)", took, runs.Load(), deadline)
			}
		})
	}
}

// TestRootActorStopsItsLoops: stopping the root actor ends its scanner and
// receipts reader without waiting inside Receive; the daemon's wait on
// loops returns once the actor is gone.
func TestRootActorStopsItsLoops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l := testLayout(t)
	if err := os.MkdirAll(l.AgentDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.New(config.Settings{Layout: l}, config.Services{Log: discardLog})
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var loops sync.WaitGroup
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &rootActor{cfg: cfg, loops: &loops} }), "supervisor")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ScanInterval) // a scan or two
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { loops.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(2 * time.Second):
		t.Fatal("the root actor's loops outlived it")
	}
}

// A single daemon refuses a cluster's shared root (its marker written by
// a cluster node): it would append to segmented logs that etcd's owners
// seal. Nothing is created, not even the runtime directory.
func TestDaemonRefusesAClusterRoot(t *testing.T) {
	l := testLayout(t)
	if err := os.MkdirAll(l.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.ClusterMarker(), []byte(`{"cluster":"c1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(l.Runtime)
	s := config.Settings{Layout: l, CancelGrace: 200 * time.Millisecond, ApprovalTimeout: time.Second}
	err := (&Daemon{Settings: s, Log: discardLog}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ctx-cluster") {
		t.Fatalf("Run on a cluster root: %v", err)
	}
	if _, err := os.Stat(l.AgentDir()); err == nil {
		t.Error("the refused daemon created agent/")
	}
	if _, err := os.Stat(l.Runtime); err == nil {
		t.Error("the refused daemon created its runtime directory")
	}
}
