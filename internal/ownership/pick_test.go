package ownership

import (
	"fmt"
	"hash/fnv"
	"testing"
)

func nodes(ids ...string) []NodeInfo {
	out := make([]NodeInfo, len(ids))
	for i, id := range ids {
		out[i] = NodeInfo{Node: id}
	}
	return out
}

func sessions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("agent/default/s%04d", i)
	}
	return out
}

func TestPickIsDeterministicAndOrderFree(t *testing.T) {
	a, b := nodes("n1", "n2", "n3"), nodes("n3", "n1", "n2")
	for _, s := range sessions(50) {
		x, y := Pick(s, a), Pick(s, b)
		if x.Node != y.Node || x.Node == "" {
			t.Fatalf("Pick(%s) = %q over %v, %q over %v", s, x.Node, a, y.Node, b)
		}
		if again := Pick(s, a); again.Node != x.Node {
			t.Fatalf("Pick(%s) changed: %q then %q", s, x.Node, again.Node)
		}
	}
}

func TestPickSpreadsSessions(t *testing.T) {
	for _, ids := range [][]string{
		{"n1", "n2", "n3"},
		{"alpha", "beta", "gamma"},
		{"node-a.example:7000", "node-b.example:7000", "node-c.example:7000"},
	} {
		count := map[string]int{}
		for _, s := range sessions(300) {
			count[Pick(s, nodes(ids...)).Node]++
		}
		t.Logf("300 sessions over %v: %v", ids, count)
		for _, id := range ids {
			if c := count[id]; c < 60 || c > 140 {
				t.Errorf("nodes %v: %s got %d of 300 sessions, want 60..140 (all: %v)", ids, id, c, count)
			}
		}
	}
}

func TestPickRemovingANodeMovesOnlyItsSessions(t *testing.T) {
	all := nodes("n1", "n2", "n3", "n4")
	without := nodes("n1", "n2", "n4")
	moved := 0
	for _, s := range sessions(400) {
		before, after := Pick(s, all), Pick(s, without)
		if before.Node != "n3" && after.Node != before.Node {
			t.Fatalf("%s moved from %s to %s though %s is still live", s, before.Node, after.Node, before.Node)
		}
		if before.Node == "n3" {
			moved++
			if after.Node == "n3" {
				t.Fatalf("%s still on the removed node", s)
			}
		}
	}
	if moved == 0 {
		t.Fatal("n3 owned no session: the test proves nothing")
	}
	// Adding a node takes sessions only onto it.
	for _, s := range sessions(400) {
		before, after := Pick(s, without), Pick(s, all)
		if after.Node != before.Node && after.Node != "n3" {
			t.Fatalf("adding n3 moved %s from %s to %s", s, before.Node, after.Node)
		}
	}
}

func TestPickEdges(t *testing.T) {
	if got := Pick("a/b/c", nil); got.Node != "" {
		t.Fatalf("Pick over no nodes = %q, want the zero NodeInfo", got.Node)
	}
	one := []NodeInfo{{Node: "only", Addr: "x:1"}}
	if got := Pick("a/b/c", one); got != one[0] {
		t.Fatalf("Pick over one node = %+v", got)
	}
	// The separator keeps node "ab" + session "c…" apart from node "a" +
	// session "bc…".
	if score("ab", "c/d/e") == score("a", "bc/d/e") {
		t.Fatal("score does not separate node from session")
	}
}

// TestPickPlainFNVWouldNotSpread records why score mixes FNV's output:
// without it one node takes (nearly) everything.
func TestPickPlainFNVWouldNotSpread(t *testing.T) {
	count := map[string]int{}
	for _, s := range sessions(300) {
		best, bestScore := "", uint64(0)
		for _, n := range []string{"alpha", "beta", "gamma"} {
			h := fnv.New64a()
			h.Write([]byte(n + "\x00" + s))
			if v := h.Sum64(); best == "" || v > bestScore {
				best, bestScore = n, v
			}
		}
		count[best]++
	}
	if max(count["alpha"], count["beta"], count["gamma"]) < 250 {
		t.Skipf("plain FNV spreads here (%v); the finalizer is then only insurance", count)
	}
	t.Logf("plain fnv64a over 300 sessions: %v", count)
}
