package store

import (
	"os"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

// benchMix is one realistic run: user, start, 10 deltas, tool_call,
// tool_result, assistant, done — 16 frames, 4 of them commit points.
func benchMix() []ipc.Frame {
	fs := []ipc.Frame{
		{Type: ipc.TypeUser, Session: "bench", Run: "run-1", ID: "msg-1", Text: "what time is it in Tokyo?"},
		{Type: ipc.TypeStart, Session: "bench", Run: "run-1", ID: "msg-1", Op: "send"},
	}
	for i := 0; i < 10; i++ {
		fs = append(fs, ipc.Frame{Type: ipc.TypeDelta, Session: "bench", Run: "run-1", Text: "a few tokens of text "})
	}
	return append(fs,
		ipc.Frame{Type: ipc.TypeToolCall, Session: "bench", Run: "run-1", CallID: "call-1", Name: "tsh", Args: []string{"clock", "--tz", "Asia/Tokyo"}},
		ipc.Frame{Type: ipc.TypeToolResult, Session: "bench", Run: "run-1", CallID: "call-1", Name: "tsh", Status: "ok", Content: "2026-01-02T03:04:05+09:00\n"},
		ipc.Frame{Type: ipc.TypeAssistant, Session: "bench", Run: "run-1", Text: "It is 03:04 in Tokyo."},
		ipc.Frame{Type: ipc.TypeDone, Session: "bench", Run: "run-1", ID: "msg-1", Status: "ok"},
	)
}

// benchAppend appends b.N runs of the mix and reports frames per second.
// The log lives on the disk of $CTX_BENCH_DIR (default: the test temp dir):
// fsync on tmpfs costs nothing and would make the comparison meaningless.
func benchAppend(b *testing.B, noSync bool, open func(dir string) (*Log, []Record, error)) {
	dir := b.TempDir()
	if d := os.Getenv("CTX_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "store-bench"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	l, _, err := open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	l.NoSync = noSync
	mix := benchMix()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, f := range mix {
			if _, err := l.Append(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	frames := float64(b.N * len(mix))
	b.ReportMetric(frames/b.Elapsed().Seconds(), "frames/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/frames, "ns/frame")
}

// BenchmarkAppendDurable: the fsync policy (fsync after user, tool_result,
// assistant, done). Compare with BenchmarkAppendNoSync in the same run. spec: P5, X7
func BenchmarkAppendDurable(b *testing.B) { benchAppend(b, false, Open) }

// BenchmarkAppendNoSync: the same appends with fsync off (Log.NoSync).
func BenchmarkAppendNoSync(b *testing.B) { benchAppend(b, true, Open) }

// BenchmarkAppendSegmentedDurable: the same appends to a cluster owner's
// segment (OpenSegmented), which must cost what BenchmarkAppendDurable does.
func BenchmarkAppendSegmentedDurable(b *testing.B) {
	benchAppend(b, false, func(dir string) (*Log, []Record, error) { return OpenSegmented(dir, 7, "bench") })
}
