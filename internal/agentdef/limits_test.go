package agentdef

import (
	"errors"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/limits"
)

// TestLoadLimits: .d/limits absent gives the defaults, present overrides
// them, and a bad file makes the definition invalid (fail closed).
// Limits per run
func TestLoadLimits(t *testing.T) {
	l := testLayout(t)
	execAgent(t, l, "plain", nil)
	d, err := Load(l, "plain")
	if err != nil || d.Limits != limits.Default {
		t.Fatalf("no .d/limits: %+v, %v; want the defaults", d, err)
	}
	execAgent(t, l, "small", map[string]string{"limits": "# a fork bomb gets nowhere\ntasks 64\nmemory 256M\n"})
	if d, err = Load(l, "small"); err != nil || d.Limits != (limits.Limits{Tasks: 64, Memory: 256 << 20, CPUWeight: 100, Calls: limits.DefaultCalls}) {
		t.Fatalf("small: %+v, %v", d, err)
	}
	for _, bad := range []string{"tasks 0\n", "memory lots\n", "pids 10\n", "tasks 64"} {
		execAgent(t, l, "bad", map[string]string{"limits": bad})
		_, err := Load(l, "bad")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ".d/limits") {
			t.Errorf("limits %q: %v; want invalid naming .d/limits", bad, err)
		}
	}
	if err := Set(l, "plain", "limits", "tasks 100\n", nil); err != nil {
		t.Fatal(err)
	}
	if d, err = Load(l, "plain"); err != nil || d.Limits.Tasks != 100 {
		t.Fatalf("after set: %+v, %v", d, err)
	}
}
