package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkWalk: the protected-path walk (Walk) of Go's own src (~11k
// files, ~1.3k directories, read-only, present wherever go test runs):
// cold (no listing kept: a first walk, or every directory changed) and
// warm (the listings of the walk before, every directory stat'ed) —
// against its floor, the same directories opened and listed with a
// reused buffer and nothing else (getdents, no names made), and against
// the walk as it was over File.ReadDir (walkReference). A tool call in a
// workspace walks it three times (the run's start, the view, the run's
// end).
func BenchmarkWalk(b *testing.B) {
	d, err := os.Open(goSrc())
	if err != nil {
		b.Skip(err)
	}
	defer d.Close()
	var cold, warm, floor, ref time.Duration
	entries := 0
	for b.Loop() {
		forgetListings()
		t0 := time.Now()
		f := Walk(d, Grants{}, nil)
		cold += time.Since(t0)
		if f.Truncated != "" {
			b.Fatal(f.Truncated)
		}
		t0 = time.Now()
		Walk(d, Grants{}, nil)
		warm += time.Since(t0)
		t0 = time.Now()
		entries = listAll(b, int(d.Fd()))
		floor += time.Since(t0)
		t0 = time.Now()
		walkReference(d, Grants{}, nil)
		ref += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cold.Microseconds())/n/1000, "cold-ms")
	b.ReportMetric(float64(warm.Microseconds())/n/1000, "warm-ms")
	b.ReportMetric(float64(floor.Microseconds())/n/1000, "getdents-ms")
	b.ReportMetric(float64(ref.Microseconds())/n/1000, "readdir-walk-ms")
	b.ReportMetric(float64(cold)/float64(floor), "cold/getdents")
	b.ReportMetric(float64(warm)/float64(floor), "warm/getdents")
	b.ReportMetric(float64(cold)/float64(ref), "cold/readdir-walk")
	b.ReportMetric(float64(entries), "dirs")
}

// forgetListings drops every kept listing (walks start cold).
func forgetListings() {
	walkListings.mu.Lock()
	clear(walkListings.tops)
	walkListings.mu.Unlock()
}

// listAll opens and lists every directory below top (to MaxDepth),
// breadth first, with one buffer: the floor of any walk. It returns the
// number of directories.
func listAll(b *testing.B, top int) int {
	buf := make([]byte, 32<<10)
	type item struct{ fd, depth int }
	fd, err := unix.Openat(top, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	queue, dirs := []item{{fd, 0}}, 0
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		dirs++
		for {
			n, err := unix.Getdents(it.fd, buf)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
			for off := 0; off < n; {
				reclen := int(buf[off+16]) | int(buf[off+17])<<8
				typ := buf[off+18]
				name := buf[off+19 : off+reclen]
				for i, c := range name {
					if c == 0 {
						name = name[:i]
						break
					}
				}
				off += reclen
				if typ != unix.DT_DIR || it.depth >= MaxDepth || string(name) == "." || string(name) == ".." {
					continue
				}
				sub, err := unix.Openat(it.fd, string(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err == nil {
					queue = append(queue, item{sub, it.depth + 1})
				}
			}
		}
		unix.Close(it.fd)
	}
	return dirs
}

// goSrc is the Go toolchain's src directory (a large, read-only tree
// present wherever go test runs), or "" when go cannot say.
func goSrc() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}
