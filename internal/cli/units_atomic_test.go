package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// `ctx install-units` installs a pair: when ctx.service cannot be rendered
// (here a --bin with a space), nothing may be written — a fresh ctx.socket
// next to a missing or older ctx.service would socket-activate the wrong
// (or no) daemon after exit 2.
func TestInstallUnitsWritesNothingWhenOneUnitIsRefused(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	env := &Env{Ctx: context.Background(), Layout: layout.Layout{Root: "/srv/ctx"}, Stdout: &out, Stderr: &out}
	err := (&UnitsCmd{Dir: dir, Bin: "/opt/my tools/ctx"}).Run(env)
	if CodeOf(err) != ExitUsage {
		t.Fatalf("want exit 2, got %v (%d)", err, CodeOf(err))
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("refused install left %s", filepath.Join(dir, e.Name()))
	}
}
