package prompt

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/atomicfile"
)

// Snapshot file names in the session directory (R5).
const (
	RulesSnapshot  = "AGENTS.md"
	SkillsSnapshot = "SKILLS.md"
)

// WriteSnapshots writes the session observations of one build (spec: R5):
// AGENTS.md = {{rules}} and SKILLS.md = {{skills}} (name, description, path),
// each replaced atomically. It is best effort: it tries both, returns the
// joined errors for the caller to log, and never panics — a failure must
// never fail a run. These are observations, not control files.
func WriteSnapshots(sessionDir string, rules string, skills []Skill) (err error) {
	defer func() {
		// R5 says a snapshot can never take a run down; guard the contract
		// even against a bug below.
		if p := recover(); p != nil {
			err = fmt.Errorf("prompt: snapshots: panic: %v", p)
		}
	}()
	if sessionDir == "" {
		return errors.New("prompt: snapshots: no session directory")
	}
	e1 := writeIfChanged(filepath.Join(sessionDir, RulesSnapshot), []byte(rules))
	e2 := writeIfChanged(filepath.Join(sessionDir, SkillsSnapshot), []byte(RenderSkills(skills)))
	if err := errors.Join(e1, e2); err != nil {
		return fmt.Errorf("prompt: snapshots: %w", err)
	}
	return nil
}

// writeIfChanged replaces path atomically unless it already holds data: the
// snapshots rarely change between runs, and each replacement costs two fsyncs.
//
// The session directory is writable from inside the sandbox, so the old
// file is read like any agent-controlled file: never through a symlink,
// never from a FIFO or device (O_NONBLOCK, regular files only), and never
// more than len(data)+1 bytes. Anything else is simply replaced: the rename
// swaps out a planted symlink or FIFO without following it.
func writeIfChanged(path string, data []byte) error {
	if old, truncated, err := readBounded(osFS{}, path, len(data), true); err == nil && !truncated && bytes.Equal(old, data) {
		return nil
	}
	return atomicfile.WriteFile(path, data, 0o600)
}
