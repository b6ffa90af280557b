package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// component is one piece of the running daemon: a socket, a service, the
// actor system. Start brings it up (nil: nothing to start); Stop takes it
// down within Deadline (0: defaultDeadline; nil Stop: nothing to stop).
// Stop is given a context that ends at the deadline and should return by
// then; one that does not is left behind (and reported) so the components
// after it still stop.
type component struct {
	Name     string
	Start    func(ctx context.Context) error
	Stop     func(ctx context.Context) error
	Deadline time.Duration
}

// components starts the daemon's components in order and stops those
// started in the reverse order: what was built last, and may use what was
// built before it, goes first. The daemon's whole shutdown is this list.
type components struct {
	log     *slog.Logger
	started []component
}

func newComponents(log *slog.Logger) *components { return &components{log: log} }

// start starts c (after every component started before it) and keeps it
// for stop. A failed start starts nothing more: the caller stops what is
// up (stopAll) and returns the error, which Start words itself (it is
// what `ctx daemon` prints).
func (cs *components) start(ctx context.Context, c component) error {
	if c.Start != nil {
		if err := c.Start(ctx); err != nil {
			return err
		}
	}
	cs.started = append(cs.started, c)
	return nil
}

// stopAll stops every started component, the last started first, each
// within its deadline. It returns the stops that failed or ran late,
// joined; a late stop does not hold up the components after it.
func (cs *components) stopAll() error {
	var errs []error
	for i := len(cs.started) - 1; i >= 0; i-- {
		c := cs.started[i]
		if c.Stop == nil {
			continue
		}
		t0 := time.Now()
		if err := cs.stopOne(c); err != nil {
			cs.log.Warn("stop", "component", c.Name, "err", err, "took", time.Since(t0))
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
			continue
		}
		cs.log.Debug("stopped", "component", c.Name, "took", time.Since(t0))
	}
	cs.started = nil
	return errors.Join(errs...)
}

// ErrLate means a component's Stop did not return within its deadline.
var ErrLate = errors.New("did not stop within its deadline")

// defaultDeadline bounds a Stop that names no deadline of its own.
const defaultDeadline = 5 * time.Second

// stopOne runs c.Stop in a goroutine and waits for it at most c.Deadline.
// The goroutine is this list's: it ends when Stop returns, which a Stop
// honouring its context does at the deadline.
func (cs *components) stopOne(c component) error {
	d := c.Deadline
	if d <= 0 {
		d = defaultDeadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Stop(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// A Stop that watches its context returns now; give it a moment to
	// say why before calling it late.
	select {
	case err := <-done:
		return err
	case <-time.After(lateGrace):
		return fmt.Errorf("%w (%v)", ErrLate, d)
	}
}

// lateGrace is how long a Stop may take to return after its context ended.
const lateGrace = 50 * time.Millisecond
