package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// transcript returns the HTTP body of testdata/name: the file without its
// "# " header and the blank line after it.
func transcript(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(data, []byte("# ")) {
		_, data, _ = bytes.Cut(data, []byte("\n"))
	}
	return bytes.TrimPrefix(data, []byte("\n"))
}

// step answers one request.
type step func(w http.ResponseWriter, r *http.Request)

// replay serves a transcript as an event stream.
func replay(t testing.TB, name string) step {
	body := transcript(t, name)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}
}

// abortAfter serves the first n events of a transcript, flushes, then drops
// the connection without finishing the chunked body (a real disconnect).
func abortAfter(t testing.TB, name string, n int) step {
	body := transcript(t, name)
	events := bytes.SplitAfter(body, []byte("\n\n"))
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events[:n] {
			_, _ = w.Write(ev)
		}
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

// status answers with an HTTP error.
func status(code int, header map[string]string, body string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// server replays steps in order (the last one repeats) and records requests.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	steps   []step
	bodies  [][]byte
	headers []http.Header
	paths   []string
}

func newServer(t testing.TB, steps ...step) *server {
	t.Helper()
	s := &server{steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		s.paths = append(s.paths, r.URL.Path)
		st := s.steps[min(n, len(s.steps)-1)]
		s.mu.Unlock()
		st(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// body decodes request i's JSON body.
func (s *server) body(t testing.TB, i int) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal(s.bodies[i], &m); err != nil {
		t.Fatalf("request %d body: %v", i, err)
	}
	return m
}

// kinds lets one test run against both wire protocols.
var kinds = []string{KindAnthropic, KindOpenAI}

// baseURL is how each kind's base URL is written for a server (openai has /v1).
func baseURL(kind, srv string) string {
	if kind == KindOpenAI {
		return srv + "/v1"
	}
	return srv
}

// testConfig is a resolved entry pointing at srv, with fast retries.
func testConfig(name, kind, srv string, key string) ProviderConfig {
	pc := ProviderConfig{
		Name: name, Kind: kind, BaseURL: baseURL(kind, srv), APIKey: NewSecret(key),
		Timeout: 10 * time.Second, IdleTimeout: 5 * time.Second,
		Retry: RetryPolicy{Attempts: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxRetryAfter: time.Minute},
	}
	if kind == KindAnthropic {
		pc.MaxTokens = DefaultMaxTokens
	} else {
		pc.MaxTokensField = "max_completion_tokens"
	}
	return pc
}

func newProvider(t testing.TB, pc ProviderConfig) Provider {
	t.Helper()
	switch pc.Kind {
	case KindAnthropic:
		p := NewAnthropic(pc)
		t.Cleanup(p.CloseIdleConnections)
		return p
	case KindOpenAI:
		p := NewOpenAI(pc)
		t.Cleanup(p.CloseIdleConnections)
		return p
	}
	t.Fatalf("kind %q", pc.Kind)
	return nil
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) emit(ev Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *recorder) text() string {
	var s string
	for _, ev := range r.all() {
		if ev.Kind == EventDelta {
			s += ev.Text
		}
	}
	return s
}

// fixture names a transcript per kind.
func fixture(kind, name string) string { return kind + "_" + name + ".sse" }

func userTurn(text string) Request {
	return Request{Model: "m", System: "You are a test.", Messages: []Message{{Role: RoleUser, Text: text}}, Tools: []Tool{TSH()}}
}

// get walks a decoded JSON value: get(v, "messages", 1, "content").
func get(t testing.TB, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", p, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v is not an array that long", p, v)
			}
			v = a[k]
		}
	}
	return v
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
