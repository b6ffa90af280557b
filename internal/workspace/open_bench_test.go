package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
)

// BenchmarkOpen: a workspace's open and checks (every run opens its
// workspace for the agent's check, the audit, each sandbox's view and the
// audit's end) against its floor in the same run, interleaved: opening
// the same directory by the same no-symlink walk and nothing else. The
// workspace is four levels below /tmp, the runtime's trees beside it.
func BenchmarkOpen(b *testing.B) {
	base := b.TempDir()
	ws := filepath.Join(base, "a", "b", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	l := layout.Layout{Root: filepath.Join(base, "root"), Runtime: filepath.Join(base, "run"), UID: os.Getuid()}
	os.MkdirAll(l.Root, 0o755)
	os.MkdirAll(l.Runtime, 0o755)
	var open, floor time.Duration
	for b.Loop() {
		t0 := time.Now()
		d, err := Open(ws, Options{Layout: l, Homes: []string{"/root"}})
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
		t1 := time.Now()
		f, err := safefs.Open(ws, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
		open, floor = open+t1.Sub(t0), floor+time.Since(t1)
	}
	b.ReportMetric(float64(open)/float64(b.N)/1e3, "open-µs")
	b.ReportMetric(float64(open)/float64(floor), "open/floor")
}
