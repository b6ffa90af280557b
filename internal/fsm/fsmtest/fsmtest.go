// Package fsmtest is the table test every actor's phase table gets: each
// pair of phases, the allowed moves taken, every other one refused, logged
// and without effect.
package fsmtest

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/fsm"
)

// Check drives move (the actor's own transition, given a logger) from every
// phase to every phase, and checks the table holds exactly want moves.
func Check[P ~int](t *testing.T, tab fsm.Table[P], want int, move func(log *slog.Logger, from, to P) (ok bool, now P)) {
	t.Helper()
	n := 0
	for _, from := range tab.Phases() {
		for _, to := range tab.Phases() {
			var logs bytes.Buffer
			ok, now := move(slog.New(slog.NewTextHandler(&logs, nil)), from, to)
			allowed := tab.Allows(from, to)
			if allowed {
				n++
			}
			switch {
			case ok != allowed:
				t.Errorf("%s → %s: moved %v, want %v", tab.Name(from), tab.Name(to), ok, allowed)
			case ok && now != to:
				t.Errorf("%s → %s: now %s", tab.Name(from), tab.Name(to), tab.Name(now))
			case !ok && (now != from || !strings.Contains(logs.String(), "impossible phase move refused")):
				t.Errorf("%s → %s refused: now %s, log %q", tab.Name(from), tab.Name(to), tab.Name(now), logs.String())
			}
		}
	}
	if n != want {
		t.Errorf("the table holds %d moves, want %d (the comment's)", n, want)
	}
}
