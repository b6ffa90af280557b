package cgroup

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/limits"
	"golang.org/x/sys/unix"
)

// BenchmarkEnter: a thread's move into a prepared run group and back
// (Group.EnterFunc and its leave, cgroup v1: what a sandbox's start costs
// beyond its fork), interleaved with the floor of the same moves alone —
// "0" written into each controller's tasks file of the group, then of the
// daemon's own group. Ratio enter/floor.
func BenchmarkEnter(b *testing.B) {
	if _, err := os.Stat("/sys/fs/cgroup/pids/tasks"); err != nil || os.Getuid() != 0 {
		b.Skip("needs writable cgroup v1 hierarchies (root)")
	}
	m := New(context.Background(), os.Getuid(), b.TempDir(), nil)
	v, ok := m.b.(*v1)
	if !ok {
		b.Skipf("threads enter groups on v1 only: %s", m.Mode())
	}
	defer func() {
		for _, c := range v.order {
			os.Remove(v.dirs[c])
		}
	}()
	home, err := v.homes()
	if err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread() // never unlocked: a thread left inside ends with the benchmark's goroutine
	var enter, floor time.Duration
	for i := 0; i < b.N; i++ {
		g := m.Group("run-bench-"+strconv.Itoa(i), limits.Limits{Tasks: 64, Memory: 256 << 20})
		g.Prepare()
		g.mu.Lock()
		made := g.made
		g.mu.Unlock()
		<-made
		t0 := time.Now()
		leave, err := g.EnterFunc()(unix.Gettid())
		if err == nil {
			err = leave()
		}
		enter += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		for _, c := range v.order {
			if err := writeFile(filepath.Join(v.dirs[c], g.name, "tasks"), "0"); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range v.order {
			if err := writeFile(filepath.Join(v.mounts[c], home[c], "tasks"), "0"); err != nil {
				b.Fatal(err)
			}
		}
		floor += time.Since(t0)
		if err := g.Close(0); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(enter.Microseconds())/n, "enter+leave-µs")
	b.ReportMetric(float64(floor.Microseconds())/n, "8-writes-µs")
	b.ReportMetric(float64(enter)/float64(floor), "enter/floor")
}
