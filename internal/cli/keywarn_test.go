package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// TestKeyWarnings: anthropic and openai without a key warn; with the
// variable or the secrets file they do not; a provider with no
// api_key_env (a local server) never warns; one with it warns when unset.
func TestKeyWarnings(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), UID: os.Getuid()}
	os.MkdirAll(filepath.Join(l.UserHome(), "secrets"), 0o700)
	os.WriteFile(filepath.Join(l.Root, "providers.json"), []byte(`{"providers":{"local":{"type":"openai","base_url":"http://127.0.0.1:1/v1"},"vllm":{"type":"openai","base_url":"http://127.0.0.1:2/v1","api_key_env":"VLLM_KEY"}}}`), 0o600)
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	models := []string{"anthropic/a", "openai/b", "local/c", "vllm/d", "anthropic/e"}
	got := keyWarnings(l, models, getenv)
	if len(got) != 3 || !strings.Contains(got[0], "ANTHROPIC_API_KEY") || !strings.Contains(got[1], "OPENAI_API_KEY") ||
		!strings.Contains(got[2], "$VLLM_KEY") || !strings.Contains(got[0], "ctx provider add anthropic") {
		t.Fatalf("warnings %q", got)
	}
	env["OPENAI_API_KEY"], env["VLLM_KEY"] = "k", "k"
	os.WriteFile(filepath.Join(l.UserHome(), "secrets", "anthropic"), []byte("k\n"), 0o600)
	if got := keyWarnings(l, models, getenv); len(got) != 0 {
		t.Fatalf("with keys: %q", got)
	}
}
