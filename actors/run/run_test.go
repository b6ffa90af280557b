package run

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/ipc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tshDir != "" {
		os.RemoveAll(tshDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tsh is built once for the package's tests.
var (
	tshOnce sync.Once
	tshDir  string
	tshErr  error
)

func buildTsh() (string, error) {
	tshOnce.Do(func() {
		if tshDir, tshErr = os.MkdirTemp("", "run-test-tsh-"); tshErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", tshDir+"/tsh", "../../cmd/tsh")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			tshErr = fmt.Errorf("build tsh: %v %s", err, out)
		}
	})
	return tshDir + "/tsh", tshErr
}

// parent stands in for the session: it records the run's frames and, like
// the session, answers a done frame with Concluded.
type parent struct {
	spec  Spec
	cfg   *config.Config
	start startFunc // nil: proc.Start
	// onFrame, when set, sees every frame as it is emitted (on the
	// parent's actor; c.Sender() is the run).
	onFrame func(c actor.Context, f *ipc.Frame)
	mu      sync.Mutex
	frames  []ipc.Frame
	done    chan struct{}
	once    sync.Once
}

func (p *parent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		start := p.start
		if start == nil {
			start = proc.Start
		}
		c.Spawn(props(p.cfg, p.spec, start))
	case *Emit:
		p.mu.Lock()
		p.frames = append(p.frames, *m.Frame)
		p.mu.Unlock()
		if p.onFrame != nil {
			p.onFrame(c, m.Frame)
		}
		if m.Frame.Type == ipc.TypeDone {
			c.Send(c.Sender(), &Concluded{})
		}
	case *actor.Terminated:
		p.once.Do(func() { close(p.done) })
	}
}

func (p *parent) types() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, f := range p.frames {
		out = append(out, f.Type)
	}
	return out
}

func setup(t *testing.T) *config.Config {
	t.Helper()
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		t.Skip("bwrap not installed")
	}
	dir := t.TempDir()
	l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: os.Getuid()}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	tsh, err := buildTsh()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(tsh); err != nil || os.WriteFile(l.BinDir()+"/tsh", b, 0o755) != nil {
		t.Fatalf("install tsh: %v", err)
	}
	exe := filepath.Join(dir, "agent.sh")
	os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	if err := agentdef.Create(l, "a", agentdef.CreateOptions{Exec: exe}); err != nil {
		t.Fatal(err)
	}
	return &config.Config{Layout: l, Bwrap: "/usr/bin/bwrap", CancelGrace: 200 * time.Millisecond,
		ApprovalTimeout: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Procs: &sync.WaitGroup{}}
}

func runWith(t *testing.T, cfg *config.Config, spec Spec) *parent {
	t.Helper()
	return runParent(t, &parent{spec: spec, cfg: cfg})
}

// runParent runs p's run to its end and stops the actor system.
func runParent(t *testing.T, p *parent) *parent {
	t.Helper()
	cfg := p.cfg
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}), actor.WithDeadLetterThrottleInterval(time.Millisecond))
	p.done = make(chan struct{})
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the run did not stop; frames %v", p.types())
	}
	_ = system.Root.PoisonFuture(pid).Wait()
	cfg.Procs.Wait()
	system.Shutdown()
	return p
}

// TestTshOpFrames: a tsh op emits start, tool_call, tool_result, done and
// stops once its done is durable. spec: P3
func TestTshOpFrames(t *testing.T) {
	cfg := setup(t)
	p := runWith(t, cfg, Spec{Agent: "a", RunID: "run-1-aaaaaa", ReqID: "t1", Op: ipc.OpTsh, Session: "s", Scope: "private",
		Args: []string{"list"}, History: "[]", Attempts: &atomic.Int32{}})
	got := p.types()
	want := []string{"start", "tool_call", "tool_result", "done"}
	if len(got) != len(want) {
		t.Fatalf("frames %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frames %v", got)
		}
	}
	if d := p.frames[3]; d.Status != "ok" || d.ID != "t1" || d.Run != "run-1-aaaaaa" {
		t.Errorf("done %+v", d)
	}
}

// TestRestartedRunConcludesInterrupted: an incarnation that finds itself
// restarted runs nothing and concludes the run as interrupted. spec: L4
func TestRestartedRunConcludesInterrupted(t *testing.T) {
	cfg := setup(t)
	attempts := &atomic.Int32{}
	attempts.Store(1) // a previous incarnation crashed
	p := runWith(t, cfg, Spec{Agent: "a", RunID: "run-2-bbbbbb", ReqID: "t2", Op: ipc.OpTsh, Session: "s", Scope: "private",
		Args: []string{"list"}, History: "[]", Attempts: attempts})
	got := p.types()
	if len(got) != 2 || got[0] != "error" || got[1] != "done" || p.frames[0].Code != ipc.CodeInterrupted {
		t.Fatalf("frames %v %+v", got, p.frames)
	}
}
