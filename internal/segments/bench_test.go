package segments

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkActivate: one takeover of a session of 200 frames that two
// owners already had (events.jsonl, then epoch 1): the chain walk, the
// O_EXCL create, the epoch record and two fsyncs. It reports the median.
// Run it on a disk ($CTX_BENCH_DIR): fsync on tmpfs costs nothing.
func BenchmarkActivate(b *testing.B) {
	root := b.TempDir()
	if d := os.Getenv("CTX_BENCH_DIR"); d != "" {
		var err error
		if root, err = os.MkdirTemp(d, "segments-bench"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(root) })
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(root, "s"+time.Now().Format("150405.000000000"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, Legacy), frames(1, 100), 0o600); err != nil {
			b.Fatal(err)
		}
		w, c, err := Activate(dir, 1, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.File().Write(frames(101, 200)); err != nil {
			b.Fatal(err)
		}
		w.Close()
		c.Close()
		b.StartTimer()
		t0 := time.Now()
		w, c, err = Activate(dir, 2, "bench")
		times = append(times, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		w.Close()
		c.Close()
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-us")
}
