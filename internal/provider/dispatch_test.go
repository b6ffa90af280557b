package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type candidateReport struct{ model, status, reason string }

// harness is a Dispatcher over test servers with a recording sleep.
type harness struct {
	d       *Dispatcher
	mu      sync.Mutex
	slept   []time.Duration
	reports []candidateReport
	retries []string // the retry notices (CandidateRetrying), in order
}

func newHarness(t *testing.T, pcs ...ProviderConfig) *harness {
	t.Helper()
	h := &harness{}
	cfg := Config{Providers: map[string]ProviderConfig{}}
	for _, pc := range pcs {
		cfg.Providers[pc.Name] = pc
	}
	d, err := NewDispatcher(cfg, Options{
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			h.slept = append(h.slept, d)
			h.mu.Unlock()
			return ctx.Err()
		},
		Jitter: func() float64 { return 0.5 },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.CloseIdleConnections)
	h.d = d
	return h
}

func (h *harness) onCandidate(model, status, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if status == CandidateRetrying {
		h.retries = append(h.retries, reason)
		return
	}
	h.reports = append(h.reports, candidateReport{model, status, reason})
}

func (h *harness) dispatch(t *testing.T, cands []string, usable func(string) (bool, string), rec *recorder) (string, error) {
	t.Helper()
	return h.d.Dispatch(ctxTimeout(t, 10*time.Second), cands, Fixed(userTurn("hi"), usable), rec.emit, h.onCandidate)
}

// Test429RetryAfterThenSuccess: a 429 is retried after at least its
// retry-after, on the same candidate. spec: W6
func Test429RetryAfterThenSuccess(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			srv := newServer(t,
				status(429, map[string]string{"retry-after": "2"}, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests exceeded"}}`),
				replay(t, fixture(kind, "text")))
			h := newHarness(t, testConfig(kind, kind, srv.URL, testKey))
			var rec recorder
			used, err := h.dispatch(t, []string{kind + "/m"}, nil, &rec)
			if err != nil || used != kind+"/m" {
				t.Fatalf("used %q err %v", used, err)
			}
			if rec.text() != "Hello, world." || srv.requests() != 2 || len(h.reports) != 0 {
				t.Fatalf("text %q requests %d reports %v", rec.text(), srv.requests(), h.reports)
			}
			if len(h.slept) != 1 || h.slept[0] < 2*time.Second {
				t.Fatalf("slept %v, want one wait of at least retry-after 2s", h.slept)
			}
			// The retry is told as it happens: the status, the wait, the attempt.
			if len(h.retries) != 1 || !strings.Contains(h.retries[0], "429") || !strings.Contains(h.retries[0], "retrying in 2s (attempt 2 of 3)") {
				t.Fatalf("retries told %q", h.retries)
			}
			if srv.body(t, 1)["model"] != "m" {
				t.Fatalf("model sent %v", srv.body(t, 1)["model"])
			}
		})
	}
}

