package workspace

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkRunPlaceholders: a one-call run's placeholders in a workspace
// where every protected name is absent — made, then removed once the
// run ended — through the registry, interleaved with the floor of the
// same names made and removed with one syscall each (a directory or a
// FIFO per name, 22 inodes). The registry links the file names to one
// FIFO; ratio registry/floor.
func BenchmarkRunPlaceholders(b *testing.B) {
	ws := b.TempDir()
	d, err := Open(ws, Options{Homes: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	r := NewRegistry()
	fd := int(d.File.Fd())
	var reg, floor time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for _, rel := range acquireAll(b, r, d.File) {
			rel() // the sandbox ended
		}
		r.EndRun("run")
		reg += time.Since(t0)
		r.ended = nil // the same run name again next time
		r.endedFIFO = nil

		t0 = time.Now()
		for _, n := range Protected {
			if IsDirName(n) {
				err = unix.Mkdirat(fd, n, PlaceholderDirMode)
			} else {
				err = unix.Mkfifoat(fd, n, PlaceholderFileMode)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, n := range Protected {
			flags := 0
			if IsDirName(n) {
				flags = unix.AT_REMOVEDIR
			}
			if err := unix.Unlinkat(fd, n, flags); err != nil {
				b.Fatal(err)
			}
		}
		floor += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(reg.Microseconds())/n, "registry-µs")
	b.ReportMetric(float64(floor.Microseconds())/n, "22-inodes-µs")
	b.ReportMetric(float64(reg)/float64(floor), "registry/floor")
}

// BenchmarkHeldPlaceholders: a sandbox's placeholders while a run holds
// them already (every step and tool call of a run after its first, and
// concurrent runs in one workspace): 22 names acquired by a second
// sandbox, then released — interleaved with the floor of one fstatat of
// each name (the least a check that they are still there costs); ratio
// registry/floor.
func BenchmarkHeldPlaceholders(b *testing.B) {
	ws := b.TempDir()
	d, err := Open(ws, Options{Homes: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	r := NewRegistry()
	for _, rel := range acquireAll(b, r, d.File) { // the run's first sandbox made them
		rel()
	}
	defer r.EndRun("run")
	fd := int(d.File.Fd())
	var reg, floor time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for _, rel := range acquireAll(b, r, d.File) {
			rel()
		}
		reg += time.Since(t0)

		t0 = time.Now()
		var st unix.Stat_t
		for _, n := range Protected {
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				b.Fatal(err)
			}
		}
		floor += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(reg.Microseconds())/n, "registry-µs")
	b.ReportMetric(float64(floor.Microseconds())/n, "22-stats-µs")
	b.ReportMetric(float64(reg)/float64(floor), "registry/floor")
}

// acquireAll acquires every protected name below top for the run "run",
// as one sandbox does, and returns the releases.
func acquireAll(b *testing.B, r *Registry, top *os.File) []func() {
	var rels []func()
	for _, n := range Protected {
		f, ph, rel, err := r.AcquireFor("run", top, n, IsDirName(n))
		if err != nil || !ph {
			b.Fatal(n, ph, err)
		}
		f.Close()
		rels = append(rels, rel)
	}
	return rels
}
