package provider

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKeyNeverLeaks drives every failure path with a key and a logger, with
// servers that echo the key back in error bodies and error events, and greps
// all errors, events, candidate reasons and log output for it. spec: B4, D9
func TestKeyNeverLeaks(t *testing.T) {
	echo401 := func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key %s"}}`, key)
	}
	echoEvent := func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "text/event-stream")
		if r.Header.Get("x-api-key") != "" {
			fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy for %s\"}}\n\n", key)
		} else {
			fmt.Fprintf(w, "data: {\"error\":{\"message\":\"key %s over quota\",\"type\":\"server_error\"}}\n\n", key)
		}
	}
	echo500 := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprintf(w, "panic: bad key %s%s", r.Header.Get("x-api-key"), r.Header.Get("Authorization"))
	}
	gone := newServer(t)
	goneURL := gone.URL
	gone.Close()

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var seen []string // every string the run actor could record
	sawKey := false
	for _, kind := range kinds {
		for name, steps := range map[string][]step{
			"ok":        {replay(t, fixture(kind, "text"))},
			"401 echo":  {echo401},
			"event":     {echoEvent},
			"500 echo":  {echo500},
			"429":       {status(429, map[string]string{"retry-after": "1"}, `{"error":{"message":"slow"}}`), replay(t, fixture(kind, "tool_use"))},
			"malformed": {replay(t, fixture(kind, "malformed"))},
			"abort":     {abortAfter(t, fixture(kind, "text"), 3)},
		} {
			srv := newServer(t, steps...)
			cfg := Config{Providers: map[string]ProviderConfig{
				"p":    testConfig("p", kind, srv.URL, testKey),
				"gone": testConfig("gone", kind, goneURL, testKey),
			}}
			logger.Info("config", "cfg", cfg, "p", cfg.Providers["p"]) // a careless caller
			d, err := NewDispatcher(cfg, Options{Logger: logger, Sleep: func(context.Context, time.Duration) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			var rec recorder
			_, err = d.Dispatch(ctxTimeout(t, 10*time.Second), []string{"p/m", "gone/m"}, Fixed(userTurn("hi"), nil), rec.emit,
				func(model, status, reason string) { seen = append(seen, model, status, reason) })
			d.CloseIdleConnections()
			if err != nil {
				seen = append(seen, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
				logger.Error("dispatch failed", "kind", kind, "case", name, "err", err)
			}
			for _, ev := range rec.all() {
				seen = append(seen, fmt.Sprintf("%+v", ev))
			}
			srv.mu.Lock()
			for _, h := range srv.headers {
				sawKey = sawKey || strings.Contains(h.Get("x-api-key")+h.Get("Authorization"), testKey)
			}
			srv.mu.Unlock()
		}
	}
	if !sawKey {
		t.Fatal("the servers never received the key: the test proves nothing")
	}
	seen = append(seen, logs.String())
	all := strings.Join(seen, "\n")
	if strings.Contains(all, testKey) || strings.Contains(all, "7f3a9c1e5b2d4086") {
		t.Fatalf("key leaked:\n%s", all)
	}
	if !strings.Contains(all, redacted) || !strings.Contains(all, "HTTP 401") {
		t.Fatalf("expected redacted server echoes in:\n%s", all)
	}
}