// Test500ThenFallback: a candidate that keeps answering 500 is retried with
// backoff, reported failed, and the next candidate answers. spec: W6
func Test500ThenFallback(t *testing.T) {
	bad := newServer(t, status(500, nil, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`))
	good := newServer(t, replay(t, "openai_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, bad.URL, testKey), testConfig("local", KindOpenAI, good.URL, ""))
	var rec recorder
	used, err := h.dispatch(t, []string{"anthropic/claude-sonnet-4-5", "local/qwen2.5-7b"}, nil, &rec)
	if err != nil || used != "local/qwen2.5-7b" {
		t.Fatalf("used %q err %v", used, err)
	}
	if bad.requests() != 3 || good.requests() != 1 || rec.text() != "Hello, world." {
		t.Fatalf("requests %d/%d text %q", bad.requests(), good.requests(), rec.text())
	}
	if len(h.reports) != 1 || h.reports[0].model != "anthropic/claude-sonnet-4-5" || h.reports[0].status != CandidateFailed ||
		!strings.Contains(h.reports[0].reason, "HTTP 500") {
		t.Fatalf("reports %+v", h.reports)
	}
	// Equal jitter at 0.5: 10ms·2^n → 7.5ms, 15ms.
	if len(h.slept) != 2 || h.slept[0] != 7500*time.Microsecond || h.slept[1] != 15*time.Millisecond {
		t.Fatalf("slept %v", h.slept)
	}
}

// TestCandidateUnusable: the caller's window check rules a candidate out;
// it is reported and never called. spec: W6
func TestCandidateUnusable(t *testing.T) {
	never := newServer(t, replay(t, "anthropic_text.sse"))
	good := newServer(t, replay(t, "openai_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, never.URL, testKey), testConfig("openai", KindOpenAI, good.URL, testKey))
	usable := func(model string) (bool, string) {
		if model == "anthropic/unknown-model" {
			return false, "window 300000 set explicitly but the model's limit is unknown"
		}
		return true, ""
	}
	var rec recorder
	used, err := h.dispatch(t, []string{"anthropic/unknown-model", "openai/gpt-4o"}, usable, &rec)
	if err != nil || used != "openai/gpt-4o" || never.requests() != 0 {
		t.Fatalf("used %q err %v requests %d", used, err, never.requests())
	}
	want := candidateReport{"anthropic/unknown-model", CandidateUnusable, "window 300000 set explicitly but the model's limit is unknown"}
	if len(h.reports) != 1 || h.reports[0] != want {
		t.Fatalf("reports %+v", h.reports)
	}
}

func TestAllCandidatesFail(t *testing.T) {
	dead := newServer(t, status(503, nil, "upstream down"))
	gone := newServer(t)
	goneURL := gone.URL
	gone.Close() // connection refused
	h := newHarness(t, testConfig("anthropic", KindAnthropic, dead.URL, testKey), testConfig("openai", KindOpenAI, goneURL, testKey))
	var rec recorder
	_, err := h.dispatch(t, []string{"nope/x", "anthropic/a", "openai/b", "noslash"}, nil, &rec)
	if !errors.Is(err, ErrModelUnavailable) {
		t.Fatalf("err %v", err)
	}
	statuses := []string{}
	for _, r := range h.reports {
		statuses = append(statuses, r.model+"="+r.status)
	}
	if got := strings.Join(statuses, " "); got != "nope/x=unusable anthropic/a=failed openai/b=failed noslash=unusable" {
		t.Fatalf("reports %s", got)
	}
	if !strings.Contains(h.reports[2].reason, "connection failed") {
		t.Fatalf("reason %q", h.reports[2].reason)
	}
	if len(rec.all()) != 0 {
		t.Fatalf("events %+v", rec.all())
	}
	if _, err := h.dispatch(t, nil, nil, &rec); !errors.Is(err, ErrModelUnavailable) {
		t.Fatalf("no candidates: %v", err)
	}
}

// TestNoRetryAfterOutput: once a delta reached the caller, a failure is
// returned, never retried (that would repeat output) and never a fallback.
func TestNoRetryAfterOutput(t *testing.T) {
	srv := newServer(t, abortAfter(t, "anthropic_text.sse", 4))
	next := newServer(t, replay(t, "openai_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey), testConfig("openai", KindOpenAI, next.URL, testKey))
	var rec recorder
	_, err := h.dispatch(t, []string{"anthropic/a", "openai/b"}, nil, &rec)
	if err == nil || errors.Is(err, ErrModelUnavailable) || !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "after output began") {
		t.Fatalf("err %v", err)
	}
	if srv.requests() != 1 || next.requests() != 0 || rec.text() != "Hello" || len(h.reports) != 0 {
		t.Fatalf("requests %d/%d text %q reports %v", srv.requests(), next.requests(), rec.text(), h.reports)
	}
}

// TestDisconnectBeforeOutputRetries: a drop before any event is a connection
// failure and is retried.
func TestDisconnectBeforeOutputRetries(t *testing.T) {
	srv := newServer(t, abortAfter(t, "anthropic_text.sse", 1), replay(t, "anthropic_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey))
	var rec recorder
	if _, err := h.dispatch(t, []string{"anthropic/a"}, nil, &rec); err != nil || srv.requests() != 2 {
		t.Fatalf("err %v requests %d", err, srv.requests())
	}
}

func TestPermanentErrorsReturnAtOnce(t *testing.T) {
	srv := newServer(t, status(400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`))
	next := newServer(t, replay(t, "openai_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey), testConfig("openai", KindOpenAI, next.URL, testKey))
	_, err := h.dispatch(t, []string{"anthropic/a", "openai/b"}, nil, &recorder{})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || se.Message != "max_tokens: too large" || errors.Is(err, ErrModelUnavailable) {
		t.Fatalf("err %v", err)
	}
	if srv.requests() != 1 || next.requests() != 0 {
		t.Fatalf("requests %d/%d", srv.requests(), next.requests())
	}
}

func TestRetryAfterTooLongMovesOn(t *testing.T) {
	srv := newServer(t, status(429, map[string]string{"retry-after": "3600"}, `{}`))
	next := newServer(t, replay(t, "openai_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey), testConfig("openai", KindOpenAI, next.URL, testKey))
	used, err := h.dispatch(t, []string{"anthropic/a", "openai/b"}, nil, &recorder{})
	if err != nil || used != "openai/b" || srv.requests() != 1 || len(h.slept) != 0 {
		t.Fatalf("used %q err %v requests %d slept %v", used, err, srv.requests(), h.slept)
	}
	if !strings.Contains(h.reports[0].reason, "retry-after over") {
		t.Fatalf("reason %q", h.reports[0].reason)
	}
}

func TestEmitErrorIsNotRetried(t *testing.T) {
	srv := newServer(t, replay(t, "anthropic_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey))
	stop := errors.New("run cancelled by the actor")
	_, err := h.d.Dispatch(ctxTimeout(t, 10*time.Second), []string{"anthropic/a"}, Fixed(userTurn("hi"), nil),
		func(Event) error { return stop }, nil)
	if err != stop || srv.requests() != 1 {
		t.Fatalf("err %v requests %d", err, srv.requests())
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := newServer(t, status(503, nil, ""))
	pc := testConfig("anthropic", KindAnthropic, srv.URL, testKey)
	pc.Retry.Backoff, pc.Retry.MaxBackoff = time.Hour, time.Hour
	d, err := NewDispatcher(Config{Providers: map[string]ProviderConfig{"anthropic": pc}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for srv.requests() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = d.Dispatch(ctx, []string{"anthropic/a"}, Fixed(userTurn("hi"), nil), (&recorder{}).emit, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestPrepareRendersPerCandidate(t *testing.T) {
	srv := newServer(t, replay(t, "anthropic_text.sse"))
	h := newHarness(t, testConfig("anthropic", KindAnthropic, srv.URL, testKey))
	prepare := func(model string) (Request, bool, string) {
		r := userTurn("rendered for " + model)
		r.MaxTokens = 1000
		return r, true, ""
	}
	if _, err := h.d.Dispatch(ctxTimeout(t, 10*time.Second), []string{"anthropic/claude-sonnet-4-5"}, prepare, (&recorder{}).emit, nil); err != nil {
		t.Fatal(err)
	}
	b := srv.body(t, 0)
	if get(t, b, "messages", 0, "content", 0, "text") != "rendered for anthropic/claude-sonnet-4-5" || b["model"] != "claude-sonnet-4-5" || b["max_tokens"] != float64(1000) {
		t.Fatalf("body %v", b)
	}
}

func TestBackoff(t *testing.T) {
	r := RetryPolicy{Attempts: 5, Backoff: time.Second, MaxBackoff: 5 * time.Second, MaxRetryAfter: time.Minute}
	for _, tt := range []struct {
		jitter  float64
		attempt int
		err     error
		want    time.Duration
		ok      bool
	}{
		{0, 0, nil, 500 * time.Millisecond, true},
		{0.999999, 0, nil, time.Second, true},
		{0, 1, nil, time.Second, true},
		{0, 2, nil, 2 * time.Second, true},
		{0, 10, nil, 2500 * time.Millisecond, true}, // capped at MaxBackoff
		{0, 62, nil, 2500 * time.Millisecond, true}, // no overflow
		{0, 0, &StatusError{Code: 429, RetryAfter: 3 * time.Second}, 3 * time.Second, true},
		{1, 3, &StatusError{Code: 429, RetryAfter: time.Second}, 5 * time.Second, true},
		{0, 0, &StatusError{Code: 429, RetryAfter: 2 * time.Minute}, 0, false},
	} {
		d := &Dispatcher{jitter: func() float64 { return tt.jitter }}
		got, ok := d.backoff(r, tt.attempt, tt.err)
		if ok != tt.ok || (ok && (got < tt.want-time.Microsecond || got > tt.want+time.Microsecond)) {
			t.Errorf("jitter %v attempt %d err %v: %v %v, want %v %v", tt.jitter, tt.attempt, tt.err, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"retry-after": "7"}, 7 * time.Second},
		{map[string]string{"retry-after": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"retry-after-ms": "250", "retry-after": "7"}, 250 * time.Millisecond},
		{map[string]string{"retry-after": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second},
		{map[string]string{"retry-after": "soon"}, 0},
		{map[string]string{"retry-after": "-3"}, 0},
		{nil, 0},
	} {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tt.want {
			t.Errorf("%v: %v, want %v", tt.h, got, tt.want)
		}
	}
}

// fakeProvider shows the Impl hook the run actor's tests can use.
type fakeProvider struct{ events []Event }

func (f fakeProvider) Stream(ctx context.Context, req Request, emit func(Event) error) error {
	for _, ev := range f.events {
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

func TestImplOverride(t *testing.T) {
	d, err := NewDispatcher(Config{Providers: map[string]ProviderConfig{
		"fake": {Name: "fake", Impl: fakeProvider{[]Event{{Kind: EventDelta, Text: "x"}, {Kind: EventDone}}}},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	if _, err := d.Dispatch(context.Background(), []string{"fake/any"}, Fixed(Request{}, nil), rec.emit, nil); err != nil || rec.text() != "x" {
		t.Fatalf("err %v text %q", err, rec.text())
	}
	if got := d.Providers(); len(got) != 1 || got[0] != "fake" {
		t.Fatalf("providers %v", got)
	}
}
