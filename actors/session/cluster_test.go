package session

import (
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// A cluster owner (Keep.Epoch set) takes the session's log over: the run
// the lost node left open is concluded once, interrupted, naming that
// node; the frames go to the owner's own segment, never to events.jsonl;
// a resume streams the whole chain from the segmented log; a restarted
// owner of the same ownership continues its segment and concludes
// nothing twice (interfaces.md "Cluster (phase 1)").
func TestClusterOwnerConcludesTheLostNodesRun(t *testing.T) {
	sys := newSystem(t)
	cfg := testConfig(t)
	dir, _ := seed(t, cfg)
	// The lost node n1 owned the session at epoch 3; its segment holds the open run.
	l, _, err := store.OpenSegmented(dir, 3, "n1")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	before := readEvents(t, dir+"/events.jsonl")

	keep := NewKeep()
	keep.Epoch, keep.Node = 8, "n2"
	pid, err := sys.Root.SpawnNamed(Props(cfg, key, keep), "owner")
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})
	got := cl.until(ipc.TypeCaughtUp)
	if len(got) != len(before)+3 {
		t.Fatalf("resume: %s", types(got))
	}
	for i := range before {
		if got[i].raw != before[i].raw {
			t.Fatalf("frame %d: %s, want %s", i, got[i].raw, before[i].raw)
		}
	}
	e, d := got[len(before)], got[len(before)+1]
	if e.Type != ipc.TypeError || e.Code != ipc.CodeInterrupted || !strings.Contains(e.Message, "node n1 was lost") || e.Seq != int64(len(before)+1) {
		t.Fatalf("conclusion %s", e.raw)
	}
	if d.Type != ipc.TypeDone || d.Status != ipc.StatusError || d.ID != "msg-1" {
		t.Fatalf("done %s", d.raw)
	}
	if after := readEvents(t, dir+"/events.jsonl"); len(after) != len(before) {
		t.Fatalf("the owner wrote %d frames to events.jsonl", len(after)-len(before))
	}
	stop(t, sys, pid)

	// The same ownership again (a restarted actor): nothing concluded twice.
	pid, err = sys.Root.SpawnNamed(Props(cfg, key, keep), "owner-again")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(t, sys, pid) }()
	cl2 := newClient(t)
	sys.Root.Send(pid, &Request{Conn: cl2.conn, Req: &ipc.Request{Op: ipc.OpResume, Session: key.Name, Scope: key.Scope}})
	if again := cl2.until(ipc.TypeCaughtUp); len(again) != len(got) {
		t.Fatalf("second start: %s", types(again))
	}
}
