package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Candidate statuses reported to onCandidate; they are the `candidate`
// frame's status values (interfaces.md "Socket frames").
const (
	CandidateUnusable = "unusable" // the window invariant (or the name) rules it out
	CandidateFailed   = "failed"   // connection failure, 5xx or 429 after retries, or refused credentials
	// CandidateRetrying is no candidate frame: onCandidate hears of each
	// retry (reason: the failure and the wait) so a person sees it live.
	CandidateRetrying = "retrying"
)

// Options tune a Dispatcher. Zero values are the production defaults.
type Options struct {
	Logger *slog.Logger
	// Sleep waits d or until ctx is done (then it returns ctx's error).
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1).
	Jitter func() float64
}

// Dispatcher sends a turn to the first candidate that works (W6). It is safe
// for concurrent use.
type Dispatcher struct {
	entries map[string]entry
	log     *slog.Logger
	sleep   func(context.Context, time.Duration) error
	jitter  func() float64
}

type entry struct {
	p        Provider
	retry    RetryPolicy
	keyError error
}

// NewDispatcher builds one provider per configured entry.
func NewDispatcher(cfg Config, opts Options) (*Dispatcher, error) {
	d := &Dispatcher{entries: map[string]entry{}, log: opts.Logger, sleep: opts.Sleep, jitter: opts.Jitter}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.sleep == nil {
		d.sleep = sleepCtx
	}
	if d.jitter == nil {
		d.jitter = rand.Float64
	}
	for name, pc := range cfg.Providers {
		p := pc.Impl
		if p == nil {
			switch pc.Kind {
			case KindAnthropic:
				p = NewAnthropic(pc)
			case KindOpenAI:
				p = NewOpenAI(pc)
			default:
				return nil, fmt.Errorf("provider %q: %w: type %q", name, ErrConfig, pc.Kind)
			}
		}
		r := pc.Retry
		if r.Attempts < 1 {
			r.Attempts = 1
		}
		if r.MaxBackoff <= 0 {
			r.MaxBackoff = DefaultMaxBackoff
		}
		if r.MaxRetryAfter <= 0 {
			r.MaxRetryAfter = DefaultMaxRetryAfter
		}
		d.entries[name] = entry{p: p, retry: r, keyError: pc.KeyError}
	}
	return d, nil
}

