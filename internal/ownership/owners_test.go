package ownership

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/etcdtest"
)

// TestAcquireRaceHasOneWinnerPerSession: two members, each on its own
// client, race for the same 100 sessions; every session has exactly one
// winner and the loser names it, with the winner's epoch.
func TestAcquireRaceHasOneWinnerPerSession(t *testing.T) {
	w := newWorld(t, true)
	a, b := w.join(t, "prod", node("a", "v1")), w.join(t, "prod", node("b", "v1"))
	oa, ob := a.ownersT(t), b.ownersT(t)

	type result struct {
		who  string
		o    Owner
		won  bool
		err  error
		sess string
	}
	ss := sessions(100)
	results := make(chan result, 2*len(ss))
	var wg sync.WaitGroup
	ctx := ctxT(t, 30*time.Second)
	gate := make(chan struct{}) // every Acquire starts at once
	for i, s := range ss {
		sides := []struct {
			who string
			o   *Owners
		}{{"a", oa}, {"b", ob}}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				o, won, err := side.o.Acquire(ctx, s)
				results <- result{side.who, o, won, err, s}
			}()
		}
	}
	close(gate)
	wg.Wait()
	close(results)

	bySession := map[string][]result{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("%s acquire %s: %v", r.who, r.sess, r.err)
		}
		bySession[r.sess] = append(bySession[r.sess], r)
	}
	wins := map[string]int{}
	for _, s := range ss {
		rs := bySession[s]
		if len(rs) != 2 {
			t.Fatalf("%s: %d results", s, len(rs))
		}
		var winner, loser result
		switch {
		case rs[0].won && !rs[1].won:
			winner, loser = rs[0], rs[1]
		case rs[1].won && !rs[0].won:
			winner, loser = rs[1], rs[0]
		default:
			t.Fatalf("%s: won %v and %v, want exactly one winner", s, rs[0].won, rs[1].won)
		}
		wins[winner.who]++
		if winner.o.Node != winner.who || winner.o.Epoch <= 0 {
			t.Fatalf("%s: winner %s got %+v", s, winner.who, winner.o)
		}
		if loser.o != winner.o {
			t.Fatalf("%s: loser %s was told %+v, the winner holds %+v", s, loser.who, loser.o, winner.o)
		}
		// Both caches agree with etcd.
		for _, o := range []*Owners{oa, ob} {
			got, ok, err := o.Lookup(ctx, s)
			if err != nil || !ok || got != winner.o {
				eventually(t, 5*time.Second, "cache shows the winner", func() bool {
					got, ok, err = o.Lookup(ctx, s)
					return err == nil && ok && got == winner.o
				})
			}
		}
	}
	t.Logf("wins over 100 raced sessions: %v", wins)
	list, err := oa.List(ctx)
	if err != nil || len(list) != 100 {
		t.Fatalf("List = %d owners, %v; want 100", len(list), err)
	}
}

func TestAcquireLatency(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) { acquireLatency(t, fsync) })
	}
}

func acquireLatency(t *testing.T, fsync bool) {
	w := &world{srv: etcdtest.Start(t, etcdtest.Options{NoFsync: !fsync})}
	m := w.join(t, "prod", node("a", "v1"))
	o := m.ownersT(t)
	ctx := ctxT(t, 60*time.Second)
	var took []time.Duration
	for _, s := range sessions(100) {
		t0 := time.Now()
		_, won, err := o.Acquire(ctx, s)
		took = append(took, time.Since(t0))
		if err != nil || !won {
			t.Fatalf("acquire %s: %v %v", s, won, err)
		}
	}
	slices.Sort(took)
	t.Logf("Acquire of a free session (includes waiting for the watch): median %v, p90 %v, max %v",
		took[50].Round(time.Microsecond), took[90].Round(time.Microsecond), took[99].Round(time.Microsecond))
	// An Acquire of a taken session is one transaction.
	t0 := time.Now()
	if _, won, err := o.Acquire(ctx, "agent/default/s0000"); err != nil || won {
		t.Fatalf("re-acquire: %v %v", won, err)
	}
	t.Logf("Acquire of an owned session: %v", time.Since(t0).Round(time.Microsecond))
}

