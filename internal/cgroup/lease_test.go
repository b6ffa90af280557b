package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/limits"
)

// groupDir is the group's directory in the pids hierarchy (v1) or the
// unified one (v2).
func groupDir(m *Manager, name string) string {
	if b, ok := m.b.(*v1); ok {
		return filepath.Join(b.dirs["pids"], name)
	}
	return filepath.Join(m.b.(*v2).base, name)
}

// sleeper starts a process and places it in g; the channel is closed
// once it was killed and reaped.
func sleeper(t *testing.T, g *Group) <-chan struct{} {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if err := g.Place(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	return done
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestLeaseKeepsTheSessionsGroup: a session's next run takes the group
// its last run emptied (nothing made again), and nothing of the last run
// is in it: what the run left was killed at its Close. A run of the same
// session while the group is still leased gets a group of its own; other
// limits get a new group and the old one goes; an idle group goes after
// keepFor, and Release removes what is kept. spec: L4
func TestLeaseKeepsTheSessionsGroup(t *testing.T) {
	m := v1Machine(t)
	m.keepFor = 300 * time.Millisecond
	lim := limits.Limits{Tasks: 40, Memory: 400 << 20}
	sess := "agent\x00private\x00s-" + strconv.Itoa(os.Getpid())

	g1 := m.Lease(sess, "run-l1", lim)
	left := sleeper(t, g1) // a process the run leaves behind
	if err := g1.Close(0); err != nil {
		t.Fatal(err)
	}
	if ps, _ := m.b.procs(g1.name); len(ps) != 0 {
		t.Fatalf("the run's process is still in its kept group: %v", ps)
	}
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Fatal("the process the run left is alive after its Close")
	}
	if _, err := os.Stat(groupDir(m, g1.name)); err != nil {
		t.Fatalf("the emptied group is not kept: %v", err)
	}

	g2 := m.Lease(sess, "run-l2", lim)
	if g2.name != g1.name {
		t.Fatalf("the session's next run got %s, not its kept %s", g2.name, g1.name)
	}
	if ps := g2.Procs(); len(ps) != 0 {
		t.Fatalf("the next run's group holds the last run's processes: %v", ps)
	}
	sleeper(t, g2)
	g3 := m.Lease(sess, "run-l3", lim) // beside it: a group of its own
	if g3.name == g2.name || g3.slot != nil {
		t.Fatalf("a run beside a leased group shares it: %s", g3.name)
	}
	g3.Close(0)
	if err := g2.Close(0); err != nil {
		t.Fatal(err)
	}

	// Other limits: a new group; the kept one is removed.
	g4 := m.Lease(sess, "run-l4", limits.Limits{Tasks: 41, Memory: 400 << 20})
	if g4.name == g1.name {
		t.Fatal("a run with other limits took the kept group")
	}
	until(t, "the old kept group removed", func() bool { _, err := os.Stat(groupDir(m, g1.name)); return os.IsNotExist(err) })
	sleeper(t, g4)
	if b, err := os.ReadFile(filepath.Join(groupDir(m, g4.name), "pids.max")); err != nil || string(b) != "41\n" {
		t.Fatalf("the new group's pids.max: %q %v", b, err)
	}
	if err := g4.Close(0); err != nil {
		t.Fatal(err)
	}
	// Idle for keepFor: removed.
	until(t, "the idle group removed", func() bool { _, err := os.Stat(groupDir(m, g4.name)); return os.IsNotExist(err) })

	g5 := m.Lease(sess, "run-l5", lim)
	sleeper(t, g5)
	if err := g5.Close(0); err != nil {
		t.Fatal(err)
	}
	m.Release()
	if _, err := os.Stat(groupDir(m, g5.name)); !os.IsNotExist(err) {
		t.Fatalf("Release left the kept group: %v", err)
	}
	if g := m.Lease(sess, "run-l6", lim); g.slot != nil {
		t.Fatal("a lease after Release is kept")
	}
}

// TestLeaseKeepsAtMostKeepMax: idle groups past keepMax go, oldest first.
func TestLeaseKeepsAtMostKeepMax(t *testing.T) {
	m := v1Machine(t)
	m.keepMax = 2
	defer m.Release()
	lim := limits.Limits{Tasks: 40}
	var names []string
	for i := range 3 {
		g := m.Lease("s"+strconv.Itoa(i)+"-"+strconv.Itoa(os.Getpid()), "run-k"+strconv.Itoa(i), lim)
		sleeper(t, g)
		if err := g.Close(0); err != nil {
			t.Fatal(err)
		}
		names = append(names, g.name)
	}
	until(t, "the oldest idle group removed", func() bool { _, err := os.Stat(groupDir(m, names[0])); return os.IsNotExist(err) })
	for _, n := range names[1:] {
		if _, err := os.Stat(groupDir(m, n)); err != nil {
			t.Errorf("kept group %s: %v", n, err)
		}
	}
	// Taking one again leaves one idle: the count follows.
	g := m.Lease("s2-"+strconv.Itoa(os.Getpid()), "run-k3", lim)
	m.slotMu.Lock()
	idle := 0
	for _, s := range m.slots {
		if !s.busy {
			idle++
		}
	}
	n := m.idle
	m.slotMu.Unlock()
	if g.name != names[2] || idle != 1 || n != 1 {
		t.Errorf("after taking %s back: got %s, %d idle, counted %d", names[2], g.name, idle, n)
	}
	g.Close(0)
}