// CloseIdleConnections releases every provider's idle connections.
func (d *Dispatcher) CloseIdleConnections() {
	for _, e := range d.entries {
		if c, ok := e.p.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}

// Providers lists the configured provider names.
func (d *Dispatcher) Providers() []string {
	names := make([]string, 0, len(d.entries))
	for n := range d.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Prepare returns the request for one candidate ("provider/model"), or ok
// false and the reason it is unusable. It is where the caller re-checks the
// window invariant for that candidate and renders the message array within
// that candidate's budget (W6, W8).
type Prepare func(model string) (req Request, ok bool, reason string)

// Fixed is the Prepare for one request whatever the candidate, with usable
// (nil: every candidate is usable) ruling candidates out.
func Fixed(req Request, usable func(model string) (bool, string)) Prepare {
	return func(model string) (Request, bool, string) {
		if usable != nil {
			if ok, reason := usable(model); !ok {
				return Request{}, false, reason
			}
		}
		return req, true, ""
	}
}

// Dispatch streams one turn from the first candidate that works and returns
// the candidate used. For each candidate in order: one that prepare rules out
// is reported "unusable"; otherwise it is tried up to its RetryPolicy's
// attempts while the failure is a connection failure, a 5xx or a 429, with
// exponential backoff, jitter and retry-after honoured; then it is reported
// "failed" and the next candidate is tried. Once any event was emitted
// nothing is retried: the error is returned (retrying would duplicate
// output). Other failures (4xx, malformed stream, an error from emit) are
// returned at once. When every candidate is unusable or failed the error
// wraps ErrModelUnavailable. Cancellation returns an error wrapping ctx.Err().
// onCandidate may be nil.
func (d *Dispatcher) Dispatch(ctx context.Context, candidates []string, prepare Prepare, emit func(Event) error, onCandidate func(model, status, reason string)) (string, error) {
	report := func(model, status, reason string) {
		d.log.Warn("model candidate skipped", "model", model, "status", status, "reason", reason)
		if onCandidate != nil {
			onCandidate(model, status, reason)
		}
	}
	if prepare == nil {
		return "", fmt.Errorf("dispatch: %w: no request", ErrConfig)
	}
	var reasons []string
	for _, cand := range candidates {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("dispatch: %w", err)
		}
		name, model, ok := strings.Cut(cand, "/")
		e, known := d.entries[name]
		if !ok || model == "" || !known {
			reason := fmt.Sprintf("no provider %q is configured (candidates are provider/model)", name)
			report(cand, CandidateUnusable, reason)
			reasons = append(reasons, cand+": "+reason)
			continue
		}
		req, ok, reason := prepare(cand) // spec: W6 — every candidate re-checks the window invariant
		if !ok {
			report(cand, CandidateUnusable, reason)
			reasons = append(reasons, cand+": "+reason)
			continue
		}
		if e.keyError != nil {
			report(cand, CandidateFailed, e.keyError.Error())
			reasons = append(reasons, cand+": "+e.keyError.Error())
			continue
		}
		req.Model = model
		err := d.try(ctx, cand, e, req, emit, func(reason string) {
			if onCandidate != nil {
				onCandidate(cand, CandidateRetrying, reason)
			}
		})
		if err == nil {
			return cand, nil
		}
		var fe *failedError
		if !errors.As(err, &fe) {
			return cand, err
		}
		report(cand, CandidateFailed, fe.err.Error())
		reasons = append(reasons, cand+": "+fe.err.Error())
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("dispatch: %w: no model candidates", ErrModelUnavailable)
	}
	return "", fmt.Errorf("dispatch: %w: %s", ErrModelUnavailable, strings.Join(reasons, "; "))
}

// failedError marks a candidate that failed in a way that moves on (W6).
type failedError struct{ err error }

func (e *failedError) Error() string { return e.err.Error() }

// try runs the attempts on one candidate.
func (d *Dispatcher) try(ctx context.Context, cand string, e entry, req Request, emit func(Event) error, retrying func(reason string)) error {
	for attempt := 0; ; attempt++ {
		emitted := false
		err := e.p.Stream(ctx, req, func(ev Event) error {
			emitted = true
			return emit(ev)
		})
		if err == nil {
			return nil
		}
		var ee *emitError
		switch {
		case errors.As(err, &ee):
			return ee.err
		case ctx.Err() != nil:
			return fmt.Errorf("dispatch %s: %w", cand, ctx.Err())
		case emitted:
			// Output already reached the caller: a retry would repeat it.
			return fmt.Errorf("dispatch %s: failed after output began: %w", cand, err)
		case !retryable(err):
			return fmt.Errorf("dispatch %s: %w", cand, err)
		}
		if attempt+1 >= e.retry.Attempts {
			return &failedError{fmt.Errorf("%w (after %d attempts)", err, attempt+1)}
		}
		delay, ok := d.backoff(e.retry, attempt, err)
		if !ok {
			return &failedError{fmt.Errorf("%w (retry-after over %v)", err, e.retry.MaxRetryAfter)}
		}
		d.log.Info("model request retry", "model", cand, "attempt", attempt+1, "delay", delay, "err", err.Error())
		retrying(fmt.Sprintf("%v; retrying in %v (attempt %d of %d)", err, delay.Round(100*time.Millisecond), attempt+2, e.retry.Attempts))
		if err := d.sleep(ctx, delay); err != nil {
			return fmt.Errorf("dispatch %s: %w", cand, err)
		}
	}
}

// retryable: connection failures, early disconnects, 429 and 5xx (W6).
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	return errors.Is(err, ErrConnection) || errors.Is(err, ErrIncomplete)
}

// backoff is Backoff·2^attempt capped at MaxBackoff, with "equal jitter" (half
// fixed, half random); a retry-after is honoured as a minimum, and one longer
// than MaxRetryAfter gives up on the candidate (ok false).
func (d *Dispatcher) backoff(r RetryPolicy, attempt int, err error) (time.Duration, bool) {
	delay := r.Backoff
	for i := 0; i < attempt && delay < r.MaxBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, r.MaxBackoff)
	delay = delay/2 + time.Duration(d.jitter()*float64(delay/2))
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		if se.RetryAfter > r.MaxRetryAfter {
			return 0, false
		}
		delay = max(delay, se.RetryAfter)
	}
	return delay, true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
