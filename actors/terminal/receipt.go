package terminal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
)

// Cleanup turns the launch receipt r into its cleanup receipt.
func Cleanup(r Receipt, reason string, ex Exit, at time.Time) Receipt {
	r.Kind = KindCleanup
	r.Stopped = at.UTC().Format(time.RFC3339Nano)
	r.Reason = reason
	if ex.Known {
		st := ex.Status
		r.Status = &st
	}
	return r
}

// ProjectMeta records the cleanup receipt c as "cleanup" in
// agent/<name>.d/meta.json (spec: L3), keeping the file's other keys.
// A missing definition directory is not created (the agent was removed).
func ProjectMeta(l layout.Layout, c Receipt) error {
	dir := l.AgentControl(c.Agent)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("meta.json: %w", err)
	}
	p := filepath.Join(dir, "meta.json")
	meta := map[string]json.RawMessage{}
	if b, err := os.ReadFile(p); err == nil {
		_ = json.Unmarshal(b, &meta) // a damaged file is replaced
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
	}
	cj, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("meta.json: %w", err)
	}
	meta["cleanup"] = cj
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("meta.json: %w", err)
	}
	return atomicfile.WriteFile(p, append(b, '\n'), 0o644)
}
