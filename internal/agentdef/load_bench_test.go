package agentdef

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

// BenchmarkLoad: a definition of two control files (the common one), read
// as every run reads it (U6), against its floor in the same run,
// interleaved: the two files read with os.ReadFile.
func BenchmarkLoad(b *testing.B) {
	l := layout.Layout{Root: b.TempDir(), Runtime: b.TempDir(), UID: 1000}
	if err := l.EnsureRoot(); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{l.AgentObject("a"): "#!/bin/sh\n",
		filepath.Join(l.AgentControl("a"), "abi"):    "sdk-envelope-v1\n",
		filepath.Join(l.AgentControl("a"), "window"): "auto\n"}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var load, floor time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Load(l, "a"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for _, n := range []string{"abi", "window"} {
			if _, err := os.ReadFile(filepath.Join(l.AgentControl("a"), n)); err != nil {
				b.Fatal(err)
			}
		}
		load, floor = load+t1.Sub(t0), floor+time.Since(t1)
	}
	b.ReportMetric(float64(load)/float64(floor), "load/readfile")
}
