package session

import (
	"slices"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

func TestFollowers(t *testing.T) {
	a, b := &ipc.Conn{}, &ipc.Conn{}
	f := followers{}
	if f.any() {
		t.Fatal("empty followers: any() = true")
	}
	f.add("r1", sub{conn: a})
	f.add("r1", sub{conn: b, replay: true})
	f.add("r2", sub{conn: a})
	got := f.runs()
	slices.Sort(got)
	if !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("runs() = %v", got)
	}
	f.dropConn(a)
	if len(f["r1"]) != 1 || f["r1"][0].conn != b || !f["r1"][0].replay || len(f["r2"]) != 0 {
		t.Fatalf("after dropConn(a): %v", f)
	}
	if !f.any() {
		t.Fatal("b still follows r1: any() = false")
	}
	n := 0
	f.each(func(sub) { n++ })
	if n != 1 {
		t.Fatalf("each visited %d followers, want 1", n)
	}
	f.drop("r1")
	if f.any() {
		t.Fatal("after drop(r1): any() = true")
	}
	f.add("r3", sub{conn: a})
	f.dropAll()
	if len(f) != 0 {
		t.Fatalf("after dropAll: %v", f)
	}
}
