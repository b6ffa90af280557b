package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestProviderCLI: `ctx provider add` stores a key read from stdin (never
// argv) in an owner-only secrets file and declares the provider; `list`
// names where the key is, never the key; `test` reaches the server with
// the key and says ok, or names the host, the status, the server's words
// and the fix; a refused change leaves providers.json as it was.
func TestProviderCLI(t *testing.T) {
	w := newWorld(t)
	const key = "sk-e2e-0123456789"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path != "/v1/models" {
			http.NotFound(rw, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			rw.WriteHeader(http.StatusUnauthorized)
			rw.Write([]byte(`{"error":{"message":"invalid api key"}}`))
			return
		}
		rw.Write([]byte(`{"data":[{"id":"m1"},{"id":"m2"}]}`))
	}))
	defer srv.Close()

	r := w.ctx("", key+"\n", "provider", "add", "local", "--type", "openai", "--base-url", srv.URL+"/v1")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, key) {
		t.Fatalf("add: %d %s %s", r.code, r.stdout, r.stderr)
	}
	sp := filepath.Join(w.root, "home", itoa(os.Getuid()), "secrets", "local")
	st, err := os.Stat(sp)
	if b, _ := os.ReadFile(sp); err != nil || st.Mode().Perm() != 0o600 || strings.TrimSpace(string(b)) != key {
		t.Fatalf("secrets file: %v %v", st, err)
	}
	r = w.ctx("", "", "provider", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "local") || !strings.Contains(r.stdout, sp) || strings.Contains(r.stdout, key) {
		t.Fatalf("list: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = w.ctx("", "", "provider", "test", "local")
	if r.code != 0 || !strings.Contains(r.stdout, "ok") || !strings.Contains(r.stdout, "2 models") {
		t.Fatalf("test: %d %s %s", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	if len(auth) != 1 || auth[0] != "Bearer "+key {
		t.Fatalf("the server saw %q", auth)
	}
	mu.Unlock()

	// A wrong key: the status, the server's words, the fix.
	if r = w.ctx("", "sk-wrong\n", "provider", "add", "local"); r.code != 0 {
		t.Fatalf("add again: %d %s", r.code, r.stderr)
	}
	r = w.ctx("", "", "provider", "test", "local")
	if r.code != 3 || !strings.Contains(r.stderr, "401") || !strings.Contains(r.stderr, "invalid api key") ||
		!strings.Contains(r.stderr, "ctx provider add local") || strings.Contains(r.stderr, "sk-wrong") {
		t.Fatalf("test with a wrong key: %d %s", r.code, r.stderr)
	}
	// Nothing listening: the host and port, and the fix.
	r = w.ctx("", "", "provider", "add", "gone", "--type", "openai", "--base-url", "http://127.0.0.1:9/v1", "--no-key")
	if r.code != 0 {
		t.Fatalf("add gone: %d %s", r.code, r.stderr)
	}
	r = w.ctx("", "", "provider", "test", "gone")
	if r.code != 3 || !strings.Contains(r.stderr, "cannot reach 127.0.0.1:9") || !strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("test gone: %d %s", r.code, r.stderr)
	}
	// A change the loader refuses leaves the file as it was.
	before, _ := os.ReadFile(filepath.Join(w.root, "providers.json"))
	r = w.ctx("", "", "provider", "add", "bad", "--type", "openai", "--base-url", "ftp://x", "--no-key")
	after, _ := os.ReadFile(filepath.Join(w.root, "providers.json"))
	if r.code != 2 || string(before) != string(after) {
		t.Fatalf("a refused add: %d %s; file changed: %v", r.code, r.stderr, string(before) != string(after))
	}
}

// TestSendApprovePolicy: `ctx agent send --approve TOOL` answers an ask
// agent's questions without a terminal: the named tool's call allowed
// once, any other denied, each decision on stderr and in the log.
// spec: A2 A3
func TestSendApprovePolicy(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.tool("other", "#!/bin/sh\necho ran\n")
	w.agent("ap", map[string]string{"tools": "clock\nother\n", "policy": "allow tool *\n", "approval": "ask\n"})
	r := w.ctx("", "", "agent", "send", "--approve", "clock", "ap", "tool", "clock")
	if r.code != 0 || !strings.Contains(r.stdout, "ok:tick") || !strings.Contains(r.stderr, "--approve: allow_once clock") {
		t.Fatalf("allowed: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.ctx("", "", "agent", "send", "--approve", "clock", "ap", "tool", "other")
	if !strings.Contains(r.stderr, "--approve: deny other") || strings.Contains(r.stdout, "ran") {
		t.Fatalf("denied: %d %q %q", r.code, r.stdout, r.stderr)
	}
	var decisions []string
	for _, f := range w.events("ap", "default") {
		if f.Type == "approval" {
			decisions = append(decisions, f.Decision)
		}
	}
	if strings.Join(decisions, ",") != "allow_once,deny" {
		t.Fatalf("approval frames %q", decisions)
	}
}
