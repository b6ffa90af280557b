package window

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/models"
)

func ctrl(t *testing.T, window, model string) string {
	t.Helper()
	dir := t.TempDir()
	if window != "" {
		if err := os.WriteFile(filepath.Join(dir, WindowFile), []byte(window), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if model != "" {
		if err := os.WriteFile(filepath.Join(dir, ModelFile), []byte(model), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func bp(s string) *[]byte { b := []byte(s); return &b }

// spec: W5 — refusals leave both files byte-identical.
func TestSetWindowAndModel(t *testing.T) {
	tb := models.Builtin()
	const sonnet = "anthropic/claude-sonnet-4-5\n"
	const gpt4o = "openai/gpt-4o\n"
	cases := []struct {
		name            string
		window, model   string  // initial files ("" = absent)
		setW, setM      *[]byte // nil = unchanged
		refuse          bool
		wantWin, wantMd string
	}{
		{"window within limit", "auto\n", sonnet, bp("150000\n"), nil, false, "150000\n", sonnet},
		{"window at limit", "auto\n", sonnet, bp("200000\n"), nil, false, "200000\n", sonnet},
		{"window over limit", "auto\n", sonnet, bp("200001\n"), nil, true, "auto\n", sonnet},
		{"window invalid", "auto\n", sonnet, bp("0\n"), nil, true, "auto\n", sonnet},
		{"explicit without model", "auto\n", "", bp("1000\n"), nil, true, "auto\n", "<absent>"},
		{"explicit unknown model", "auto\n", "x/unknown\n", bp("1000\n"), nil, true, "auto\n", "x/unknown\n"},
		{"model to smaller limit", "150000\n", sonnet, nil, bp(gpt4o), true, "150000\n", sonnet},
		{"model to unknown", "1000\n", sonnet, nil, bp("x/unknown\n"), true, "1000\n", sonnet},
		{"model ok with auto", "auto\n", sonnet, nil, bp("x/unknown\n"), false, "auto\n", "x/unknown\n"},
		{"model invalid", "auto\n", sonnet, nil, bp("gpt-4o\n"), true, "auto\n", sonnet},
		{"model with broken window", "zero\n", sonnet, nil, bp(gpt4o), true, "zero\n", sonnet},
		{"auto repairs", "zero\n", "broken", bp("auto\n"), nil, false, "auto\n", "broken"},
		{"both together", "150000\n", sonnet, bp("100000\n"), bp(gpt4o), false, "100000\n", gpt4o},
		{"both, pair invalid", "150000\n", sonnet, bp("150000\n"), bp(gpt4o), true, "150000\n", sonnet},
		{"fallback smaller is allowed", "auto\n", sonnet, bp("150000\n"), bp(sonnet + gpt4o), false, "150000\n", sonnet + gpt4o},
		{"fallback first smaller refused", "auto\n", sonnet, bp("150000\n"), bp(gpt4o + sonnet), true, "auto\n", sonnet},
		{"create both", "", "", bp("auto\n"), bp(sonnet), false, "auto\n", sonnet},
		{"model without window file", "", "", nil, bp(sonnet), true, "<absent>", "<absent>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := ctrl(t, c.window, c.model)
			err := SetWindowAndModel(dir, c.setW, c.setM, tb)
			if c.refuse != (err != nil) {
				t.Fatalf("err = %v, refuse = %v", err, c.refuse)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("refusal does not wrap ErrRefused: %v", err)
			}
			if got := read(t, dir, WindowFile); got != c.wantWin {
				t.Errorf("window = %q, want %q", got, c.wantWin)
			}
			if got := read(t, dir, ModelFile); got != c.wantMd {
				t.Errorf("model = %q, want %q", got, c.wantMd)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != WindowFile && e.Name() != ModelFile {
					t.Errorf("stray file %s", e.Name())
				}
			}
		})
	}
}

func TestSetRefusalReasonNamesLimit(t *testing.T) {
	dir := ctrl(t, "auto\n", "openai/gpt-4o\n")
	err := SetWindowAndModel(dir, bp("200000\n"), nil, models.Builtin())
	var ie *InvariantError
	if !errors.As(err, &ie) || ie.Limit != 128000 || ie.Model != "openai/gpt-4o" {
		t.Fatalf("%v", err)
	}
}

// TestSetRefusesSymlinkedControl: the setter reads control files as the
// runtime does (agentdef.ReadControl): a symlinked model file is refused,
// never followed, and nothing is written. spec: W2
func TestSetRefusesSymlinkedControl(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte("anthropic/claude-sonnet-4-5\n"), 0o644)
	os.Symlink(target, filepath.Join(dir, "model"))
	os.WriteFile(filepath.Join(dir, "window"), []byte("auto\n"), 0o644)
	if err := SetWindowAndModel(dir, bp("1000\n"), nil, models.Builtin()); err == nil {
		t.Fatal("a symlinked model file was followed")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "window")); string(b) != "auto\n" {
		t.Errorf("window written: %q", b)
	}
}
