package agent

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startAgent spawns agent actor "a" on temporary directories with
// sessions passivated after idle (0: never) and dials its socket.
func startAgent(t *testing.T, idle time.Duration) (*actor.ActorSystem, *actor.PID, net.Conn) {
	t.Helper()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond)) // its goroutine ends before goleak looks
	root, rt := t.TempDir(), t.TempDir()
	os.MkdirAll(root+"/agent", 0o755)
	cfg := &config.Config{Layout: layout.Layout{Root: root, Runtime: rt, UID: os.Getuid()}, Log: discard, Procs: &sync.WaitGroup{},
		CancelGrace: 100 * time.Millisecond, ApprovalTimeout: time.Second, SessionIdle: idle}
	pid, err := sys.Root.SpawnNamed(Props(cfg, "a"), "agent/a")
	if err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	for i := 0; i < 100; i++ {
		if c, err = net.Dial("unix", cfg.Layout.RuntimeAgentSocket("a")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		sys.Root.StopFuture(pid).Wait()
		t.Fatal(err)
	}
	return sys, pid, c
}

// spec: L6 — an idle client (e.g. `ctx agent chat` at its prompt) that never sent a
// session request is not in a.conns; Stopping waits for its reader forever.
func TestStopWithIdleConnection(t *testing.T) {
	sys, pid, c := startAgent(t, 0)
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Errorf("agent actor did not stop with one idle client connected: %v", err)
	}
}

// TestPassivationLeavesNothingBehind: sessions that come and go through
// passivation leave no entry in the agent actor's maps, however many
// there were (idle sessions cost nothing).
func TestPassivationLeavesNothingBehind(t *testing.T) {
	sys, pid, c := startAgent(t, 20*time.Millisecond)
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	defer c.Close()
	lines := bufio.NewScanner(c)
	ask := func() *sizes {
		r, err := sys.Root.RequestFuture(pid, &stateSizes{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return r.(*sizes)
	}
	const n = 40
	for round := 0; round < 2; round++ { // the second round meets passivated names again
		for i := 0; i < n; i++ {
			fmt.Fprintf(c, `{"op":"resume","session":"s%d"}`+"\n", i)
			if !lines.Scan() {
				t.Fatalf("no answer to resume s%d: %v", i, lines.Err())
			}
		}
		if s := ask(); s.sessions == 0 {
			t.Fatalf("round %d: no live session right after %d requests: %+v", round, n, *s)
		}
		deadline := time.Now().Add(10 * time.Second)
		s := ask()
		for *s != (sizes{}) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			s = ask()
		}
		if *s != (sizes{}) {
			t.Fatalf("round %d: after every session passivated the agent actor still holds %+v", round, *s)
		}
	}
}