// TestAMemberGoneLosesItsKeys: when a member's lease ends — revoked or
// expired — its owner keys vanish with it, and another member's Acquire
// wins with a strictly larger epoch.
func TestAMemberGoneLosesItsKeys(t *testing.T) {
	for _, how := range []string{"revoked", "expired"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, false)
			a, b := w.join(t, "prod", node("a", "v1")), w.join(t, "prod", node("b", "v1"))
			oa, ob := a.ownersT(t), b.ownersT(t)
			ctx := ctxT(t, 20*time.Second)
			before := map[string]int64{}
			for _, s := range sessions(5) {
				o, won, err := oa.Acquire(ctx, s)
				if err != nil || !won {
					t.Fatalf("a acquire %s: %v %v", s, won, err)
				}
				before[s] = o.Epoch
				if lost, won, err := ob.Acquire(ctx, s); err != nil || won || lost.Node != "a" {
					t.Fatalf("b acquire %s while a owns it: %+v %v %v", s, lost, won, err)
				}
			}
			gone := time.Now()
			switch how {
			case "revoked":
				if err := a.Leave(ctx); err != nil {
					t.Fatal(err)
				}
			case "expired":
				a.Close() // stops renewing, as a crash would
			}
			eventually(t, testTTL+3*time.Second, "a's owner keys vanish", func() bool {
				l, err := ob.List(ctx)
				return err == nil && len(l) == 0
			})
			t.Logf("%s: a's keys gone after %v", how, time.Since(gone).Round(time.Millisecond))
			eventually(t, 5*time.Second, "b's cache forgets a's keys", func() bool { return len(ob.Cached()) == 0 })
			for s, old := range before {
				o, won, err := ob.Acquire(ctx, s)
				if err != nil || !won || o.Node != "b" {
					t.Fatalf("b acquire %s after a left: %+v %v %v", s, o, won, err)
				}
				if o.Epoch <= old {
					t.Fatalf("%s: new epoch %d not above a's %d", s, o.Epoch, old)
				}
			}
		})
	}
}

func TestReleaseWithAStaleEpochDeletesNothing(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("a", "v1"))
	o := m.ownersT(t)
	ctx := ctxT(t, 10*time.Second)
	const s = "agent/default/s1"
	first, won, err := o.Acquire(ctx, s)
	if err != nil || !won {
		t.Fatalf("acquire: %v %v", won, err)
	}
	if ok, err := o.Release(ctx, s, first.Epoch); err != nil || !ok {
		t.Fatalf("release at the held epoch: %v %v", ok, err)
	}
	if _, ok, _ := o.Lookup(ctx, s); ok {
		t.Fatal("Lookup still finds the released session")
	}
	second, won, err := o.Acquire(ctx, s)
	if err != nil || !won || second.Epoch <= first.Epoch {
		t.Fatalf("re-acquire: %+v %v %v (first epoch %d)", second, won, err, first.Epoch)
	}
	if ok, err := o.Release(ctx, s, first.Epoch); err != nil || ok {
		t.Fatalf("release with the stale epoch %d: %v %v, want false", first.Epoch, ok, err)
	}
	got, ok, err := o.Lookup(ctx, s)
	if err != nil || !ok || got != second {
		t.Fatalf("after a stale release Lookup = %+v %v %v, want %+v", got, ok, err, second)
	}
	if ok, err := o.Release(ctx, "agent/default/never", 1); err != nil || ok {
		t.Fatalf("release of an absent session: %v %v", ok, err)
	}
}

