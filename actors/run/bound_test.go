package run

import (
	"testing"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/limits"
)

// TestCallBound: sdk-envelope-v1 keeps the spec's fixed 8 calls / 9
// starts whatever .d/limits says (spec: X6); model and acp-v1 agents take
// `calls` from .d/limits, and a model run's turns are calls+1.
func TestCallBound(t *testing.T) {
	with := func(kind string, abi string, calls int64) *Actor {
		l := limits.Default
		l.Calls = calls
		return &Actor{def: &agentdef.Def{Kind: kind, ABI: abi, Limits: l}}
	}
	cases := []struct {
		a           *Actor
		calls, turn int
	}{
		{&Actor{}, 8, 9},
		{with(agentdef.KindExec, agentdef.ABI, 8), 8, 9},
		{with(agentdef.KindExec, agentdef.ABI, 50), 8, 9},
		{with(agentdef.KindExec, agentdef.ABIACP, 8), 8, 9},
		{with(agentdef.KindExec, agentdef.ABIACP, 20), 20, 21},
		{with(agentdef.KindModel, "", 40), 40, 41},
		{with(agentdef.KindModel, "", 0), 8, 9},
	}
	for i, c := range cases {
		if got, turn := c.a.callBound(), c.a.turnBound(); got != c.calls || turn != c.turn {
			t.Errorf("case %d: calls %d turns %d, want %d %d", i, got, turn, c.calls, c.turn)
		}
	}
}

// TestAgentPath: the terminal's PATH, with a node outside /usr first.
func TestAgentPath(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/node":                                    terminalPath,
		"/opt/node-v20/bin/node":                           "/opt/node-v20/bin:" + terminalPath,
		"/root/.nvm/versions/node/v20/bin/node":            "/root/.nvm/versions/node/v20/bin:" + terminalPath,
		"/var/cache/ctx/agents/node_modules/.bin/opencode": terminalPath,
		"node":                terminalPath,
		"/usr/local/bin/node": terminalPath,
	} {
		if got := agentPath(in); got != want {
			t.Errorf("agentPath(%q) = %q, want %q", in, got, want)
		}
	}
}
