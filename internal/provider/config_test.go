package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func writeSecret(t *testing.T, root string, name, key string, mode os.FileMode) string {
	t.Helper()
	p := SecretsPath(root, os.Getuid(), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load(t.TempDir(), os.Getuid(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a, o := cfg.Providers["anthropic"], cfg.Providers["openai"]
	// No key for a hosted API: the candidate fails saying so and how to
	// add one, without a request.
	if a.Kind != KindAnthropic || a.BaseURL != DefaultAnthropicBaseURL || a.MaxTokens != 4096 || !a.APIKey.IsZero() ||
		!errors.Is(a.KeyError, ErrNoKey) || !strings.Contains(a.KeyError.Error(), "ctx provider add anthropic") {
		t.Fatalf("anthropic %+v", a)
	}
	if o.Kind != KindOpenAI || o.BaseURL != DefaultOpenAIBaseURL || o.MaxTokens != 0 || o.MaxTokensField != "max_completion_tokens" {
		t.Fatalf("openai %+v", o)
	}
	if a.Retry != (RetryPolicy{DefaultAttempts, DefaultBackoff, DefaultMaxBackoff, DefaultMaxRetryAfter}) || a.Timeout != DefaultTimeout || a.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("anthropic retry/timeouts %+v", a)
	}
}

func TestLoadEnvironment(t *testing.T) {
	root := t.TempDir()
	writeSecret(t, root, "anthropic", "sk-from-file", 0o600)
	cfg, err := Load(root, os.Getuid(), env(map[string]string{
		"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/",
		"OPENAI_BASE_URL":    "http://127.0.0.1:8080/v1",
		"ANTHROPIC_API_KEY":  "sk-from-env",
		"OPENAI_API_KEY":     "sk-openai",
	}))
	if err != nil {
		t.Fatal(err)
	}
	a, o := cfg.Providers["anthropic"], cfg.Providers["openai"]
	if a.BaseURL != "http://127.0.0.1:9/" || a.APIKey.Reveal() != "sk-from-env" { // the environment comes first
		t.Fatalf("anthropic %v %v", a.BaseURL, a.APIKey.Reveal())
	}
	if o.BaseURL != "http://127.0.0.1:8080/v1" || o.APIKey.Reveal() != "sk-openai" {
		t.Fatalf("openai %v", o.BaseURL)
	}
	cfg, err = Load(root, os.Getuid(), env(nil))
	if err != nil || cfg.Providers["anthropic"].APIKey.Reveal() != "sk-from-file" {
		t.Fatalf("secrets file: %v %v", err, cfg.Providers["anthropic"].APIKey.Reveal())
	}
}

func TestLoadFile(t *testing.T) {
	root := t.TempDir()
	file := `{
  "providers": {
    "anthropic": {"base_url": "https://proxy.example/anthropic", "max_tokens": 8192, "timeout": "5m", "attempts": 5, "backoff": "500ms", "max_backoff": "10s", "max_retry_after": "20s"},
    "local": {"type": "openai", "base_url": "http://127.0.0.1:11434/v1", "max_tokens": 2048, "max_tokens_field": "max_tokens", "idle_timeout": "10m"},
    "vllm": {"type": "openai", "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_API_KEY"}
  }
}`
	if err := os.WriteFile(filepath.Join(root, FileName), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(root, os.Getuid(), env(map[string]string{"VLLM_API_KEY": "token-abc", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	a, l, v := cfg.Providers["anthropic"], cfg.Providers["local"], cfg.Providers["vllm"]
	if a.BaseURL != "http://127.0.0.1:1" || a.MaxTokens != 8192 || a.Timeout != 5*time.Minute ||
		a.Retry != (RetryPolicy{5, 500 * time.Millisecond, 10 * time.Second, 20 * time.Second}) {
		t.Fatalf("anthropic %+v", a)
	}
	if l.Kind != KindOpenAI || l.BaseURL != "http://127.0.0.1:11434/v1" || l.MaxTokens != 2048 || l.MaxTokensField != "max_tokens" ||
		l.IdleTimeout != 10*time.Minute || !l.APIKey.IsZero() {
		t.Fatalf("local %+v", l)
	}
	if v.APIKey.Reveal() != "token-abc" {
		t.Fatalf("vllm key %v", v.APIKey)
	}
	if _, ok := cfg.Providers["openai"]; !ok {
		t.Fatal("built-in openai dropped")
	}
}

func TestLoadFileErrors(t *testing.T) {
	for name, file := range map[string]string{
		"unknown field":      `{"providers":{"anthropic":{"base_ulr":"x"}}}`,
		"missing type":       `{"providers":{"local":{"base_url":"http://x"}}}`,
		"bad type":           `{"providers":{"local":{"type":"gemini","base_url":"http://x"}}}`,
		"bad url":            `{"providers":{"openai":{"base_url":"ftp://x"}}}`,
		"userinfo in url":    `{"providers":{"openai":{"base_url":"https://u:p@x/v1"}}}`,
		"bad duration":       `{"providers":{"openai":{"timeout":"soon"}}}`,
		"negative duration":  `{"providers":{"openai":{"timeout":"-1s"}}}`,
		"zero anthropic max": `{"providers":{"anthropic":{"max_tokens":0}}}`,
		"attempts":           `{"providers":{"openai":{"attempts":11}}}`,
		"max tokens field":   `{"providers":{"openai":{"max_tokens_field":"n_predict"}}}`,
		"bad env name":       `{"providers":{"openai":{"api_key_env":"lower"}}}`,
		"bad provider name":  `{"providers":{"../x":{"type":"openai","base_url":"http://x"}}}`,
		"not json":           `{`,
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, FileName), []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(root, os.Getuid(), env(nil)); !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v, want ErrConfig", err)
			}
		})
	}
}

func TestLoadRefusesWritableConfig(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, FileName)
	if err := os.WriteFile(p, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(root, os.Getuid(), env(nil)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "writable") {
		t.Fatalf("err %v", err)
	}
}

// TestSecretsFileMode: a secrets file readable by others is refused, the
// refusal names the file and mode but not the key, and only that provider's
// candidates fail. spec: B4, D9
func TestSecretsFileMode(t *testing.T) {
	root := t.TempDir()
	writeSecret(t, root, "openai", testKey, 0o644)
	cfg, err := Load(root, os.Getuid(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Providers["openai"]
	if !errors.Is(o.KeyError, ErrCredentials) || !strings.Contains(o.KeyError.Error(), "mode 0644, want 0600") || !o.APIKey.IsZero() {
		t.Fatalf("openai key %v err %v", o.APIKey, o.KeyError)
	}
	if strings.Contains(o.KeyError.Error(), testKey) {
		t.Fatal("key in error")
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		writeSecret(t, root, "openai", testKey, mode)
		cfg, _ = Load(root, os.Getuid(), env(nil))
		if o := cfg.Providers["openai"]; o.KeyError != nil || o.APIKey.Reveal() != testKey {
			t.Fatalf("mode %04o: %v", mode, o.KeyError)
		}
	}
	// The candidate fails auditably; the next one is used.
	srv := newServer(t, replay(t, "anthropic_text.sse"))
	writeSecret(t, root, "openai", testKey, 0o640)
	cfg, _ = Load(root, os.Getuid(), env(map[string]string{"ANTHROPIC_BASE_URL": srv.URL}))
	h := newHarness(t, cfg.Providers["openai"], cfg.Providers["anthropic"])
	used, err := h.dispatch(t, []string{"openai/gpt-4o", "anthropic/claude-sonnet-4-5"}, nil, &recorder{})
	if err != nil || used != "anthropic/claude-sonnet-4-5" || len(h.reports) != 1 || h.reports[0].status != CandidateFailed ||
		!strings.Contains(h.reports[0].reason, "mode 0640") {
		t.Fatalf("used %q err %v reports %+v", used, err, h.reports)
	}
}

func TestSecretsFileRefusals(t *testing.T) {
	root := t.TempDir()
	real := writeSecret(t, root, "target", testKey, 0o600)
	dir := filepath.Dir(real)
	if err := os.Symlink(real, filepath.Join(dir, "openai")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "anthropic"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(root, os.Getuid(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.Providers["openai"].KeyError; !errors.Is(e, ErrCredentials) {
		t.Fatalf("symlink: %v", e)
	}
	if e := cfg.Providers["anthropic"].KeyError; !errors.Is(e, ErrCredentials) || !strings.Contains(e.Error(), "not a regular file") {
		t.Fatalf("directory: %v", e)
	}
	if _, err := readSecret(real, os.Getuid()+1); !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "not owned") {
		t.Fatalf("owner: %v", err)
	}
	empty := writeSecret(t, root, "empty", "  ", 0o600)
	if _, err := readSecret(empty, os.Getuid()); !errors.Is(err, ErrCredentials) {
		t.Fatalf("empty: %v", err)
	}
	ctl := writeSecret(t, root, "ctl", "sk-a\x01b", 0o600)
	if _, err := readSecret(ctl, os.Getuid()); !errors.Is(err, ErrCredentials) || strings.Contains(err.Error(), "sk-a") {
		t.Fatalf("control chars: %v", err)
	}
}

// TestSecretRedacts: every way of printing a Secret hides it. spec: D9
func TestSecretRedacts(t *testing.T) {
	s := NewSecret(testKey)
	type exported struct{ Key Secret }
	type unexported struct{ key Secret }
	pc := ProviderConfig{Name: "openai", APIKey: s}
	var out []string
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		out = append(out, fmt.Sprintf(f, s), fmt.Sprintf(f, &s), fmt.Sprintf(f, exported{s}), fmt.Sprintf(f, unexported{s}), fmt.Sprintf(f, pc))
	}
	out = append(out, s.String(), s.GoString(), fmt.Sprint(s), fmt.Sprintln(s))
	for _, v := range []any{s, exported{s}, unexported{s}, pc, map[string]Secret{"k": s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&buf, nil), slog.NewTextHandler(&buf, nil)} {
		l := slog.New(h)
		l.Info("k", "key", s, "cfg", pc, "nested", exported{s}, "any", any(s), slog.Any("ptr", &s), slog.Group("g", "key", s))
	}
	out = append(out, buf.String())
	for _, o := range out {
		if strings.Contains(o, testKey) || strings.Contains(o, "7f3a9c1e") {
			t.Fatalf("key leaked: %s", o)
		}
	}
	if !strings.Contains(buf.String(), redacted) {
		t.Fatalf("no redaction marker in %s", buf.String())
	}
	if s.Reveal() != testKey || NewSecret("").String() != "[UNSET]" {
		t.Fatal("Reveal/zero")
	}
}