func TestAcquireRejectsBadSessions(t *testing.T) {
	w := newWorld(t, false)
	o := w.join(t, "prod", node("a", "v1")).ownersT(t)
	ctx := ctxT(t, 5*time.Second)
	for _, s := range []string{"", "a/b", "a/b/c/d", "a//c", "a/b/c/"} {
		if _, _, err := o.Acquire(ctx, s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalid", s, err)
		}
		if _, _, err := o.Lookup(ctx, s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Lookup(%q) = %v, want ErrInvalid", s, err)
		}
		if _, err := o.Release(ctx, s, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("Release(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func TestOpenOwnersIsReadOnly(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("a", "v1"))
	ctx := ctxT(t, 5*time.Second)
	won, _, err := m.ownersT(t).Acquire(ctx, "a/b/c")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := OpenOwners(ctx, w.client(t), "prod")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, _, err := ro.Acquire(ctx, "a/b/d"); !errors.Is(err, ErrNotMember) {
		t.Fatalf("read-only Acquire = %v, want ErrNotMember", err)
	}
	if _, err := ro.Release(ctx, "a/b/c", won.Epoch); !errors.Is(err, ErrNotMember) {
		t.Fatalf("read-only Release = %v, want ErrNotMember", err)
	}
	got, ok, err := ro.Lookup(ctx, "a/b/c")
	if err != nil || !ok || got != won {
		t.Fatalf("read-only Lookup = %+v %v %v, want %+v", got, ok, err, won)
	}
	list, err := ro.List(ctx)
	if err != nil || len(list) != 1 || list[0] != won {
		t.Fatalf("List = %+v %v", list, err)
	}
}

// TestOwnersCacheReloadsAfterCompaction: a watch that falls behind a
// compaction cannot resume; the cache reloads the prefix and ends up
// equal to etcd, including deletions it never saw as events.
func TestOwnersCacheReloadsAfterCompaction(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("a", "v1"))
	ctx := ctxT(t, 20*time.Second)

	var mu sync.Mutex
	var hold chan struct{} // non-nil: the next watch waits for it
	var froms []int64
	o, err := openOwners(ctx, m.cli, m.keys, m, quiet, func(from int64) {
		mu.Lock()
		h := hold
		froms = append(froms, from)
		mu.Unlock()
		if h != nil {
			<-h
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()

	kept, _, err := o.Acquire(ctx, "a/s/kept")
	if err != nil {
		t.Fatal(err)
	}
	dropped, _, err := o.Acquire(ctx, "a/s/dropped")
	if err != nil {
		t.Fatal(err)
	}

	// Hold the cache between two watches, change etcd behind its back,
	// compact, then let it resume from where it was.
	t1 := time.Now()
	release := make(chan struct{})
	mu.Lock()
	hold = release
	mu.Unlock()
	o.c.restartWatch()
	eventually(t, 5*time.Second, "the cache waits to re-watch", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(froms) >= 2
	})
	t.Logf("watch restarted in %v", time.Since(t1).Round(time.Millisecond))
	if ok, err := o.Release(ctx, "a/s/dropped", dropped.Epoch); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
	added, _, err := o.Acquire(ctx, "a/s/added")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.cli.Compact(ctx, added.Epoch); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	hold = nil
	mu.Unlock()
	close(release)

	t0 := time.Now()
	want := []Owner{added, kept}
	eventually(t, 10*time.Second, "the cache equals etcd after the reload", func() bool {
		return slices.Equal(o.Cached(), want)
	})
	t.Logf("cache equal to etcd %v after the held watch resumed", time.Since(t0).Round(time.Millisecond))
	if n := o.c.loads.Load(); n != 2 {
		t.Fatalf("%d full reads of the prefix, want 2 (the start and one reload)", n)
	}
	mu.Lock()
	resumedFrom := froms[1]
	mu.Unlock()
	if resumedFrom > dropped.Epoch+1 {
		t.Fatalf("the held watch would resume at %d, after the release it must miss", resumedFrom)
	}
	for _, s := range []string{"a/s/kept", "a/s/added", "a/s/dropped"} {
		got, ok, err := o.Lookup(ctx, s)
		wantOK := s != "a/s/dropped"
		if err != nil || ok != wantOK {
			t.Fatalf("Lookup(%s) = %+v %v %v, want ok=%v", s, got, ok, err, wantOK)
		}
	}
	// And it keeps following: a new write after the reload shows up.
	late, _, err := o.Acquire(ctx, "a/s/late")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := o.Lookup(ctx, "a/s/late"); !ok || got != late {
		t.Fatalf("Lookup after reload = %+v %v, want %+v", got, ok, late)
	}
}

// TestLookupReadsEtcdWhileUnsynced: while the cache reloads, Lookup goes
// to etcd rather than answer from a stale map.
func TestLookupReadsEtcdWhileUnsynced(t *testing.T) {
	w := newWorld(t, false)
	m := w.join(t, "prod", node("a", "v1"))
	o := m.ownersT(t)
	ctx := ctxT(t, 10*time.Second)
	held, _, err := o.Acquire(ctx, "a/s/1")
	if err != nil {
		t.Fatal(err)
	}
	o.c.mu.Lock()
	o.c.synced = false
	delete(o.c.kvs, o.keys.owner("a/s/1")) // what a stale map might say
	o.c.mu.Unlock()
	got, ok, err := o.Lookup(ctx, "a/s/1")
	if err != nil || !ok || got != held {
		t.Fatalf("unsynced Lookup = %+v %v %v, want %+v from etcd", got, ok, err, held)
	}
}

func ExamplePick() {
	live := []NodeInfo{{Node: "n1"}, {Node: "n2"}, {Node: "n3"}}
	for _, s := range []string{"agent/default/a", "agent/default/b", "agent/default/c", "agent/default/d", "agent/default/e", "agent/default/f"} {
		fmt.Println(s, "->", Pick(s, live).Node)
	}
	// Output:
	// agent/default/a -> n1
	// agent/default/b -> n1
	// agent/default/c -> n1
	// agent/default/d -> n1
	// agent/default/e -> n2
	// agent/default/f -> n2
}
