package ownership

import (
	"errors"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestJoinValidatesItsArguments(t *testing.T) {
	ctx := ctxT(t, time.Second)
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"empty cluster", Config{Cluster: "", Me: node("n1", "v1"), TTL: 5 * time.Second}},
		{"slash in cluster", Config{Cluster: "a/b", Me: node("n1", "v1"), TTL: 5 * time.Second}},
		{"empty node", Config{Cluster: "c", Me: node("", "v1"), TTL: 5 * time.Second}},
		{"slash in node", Config{Cluster: "c", Me: node("n/1", "v1"), TTL: 5 * time.Second}},
		{"ttl under a second", Config{Cluster: "c", Me: node("n1", "v1"), TTL: 900 * time.Millisecond}},
		{"default margin not under ttl/2", Config{Cluster: "c", Me: node("n1", "v1"), TTL: 2 * time.Second}},
		{"margin over ttl/2", Config{Cluster: "c", Me: node("n1", "v1"), TTL: 5 * time.Second, Margin: 3 * time.Second}},
		{"negative margin", Config{Cluster: "c", Me: node("n1", "v1"), TTL: 5 * time.Second, Margin: -time.Second}},
	} {
		// A nil client: the arguments are refused before etcd is asked.
		if m, err := JoinWith(ctx, nil, c.cfg); err == nil {
			m.Close()
			t.Errorf("%s: JoinWith accepted %+v", c.name, c.cfg)
		}
	}
}

func TestJoinPutsTheNodeOnItsLease(t *testing.T) {
	w := newWorld(t, true) // mutual TLS, as ctx-cluster runs etcd
	me := node("n1", "v1")
	m := w.join(t, "prod", me)

	cli := w.client(t)
	r, err := cli.Get(ctxT(t, 5*time.Second), "/ctx/prod/nodes/n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 || r.Kvs[0].Lease != int64(m.LeaseID()) {
		t.Fatalf("nodes/n1 = %v, want one key on lease %x", r.Kvs, m.LeaseID())
	}
	live, err := Live(ctxT(t, 5*time.Second), cli, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0] != me {
		t.Fatalf("Live = %+v, want [%+v]", live, me)
	}
	if d := time.Until(m.Deadline()); d <= 0 || d > testTTL-testMargin {
		t.Fatalf("deadline %v from now, want in (0, %v]", d, testTTL-testMargin)
	}
	select {
	case d := <-m.Deadlines():
		if !d.Equal(m.Deadline()) && d.After(m.Deadline()) {
			t.Fatalf("first deadline %v after Deadline() %v", d, m.Deadline())
		}
	default:
		t.Fatal("Deadlines has no first deadline after Join")
	}
}

