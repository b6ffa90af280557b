package fsm_test

import (
	"log/slog"
	"testing"

	"github.com/cortexfs/ctx/internal/fsm"
	"github.com/cortexfs/ctx/internal/fsm/fsmtest"
)

type light int

// TestTable: a three-phase table through the shared check, and names.
func TestTable(t *testing.T) {
	tab := fsm.Table[light]{What: "light", Names: []string{"red", "green", "amber"},
		Moves: map[light][]light{0: {1}, 1: {2}, 2: {0}}}
	fsmtest.Check(t, tab, 3, func(log *slog.Logger, from, to light) (bool, light) {
		now, ok := tab.Move(log, from, to)
		return ok, now
	})
	if tab.Name(2) != "amber" || tab.Name(7) != "phase(7)" {
		t.Errorf("names %q %q", tab.Name(2), tab.Name(7))
	}
}
