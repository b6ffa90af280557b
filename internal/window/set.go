package window

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/cortexfs/ctx/internal/agentdef"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/models"
)

// Control file names inside agent/<name>.d/.
const (
	WindowFile = "window"
	ModelFile  = "model"
)

var _ Limits = models.Table{}

// ErrRefused is wrapped by every validation refusal of SetWindowAndModel:
// the CLI exits 2 with the error text as the reason, and nothing was written.
var ErrRefused = errors.New("refused")

// SetWindowAndModel validates and replaces the `window` and/or `model` control
// files of ctrlDir (spec: W5, interfaces.md "Context window"). A nil pointer
// leaves that file as it is; its current content takes part in the check.
// The bytes given are written verbatim (callers append the LF).
//
// The resulting pair must hold:
//   - window parses (W2); model, when present, parses as candidates (one
//     provider/model per line, preferred first);
//   - with an explicit window the first (preferred) candidate has a known
//     limit that is not below it (W5). An absent model file means no candidate
//     and so an unknown limit.
//
// Fallback candidates (line 2 onwards) are not required to satisfy the
// invariant: per W6 each is re-checked at run time and, when unusable, yields a
// `candidate` frame (see ForCandidate, UnusableFallbacks) — it never makes a
// setting change. With `auto` any model file is acceptable, so `set window
// auto` always repairs a hand-broken window even when `model` is broken too.
//
// On refusal (errors.Is(err, ErrRefused), with a *InvariantError or a parse
// error inside) neither file is touched. Otherwise each changed file is
// replaced atomically (temp, fsync, rename, fsync dir); when both change, the
// one whose intermediate state is itself valid is written first, and if the
// second write fails the first is restored, so a crash or I/O error leaves at
// worst a pair that runs reject with an auditable error — never a silently
// wrong limit.
func SetWindowAndModel(ctrlDir string, window *[]byte, model *[]byte, limits models.Table) error {
	wPath := filepath.Join(ctrlDir, WindowFile)
	mPath := filepath.Join(ctrlDir, ModelFile)
	oldW, wExists, err := readControl(wPath)
	if err != nil {
		return err
	}
	oldM, mExists, err := readControl(mPath)
	if err != nil {
		return err
	}
	newW, newM := oldW, oldM
	newWExists, newMExists := wExists, mExists
	if window != nil {
		newW, newWExists = *window, true
	}
	if model != nil {
		newM, newMExists = *model, true
	}
	if err := checkPair(newW, newWExists, newM, newMExists, limits, window != nil, model != nil); err != nil {
		return err
	}
	wChanged := window != nil && (!wExists || !bytes.Equal(oldW, newW))
	mChanged := model != nil && (!mExists || !bytes.Equal(oldM, newM))
	type write struct {
		path     string
		data     []byte
		old      []byte
		existed  bool
		fileMode fs.FileMode
	}
	var writes []write
	if wChanged {
		writes = append(writes, write{wPath, newW, oldW, wExists, modeOf(wPath)})
	}
	if mChanged {
		mw := write{mPath, newM, oldM, mExists, modeOf(mPath)}
		// Write model first when (old window, new model) is valid and
		// (new window, old model) is not: the intermediate state stays valid.
		if wChanged && checkPair(oldW, wExists, newM, true, limits, false, true) == nil &&
			checkPair(newW, true, oldM, mExists, limits, true, false) != nil {
			writes = append([]write{mw}, writes...)
		} else {
			writes = append(writes, mw)
		}
	}
	for i, w := range writes {
		if err := atomicfile.WriteFile(w.path, w.data, w.fileMode); err != nil {
			if i == 1 {
				undo := writes[0]
				if undo.existed {
					_ = atomicfile.WriteFile(undo.path, undo.old, undo.fileMode)
				} else {
					_ = os.Remove(undo.path)
				}
			}
			return fmt.Errorf("window: set %s: %w", filepath.Base(w.path), err)
		}
	}
	return nil
}

// checkPair validates a (window, model) pair. windowGiven only shapes the
// message for a pre-existing broken window; a pre-existing broken model file
// (modelGiven false) is tolerated with `auto`, a newly given one never is.
func checkPair(w []byte, wExists bool, m []byte, mExists bool, limits models.Table, windowGiven, modelGiven bool) error {
	if !wExists {
		return fmt.Errorf("window: control file %s is missing (set window auto first): %w", WindowFile, ErrRefused)
	}
	v, err := Parse(w)
	if err != nil {
		if windowGiven {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return fmt.Errorf("%w: current %w (fix it with: set window auto)", ErrRefused, err)
	}
	var candidates []string
	if mExists {
		candidates, err = models.ParseCandidates(m)
		if err != nil {
			if v.IsAuto() && !modelGiven {
				// spec: W5 — auto is valid with any model; a broken model
				// file is the model's own (run-time) error.
				return nil
			}
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
	}
	var limit uint32
	var known bool
	first := ""
	if len(candidates) > 0 {
		first = candidates[0]
		limit, known = limits.Limit(first)
	}
	if err := CheckInvariant(v, limit, known); err != nil { // spec: W5
		var ie *InvariantError
		if errors.As(err, &ie) {
			ie.Model = first
		}
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return nil
}

// UnusableFallbacks lists the candidates after the first for which v cannot
// hold (W6) — for a warning when setting; they stay configured.
func UnusableFallbacks(v Value, candidates []string, limits Limits) []error {
	var out []error
	for i, c := range candidates {
		if i == 0 {
			continue
		}
		if _, _, err := ForCandidate(v, c, limits); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// readControl reads a control file through agentdef.ReadControl (no
// symlink, no FIFO, bounded); a missing file is not an error.
func readControl(path string) (b []byte, exists bool, err error) {
	b, err = agentdef.ReadControl(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("window: read %s: %w", path, err)
	}
	return b, true, nil
}

func modeOf(path string) fs.FileMode {
	if st, err := os.Stat(path); err == nil {
		return st.Mode().Perm()
	}
	return 0o644
}