func TestJoinRefusesAnotherVersion(t *testing.T) {
	w := newWorld(t, false)
	w.join(t, "prod", node("n1", "v1"))
	w.join(t, "prod", node("n2", "v1"))
	cli := w.client(t)
	_, err := JoinWith(ctxT(t, 5*time.Second), cli, Config{Cluster: "prod", Me: node("n3", "v2"), TTL: testTTL, Margin: testMargin, Logger: quiet})
	if !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("join with v2 among v1 = %v, want ErrVersionMismatch", err)
	}
	// Nothing of the refused node stays behind: no key, no lease.
	live, err := Live(ctxT(t, 5*time.Second), cli, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 {
		t.Fatalf("live after a refused join = %+v, want n1 and n2", live)
	}
	leases, err := cli.Leases(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 2 {
		t.Fatalf("%d leases after a refused join, want 2 (the refused one revoked)", len(leases.Leases))
	}
	// Another cluster on the same etcd is another world.
	m, err := JoinWith(ctxT(t, 5*time.Second), cli, Config{Cluster: "staging", Me: node("n3", "v2"), TTL: testTTL, Margin: testMargin, Logger: quiet})
	if err != nil {
		t.Fatalf("join another cluster: %v", err)
	}
	m.Close()
}

func TestJoinRefusesANodeAliveTwice(t *testing.T) {
	w := newWorld(t, false)
	first := w.join(t, "prod", node("n1", "v1"))
	_, err := JoinWith(ctxT(t, 5*time.Second), w.client(t), Config{Cluster: "prod", Me: node("n1", "v1"), TTL: testTTL, Margin: testMargin, Logger: quiet})
	if !errors.Is(err, ErrNodeAlive) {
		t.Fatalf("second join as n1 = %v, want ErrNodeAlive", err)
	}
	// The first is untouched and still renewing.
	select {
	case <-first.Lost():
		t.Fatalf("the first n1 was lost: %v", first.Err())
	case <-time.After(testTTL):
	}
	// Once it leaves, the id is free again.
	if err := first.Leave(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	again := w.join(t, "prod", node("n1", "v1"))
	if again.LeaseID() == first.LeaseID() {
		t.Fatal("the new n1 reuses the old lease")
	}
}

// TestDeadlineAdvancesThenLostWhenRenewalsStop: with etcd healthy, the
// deadline moves forward with each renewal; when renewals stop, Lost
// closes once the last deadline passes, and no new lease is ever granted.
func TestDeadlineAdvancesThenLostWhenRenewalsStop(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("n1", "v1"))
	cli := w.client(t)

	var seen []time.Time
	end := time.After(2500 * time.Millisecond)
collect:
	for {
		select {
		case d := <-m.Deadlines():
			seen = append(seen, d)
		case <-end:
			break collect
		}
	}
	if len(seen) < 3 {
		t.Fatalf("%d deadlines in 2.5 s, want at least 3 (grant + renewals every %v)", len(seen), testTTL/3)
	}
	if !sort.SliceIsSorted(seen, func(i, j int) bool { return seen[i].Before(seen[j]) }) {
		t.Fatalf("deadlines not increasing: %v", seen)
	}
	if last := seen[len(seen)-1]; !last.Equal(m.Deadline()) {
		t.Fatalf("last deadline delivered %v, Deadline() %v", last, m.Deadline())
	}
	if d := time.Until(m.Deadline()); d <= testTTL-testMargin-testTTL/3-200*time.Millisecond {
		t.Fatalf("deadline only %v ahead while renewing", d)
	}

	m.pauseRenewals(true)
	paused := time.Now()
	deadline := m.Deadline()
	select {
	case <-m.Lost():
	case <-time.After(testTTL):
		t.Fatalf("Lost not closed within the TTL (%v) of renewals stopping", testTTL)
	}
	lostAt := time.Now()
	t.Logf("Lost %v after renewals stopped, %v after the deadline", lostAt.Sub(paused).Round(time.Millisecond), lostAt.Sub(deadline).Round(time.Millisecond))
	if lostAt.Before(deadline) {
		t.Fatalf("Lost closed %v before the deadline", deadline.Sub(lostAt))
	}
	if late := lostAt.Sub(deadline); late > 200*time.Millisecond {
		t.Fatalf("Lost closed %v after the deadline", late)
	}
	if !errors.Is(m.Err(), ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", m.Err())
	}
	o := m.ownersT(t)
	if _, _, err := o.Acquire(ctxT(t, 5*time.Second), "a/s/x"); !errors.Is(err, ErrLost) {
		t.Fatalf("Acquire after Lost = %v, want ErrLost", err)
	}

	// Never re-granted: the resumed member sends nothing, and the only
	// lease etcd ever held for it runs out.
	m.pauseRenewals(false)
	eventually(t, 2*testTTL, "the lost member's lease expires", func() bool {
		r, err := cli.Leases(ctxT(t, 2*time.Second))
		return err == nil && len(r.Leases) == 0
	})
	time.Sleep(testTTL / 2)
	if r, err := cli.Leases(ctxT(t, 2*time.Second)); err != nil || len(r.Leases) != 0 {
		t.Fatalf("leases after Lost: %v %v, want none", r, err)
	}
	if live, _ := Live(ctxT(t, 2*time.Second), cli, "prod"); len(live) != 0 {
		t.Fatalf("live after Lost = %v, want none", live)
	}
}

func TestLostWhenTheLeaseIsRevoked(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("n1", "v1"))
	if _, err := w.client(t).Revoke(ctxT(t, 5*time.Second), m.LeaseID()); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	select {
	case <-m.Lost():
	case <-time.After(testTTL):
		t.Fatal("Lost not closed within the TTL of the lease being revoked")
	}
	t.Logf("Lost %v after the revoke", time.Since(revoked).Round(time.Millisecond))
	// Found out from etcd's answer, not by waiting for the deadline.
	if !time.Now().Before(m.Deadline()) {
		t.Fatalf("Lost only at the deadline; err %v", m.Err())
	}
	if !errors.Is(m.Err(), ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", m.Err())
	}
}

func TestLostWhenEtcdStops(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("n1", "v1"))
	time.Sleep(testTTL / 2) // a renewal or two
	w.srv.Stop()
	stopped := time.Now()
	deadline := m.Deadline()
	select {
	case <-m.Lost():
	case <-time.After(testTTL + time.Second):
		t.Fatalf("Lost not closed within %v of etcd stopping", testTTL+time.Second)
	}
	lostAt := time.Now()
	t.Logf("etcd stopped: Lost after %v, %v after the deadline", lostAt.Sub(stopped).Round(time.Millisecond), lostAt.Sub(deadline).Round(time.Millisecond))
	if lostAt.Sub(stopped) > testTTL {
		t.Fatalf("Lost %v after etcd stopped, more than the TTL", lostAt.Sub(stopped))
	}
	if !errors.Is(m.Err(), ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", m.Err())
	}
}

func TestLeaveRemovesTheNodeAndItsKeys(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("n1", "v1"))
	o := m.ownersT(t)
	if _, won, err := o.Acquire(ctxT(t, 5*time.Second), "a/s/1"); err != nil || !won {
		t.Fatalf("acquire: %v %v", won, err)
	}
	cli := w.client(t)
	if err := m.Leave(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Get(ctxT(t, 5*time.Second), "/ctx/prod/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 0 {
		t.Fatalf("%d keys left after Leave, want 0", r.Count)
	}
	select {
	case <-m.Lost():
		t.Fatal("Leave closed Lost: a graceful leave is not a lost lease")
	default:
	}
	if _, _, err := o.Acquire(ctxT(t, 5*time.Second), "a/s/2"); !errors.Is(err, ErrLost) {
		t.Fatalf("Acquire after Leave = %v, want ErrLost", err)
	}
	if err := m.Leave(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
}

func TestLiveSetFollowsJoinsAndLeaves(t *testing.T) {
	w := newWorld(t, false)
	a := w.join(t, "prod", node("a", "v1"))
	ls, err := a.WatchLive(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	ids := func() []string {
		var out []string
		for _, n := range ls.Nodes() {
			out = append(out, n.Node)
		}
		return out
	}
	if got := ids(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("live = %v, want [a]", got)
	}
	changed := ls.Changed()
	b := w.join(t, "prod", node("b", "v1"))
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed when b joined")
	}
	eventually(t, 5*time.Second, "b in the live set", func() bool { return len(ids()) == 2 && ids()[1] == "b" })
	if err := b.Leave(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b gone from the live set", func() bool { return len(ids()) == 1 })
}
