package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/models"
	"github.com/cortexfs/ctx/internal/window"
)

// checkWindowFlag validates --window at create time: W2 syntax, and W5
// against the preferred candidate of --model (an agent created with --exec
// has no model, so only auto is valid for it).
func checkWindowFlag(env *Env, v string, candidates []string) error {
	val, err := window.Parse([]byte(v + "\n")) // spec: W2
	if err != nil {
		return err
	}
	if val.IsAuto() {
		return nil
	}
	if len(candidates) == 0 {
		// spec: W5 — no model, no known limit: an explicit window cannot hold.
		return fmt.Errorf("window %s: an explicit window needs a model with a known limit, and an agent without --model has none; use --window auto", val)
	}
	table, err := models.Load(env.Layout.Root)
	if err != nil {
		return err
	}
	limit, known := table.Limit(candidates[0])
	if err := window.CheckInvariant(val, limit, known); err != nil { // spec: W5
		var ie *window.InvariantError
		if errors.As(err, &ie) {
			ie.Model = candidates[0]
		}
		return err
	}
	warnFallbacks(env, val, candidates, table)
	return nil
}

// windowValidator checks `set NAME window V` and `set NAME model M[,M...]`
// (spec: W2, W5; interfaces.md "Context window"). agentdef.Set calls it with
// the final file bytes and writes that one file atomically only when it
// returns nil, so a refusal leaves window and model byte-identical.
//
// The check is window.SetWindowAndModel itself — the same rules as every
// other writer, the other file taken from the control dir — run against a
// private scratch copy of the two files, so the validator writes nothing in
// the definition (see dryRunPair).
func windowValidator(env *Env, name string) func(control string, value []byte) error {
	return func(control string, value []byte) error {
		if control != window.WindowFile && control != window.ModelFile {
			return nil
		}
		table, err := models.Load(env.Layout.Root)
		if err != nil {
			return err
		}
		ctrl := env.Layout.AgentControl(name)
		var w, m *[]byte
		if control == window.WindowFile {
			w = &value
		} else {
			m = &value
		}
		if err := dryRunPair(ctrl, w, m, table); err != nil {
			return err
		}
		// The pair holds; fallbacks that cannot hold are only a warning (W6:
		// each is re-checked at run time and reported, never changed).
		wb, mb := readOr(filepath.Join(ctrl, window.WindowFile), w), readOr(filepath.Join(ctrl, window.ModelFile), m)
		if v, err := window.Parse(wb); err == nil && mb != nil {
			if cands, err := models.ParseCandidates(mb); err == nil {
				warnFallbacks(env, v, cands, table)
			}
		}
		return nil
	}
}

// dryRunPair runs window.SetWindowAndModel on a scratch copy of ctrl's window
// and model files: its verdict, with no write to ctrl.
func dryRunPair(ctrl string, w, m *[]byte, table models.Table) error {
	tmp, err := os.MkdirTemp("", "ctx-window-check-")
	if err != nil {
		return fmt.Errorf("window: cannot check: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{window.WindowFile, window.ModelFile} {
		b, err := os.ReadFile(filepath.Join(ctrl, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("window: read %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o600); err != nil {
			return fmt.Errorf("window: cannot check: %w", err)
		}
	}
	return window.SetWindowAndModel(tmp, w, m, table)
}

// readOr is *given when non-nil, else the file's content (nil if unreadable).
func readOr(path string, given *[]byte) []byte {
	if given != nil {
		return *given
	}
	b, _ := os.ReadFile(path)
	return b
}

func warnFallbacks(env *Env, v window.Value, candidates []string, limits window.Limits) {
	for _, err := range window.UnusableFallbacks(v, candidates, limits) {
		fmt.Fprintf(env.Stderr, "ctx: warning: fallback candidate unusable at run time: %v\n", err)
	}
}
