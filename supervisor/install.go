package supervisor

import (
	"context"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/binstall"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/toolset"
)

// install puts the helper binaries, the agent.update tool and the
// standard toolset from BinDir into CTX_ROOT (when they differ). Each step
// is atomic; once ctx is done the steps not yet begun are skipped (the
// next start does them).
func (d *Daemon) install(ctx context.Context, l layout.Layout) {
	log := d.Log
	if d.BinDir != "" {
		if err := Install(d.BinDir, l.BinDir()); err != nil {
			log.Warn("install binaries", "err", err)
		}
	}
	if ctx.Err() != nil {
		return
	}
	if err := installTool(d.BinDir, l); err != nil {
		log.Warn("install the agent.update tool", "err", err)
	}
	if ctx.Err() != nil {
		return
	}
	// The standard toolset from the ctxtools beside the daemon (an
	// upgrade reaches CTX_ROOT/tool on the next start); a user's own tool
	// of the same name is kept.
	if bin := filepath.Join(d.BinDir, toolset.Binary); d.BinDir != "" && fileExists(bin) {
		if rep, err := toolset.Install(bin, l.ToolDir()); err != nil {
			log.Warn("install the standard toolset", "err", err)
		} else if len(rep.Kept) > 0 {
			log.Info("standard tools not installed: a tool of that name is the user's own", "kept", rep.Kept)
		}
	}
}

// Install copies tsh and ctxterm from src into CTX_ROOT/bin when they differ.
func Install(src, binDir string) error { return binstall.Install(src, binDir) }

// installTool installs the agent.update tool object (U1) under tool/.
func installTool(src string, l layout.Layout) error {
	if src == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(l.ToolDir(), ctlsock.ToolName+".d"), 0o755); err != nil {
		return err
	}
	if err := copyIfChanged(filepath.Join(src, ctlsock.ToolName), filepath.Join(l.ToolDir(), ctlsock.ToolName)); err != nil {
		return err
	}
	meta := filepath.Join(l.ToolDir(), ctlsock.ToolName+".d", "tool.json")
	if old, err := os.ReadFile(meta); err == nil && string(old) == ctlsock.ToolJSON {
		return nil
	}
	return atomicfile.WriteFile(meta, []byte(ctlsock.ToolJSON), 0o644)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func copyIfChanged(src, dst string) error { return binstall.CopyIfChanged(src, dst) }
