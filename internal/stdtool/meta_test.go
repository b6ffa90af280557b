package stdtool

import (
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/toolctx"
)

// TestDescriptions: every tool's description is written for a model — a
// one-line summary first (what `tsh list` shows), its argv, an example —
// and fits whole in the tool context (toolctx.MaxDescription).
// The standard toolset: tool.json: what it does, argv, one example, limits.
func TestDescriptions(t *testing.T) {
	if len(Tools()) != 9 {
		t.Fatalf("%d tools", len(Tools()))
	}
	for _, tl := range Tools() {
		d := tl.Meta.Description
		first, _, _ := strings.Cut(d, "\n")
		switch {
		case len(d) > toolctx.MaxDescription:
			t.Errorf("%s: %d bytes, over tsh's %d", tl.Name, len(d), toolctx.MaxDescription)
		case len(first) > 120 || toolctx.Summary(d) != first:
			t.Errorf("%s: the first line is not a short summary: %q", tl.Name, first)
		case !strings.Contains(d, "argv: "+tl.Name) || !strings.Contains(d, "xample: "):
			t.Errorf("%s: no argv line or example:\n%s", tl.Name, d)
		case !strings.Contains(d, tl.Usage):
			t.Errorf("%s: the argv line is not the usage %q", tl.Name, tl.Usage)
		case tl.Meta.ProvidedBy != ProvidedBy:
			t.Errorf("%s: provided_by %q", tl.Name, tl.Meta.ProvidedBy)
		}
	}
}
