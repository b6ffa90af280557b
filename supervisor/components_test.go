package supervisor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// order records the names of the components as they start and stop.
type order struct {
	mu  sync.Mutex
	got []string
}

func (o *order) note(s string) { o.mu.Lock(); o.got = append(o.got, s); o.mu.Unlock() }
func (o *order) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.got...)
}

func (o *order) component(name string) component {
	return component{Name: name, Deadline: time.Second,
		Start: func(context.Context) error { o.note("start " + name); return nil },
		Stop:  func(context.Context) error { o.note("stop " + name); return nil }}
}

// TestComponentsStopInReverseOrder: the daemon stops what it built last
// first (the system socket before the actors, the actors before the
// services they use).
func TestComponentsStopInReverseOrder(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var o order
	cs := newComponents(discardLog)
	for _, n := range []string{"lock", "cgroups", "actors", "socket"} {
		if err := cs.start(context.Background(), o.component(n)); err != nil {
			t.Fatal(err)
		}
	}
	// A component with nothing to stop is skipped.
	if err := cs.start(context.Background(), component{Name: "ticker"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.stopAll(); err != nil {
		t.Fatal(err)
	}
	want := []string{"start lock", "start cgroups", "start actors", "start socket",
		"stop socket", "stop actors", "stop cgroups", "stop lock"}
	if got := o.list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
	if err := cs.stopAll(); err != nil || len(o.list()) != len(want) {
		t.Fatalf("a second stopAll stopped again: %v %q", err, o.list())
	}
}

// TestComponentsFailedStartStopsWhatIsUp: a start that fails starts
// nothing after it, and stopAll stops only what was started.
func TestComponentsFailedStartStopsWhatIsUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var o order
	cs := newComponents(discardLog)
	boom := errors.New("boom")
	if err := cs.start(context.Background(), o.component("lock")); err != nil {
		t.Fatal(err)
	}
	bad := o.component("socket")
	bad.Start = func(context.Context) error { o.note("start socket"); return boom }
	if err := cs.start(context.Background(), bad); !errors.Is(err, boom) {
		t.Fatalf("start error = %v, want boom", err)
	}
	if err := cs.stopAll(); err != nil {
		t.Fatal(err)
	}
	want := []string{"start lock", "start socket", "stop lock"}
	if got := o.list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
}

// TestComponentsDeadlineHonoured: a Stop is given a context that ends at
// its deadline; one that waits on it returns then, with the reason.
func TestComponentsDeadlineHonoured(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cs := newComponents(discardLog)
	const deadline = 100 * time.Millisecond
	var left time.Duration
	c := component{Name: "drain", Deadline: deadline, Stop: func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			return errors.New("no deadline")
		}
		left = time.Until(d)
		<-ctx.Done()
		return ctx.Err()
	}}
	if err := cs.start(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	err := cs.stopAll()
	took := time.Since(t0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stopAll = %v, want the deadline", err)
	}
	if left <= 0 || left > deadline {
		t.Fatalf("Stop's context had %v left, want (0, %v]", left, deadline)
	}
	if took < deadline || took > deadline+time.Second {
		t.Fatalf("stopAll took %v, want about %v", took, deadline)
	}
}

// TestComponentsStuckDoesNotBlockTheOthers: a Stop that ignores its
// context is left behind at its deadline (ErrLate) and the components
// before it still stop, in order.
func TestComponentsStuckDoesNotBlockTheOthers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var o order
	cs := newComponents(discardLog)
	release := make(chan struct{})
	returned := make(chan struct{})
	const deadline = 100 * time.Millisecond
	stuck := component{Name: "stuck", Deadline: deadline, Stop: func(context.Context) error {
		defer close(returned)
		o.note("stop stuck")
		<-release // ignores its context
		return nil
	}}
	for _, c := range []component{o.component("lock"), o.component("cgroups"), stuck, o.component("socket")} {
		if err := cs.start(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	err := cs.stopAll()
	took := time.Since(t0)
	if !errors.Is(err, ErrLate) {
		t.Fatalf("stopAll = %v, want ErrLate", err)
	}
	if took > deadline+lateGrace+time.Second {
		t.Fatalf("a stuck component held the others up: stopAll took %v", took)
	}
	want := []string{"start lock", "start cgroups", "start socket",
		"stop socket", "stop stuck", "stop cgroups", "stop lock"}
	if got := o.list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
	close(release)
	<-returned // the left-behind Stop's goroutine ends with it (goleak)
}

// TestComponentsEveryStopHasADeadline: a component that names none gets
// defaultDeadline, so no stop of the daemon is unbounded.
func TestComponentsEveryStopHasADeadline(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cs := newComponents(discardLog)
	var left time.Duration
	var ok bool
	c := component{Name: "lock", Stop: func(ctx context.Context) error {
		var d time.Time
		d, ok = ctx.Deadline()
		left = time.Until(d)
		return nil
	}}
	if err := cs.start(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if err := cs.stopAll(); err != nil {
		t.Fatal(err)
	}
	if !ok || left <= defaultDeadline-time.Second || left > defaultDeadline {
		t.Fatalf("deadline %v left (set: %v), want about %v", left, ok, defaultDeadline)
	}
}
