package models

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spec: W4 — the two pinned limits, everything else unknown.
func TestBuiltin(t *testing.T) {
	tb := Builtin()
	for model, want := range map[string]uint32{
		"anthropic/claude-sonnet-4-5": 200000,
		"openai/gpt-4o":               128000,
	} {
		got, ok := tb.Limit(model)
		if !ok || got != want {
			t.Errorf("%s: got %d %v, want %d", model, got, ok, want)
		}
	}
	if _, ok := tb.Limit("openai/gpt-unknown"); ok {
		t.Error("unlisted model must be unknown")
	}
	providers := map[string]bool{}
	for _, e := range tb.Entries() {
		p, _, _ := strings.Cut(e.Model, "/")
		providers[p] = true
		if !strings.HasPrefix(e.Source, "https://") {
			t.Errorf("%s: no source", e.Model)
		}
	}
	for _, p := range []string{"anthropic", "openai", "google", "mistral", "deepseek", "qwen", "meta"} {
		if !providers[p] {
			t.Errorf("no %s models in limits.tsv", p)
		}
	}
}

func TestLoadUserOverrides(t *testing.T) {
	root := t.TempDir()
	user := "# mine\n" +
		"openai/gpt-4o\t64000\n" +
		"local/llama3:8b\t8192\thttps://example.com/x\n" +
		"anthropic/claude-sonnet-4-5\tunknown\n"
	if err := os.WriteFile(filepath.Join(root, UserFile), []byte(user), 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := tb.Limit("openai/gpt-4o"); !ok || n != 64000 {
		t.Errorf("override: %d %v", n, ok)
	}
	if n, ok := tb.Limit("local/llama3:8b"); !ok || n != 8192 {
		t.Errorf("extend: %d %v", n, ok)
	}
	if _, ok := tb.Limit("anthropic/claude-sonnet-4-5"); ok {
		t.Error("unknown must remove")
	}
	// The built-in table is not changed by a Load.
	if n, _ := Builtin().Limit("openai/gpt-4o"); n != 128000 {
		t.Errorf("builtin mutated: %d", n)
	}
	// Missing file: built-in only.
	tb, err = Load(t.TempDir())
	if err != nil || tb.Len() != Builtin().Len() {
		t.Fatalf("missing user file: %v", err)
	}
}

func TestLoadMalformedNamesFileLine(t *testing.T) {
	for _, bad := range []string{
		"openai/gpt-4o 128000\n",      // spaces, not TAB
		"openai/gpt-4o\t0\n",          // zero
		"openai/gpt-4o\t012\n",        // leading zero
		"openai/gpt-4o\t+12\n",        // sign
		"openai/gpt-4o\t4294967296\n", // overflow
		"gpt-4o\t1000\n",              // no provider
		"a/b\t1\na/b\t2\n",            // duplicate
		"a/b\t1\tx\ty\n",              // four columns
		"A/b\t1\n",                    // provider case
	} {
		root := t.TempDir()
		p := filepath.Join(root, UserFile)
		if err := os.WriteFile(p, []byte("# header\n"+bad), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(root)
		if err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err = %v", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), p+":2:") && !strings.Contains(err.Error(), p+":3:") {
			t.Errorf("%q: error does not name file:line: %v", bad, err)
		}
	}
}

func TestParseCandidates(t *testing.T) {
	got, err := ParseCandidates([]byte("anthropic/claude-sonnet-4-5\nopenai/gpt-4o\n"))
	if err != nil || len(got) != 2 || got[1] != "openai/gpt-4o" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "\n", "a/b", "a/b\n\n", "a/b\r\n", "a/b\na/b\n", " a/b\n", "ab\n", "a/\n", "/b\n"} {
		if _, err := ParseCandidates([]byte(bad)); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("openai/gpt-4o\t128000\thttps://x\n")
	f.Add("# c\n\na/b\tunknown\n")
	f.Add("a/b\t4294967295\n")
	f.Fuzz(func(t *testing.T, s string) {
		tb, err := Parse(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for _, e := range tb.Entries() {
			if e.Tokens == 0 || CheckName(e.Model) != nil {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}
