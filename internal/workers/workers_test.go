package workers

import (
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSystem is an actor system that logs nothing.
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

// Every scheduled run runs once, from many senders at once.
func TestEveryRunRuns(t *testing.T) {
	p := New(time.Second)
	defer p.Close()
	const senders, each = 8, 500
	var ran atomic.Int64
	var wg sync.WaitGroup
	wg.Add(senders * each)
	for s := 0; s < senders; s++ {
		go func() {
			for i := 0; i < each; i++ {
				p.Schedule(func() { ran.Add(1); wg.Done() })
			}
		}()
	}
	wg.Wait()
	if got := ran.Load(); got != senders*each {
		t.Fatalf("ran %d of %d", got, senders*each)
	}
}

// One mailbox run after another is done by the workers already started,
// not a goroutine each (protoactor's default would start 200).
func TestWorkersAreReused(t *testing.T) {
	p := New(time.Minute)
	defer p.Close()
	done := make(chan struct{})
	for i := 0; i < 200; i++ {
		p.Schedule(func() { done <- struct{}{} })
		<-done
		for j := 0; j < 10; j++ {
			runtime.Gosched() // let the worker park again
		}
	}
	if n := p.Started(); n > 20 {
		t.Fatalf("%d workers started for 200 runs one after another", n)
	}
}

// Schedule never waits for a busy worker: every run starts while all the
// earlier ones are still blocked.
func TestScheduleNeverWaits(t *testing.T) {
	p := New(time.Minute)
	defer p.Close()
	const n = 64
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(n)
	for i := 0; i < n; i++ {
		p.Schedule(func() { running.Done(); <-release })
	}
	all := make(chan struct{})
	go func() { running.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("runs waited for busy workers")
	}
	close(release)
}

// Workers parked longer than the idle time are ended by the janitor.
func TestIdleWorkersEnd(t *testing.T) {
	p := New(20 * time.Millisecond)
	defer p.Close()
	done := make(chan struct{})
	release := make(chan struct{})
	for i := 0; i < 5; i++ {
		p.Schedule(func() { done <- struct{}{}; <-release })
	}
	for i := 0; i < 5; i++ {
		<-done
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for p.Parked() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for p.Parked() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.Parked(); n != 0 {
		t.Fatalf("%d workers still parked long after the idle time", n)
	}
	// Nothing of the pool is left running (VerifyNone retries while the
	// workers exit), and nothing is armed to wake an idle daemon.
	goleak.VerifyNone(t)
	p.mu.Lock()
	armed := p.armed
	p.mu.Unlock()
	if armed {
		t.Fatal("the idle timer is armed with no worker parked")
	}
}

// goid is the calling goroutine's id, from its stack's first line.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// The worker parked last takes the next run (its stack is the warm one).
func TestLastParkedWorkerTakesTheRun(t *testing.T) {
	p := New(time.Minute)
	defer p.Close()
	idA, idB := make(chan string, 1), make(chan string, 1)
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	p.Schedule(func() { idA <- goid(); <-releaseA })
	p.Schedule(func() { idB <- goid(); <-releaseB })
	a, b := <-idA, <-idB
	waitParked := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); p.Parked() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d parked, want %d", p.Parked(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// A's worker parks first, B's last.
	close(releaseA)
	waitParked(1)
	close(releaseB)
	waitParked(2)
	last := b
	if a == "" || b == "" || a == b {
		t.Fatalf("goroutine ids %q %q", a, b)
	}
	got := make(chan string, 1)
	p.Schedule(func() { got <- goid() })
	if g := <-got; g != last {
		t.Fatalf("run went to goroutine %s, want %s (parked last; the other is %s)", g, last, a)
	}
}

// Close waits for a busy worker; a run scheduled afterwards still runs.
func TestCloseWaitsForRuns(t *testing.T) {
	p := New(time.Minute)
	release, started := make(chan struct{}), make(chan struct{})
	p.Schedule(func() { close(started); <-release })
	<-started
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a run was still going")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	p.Close() // twice is harmless
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	<-ran
}

// An actor on the pool sees its messages in order, one at a time, as on
// protoactor's own dispatcher.
func TestMailboxOrder(t *testing.T) {
	p := New(time.Second)
	defer p.Close()
	sys := newSystem()
	defer sys.Shutdown()
	const n = 20000
	var inside atomic.Bool
	next, bad := 0, -1
	finished := make(chan struct{})
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		m, ok := c.Message().(int)
		if !ok {
			return
		}
		if !inside.CompareAndSwap(false, true) {
			bad = m
		}
		if m != next && bad < 0 {
			bad = m
		}
		next++
		inside.Store(false)
		if m == n-1 {
			close(finished)
		}
	}, actor.WithDispatcher(p)))
	for s := 0; s < n; s++ {
		sys.Root.Send(pid, s)
		if s%1000 == 0 {
			runtime.Gosched() // the mailbox goes idle and is scheduled again
		}
	}
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatalf("%d of %d messages processed", next, n)
	}
	if bad >= 0 {
		t.Fatalf("message %d out of order or processed concurrently", bad)
	}
	sys.Root.Stop(pid)
}

// BenchmarkPingPong: a message bounced between two actors (bounces per
// op), on the pool and on protoactor's default dispatcher in the same run.
func BenchmarkPingPong(b *testing.B) {
	const bounces = 1000
	run := func(b *testing.B, opts ...actor.PropsOption) time.Duration {
		sys := newSystem()
		defer sys.Shutdown()
		done := make(chan struct{})
		var peer *actor.PID
		left := b.N * bounces
		pong := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(int); ok {
				c.Send(peer, 0)
			}
		}, opts...))
		peer = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(int); ok {
				if left--; left <= 0 {
					close(done)
					return
				}
				c.Send(pong, 0)
			}
		}, opts...))
		t0 := time.Now()
		sys.Root.Send(pong, 0)
		<-done
		return time.Since(t0)
	}
	p := New(time.Second)
	defer p.Close()
	pool := run(b, actor.WithDispatcher(p))
	def := run(b)
	n := float64(b.N * bounces)
	b.ReportMetric(float64(pool.Nanoseconds())/n, "pool-ns/msg")
	b.ReportMetric(float64(def.Nanoseconds())/n, "default-ns/msg")
	b.ReportMetric(float64(pool)/float64(def), "pool/default")
}
