package supervisor

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/config"
)

var sink [][]byte

// returnMemory gives the heap back once a wave of sessions was
// passivated, keeps counting below the wave, and stops with its context
// (CTX_SESSION_IDLE: idle sessions cost nothing).
func TestReturnMemoryAfterAWave(t *testing.T) {
	cfg := &config.Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); returnMemory(ctx, cfg, 5*time.Millisecond, 3) }()
	cfg.Passivated()
	cfg.Passivated()
	time.Sleep(30 * time.Millisecond)
	if n := cfg.TakePassivated(1); n != 2 {
		t.Fatalf("below the wave the count was %d, want the 2 noted (kept)", n)
	}
	// A wave: 4 passivations of a heap that held 64 MiB.
	sink = make([][]byte, 64)
	for i := range sink {
		sink[i] = make([]byte, 1<<20)
		sink[i][0] = 1
	}
	runtime.GC() // the scavenger has nothing to return yet: all of it is live
	sink = nil
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 4; i++ {
		cfg.Passivated()
	}
	var after runtime.MemStats
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.ReadMemStats(&after)
		if after.HeapReleased > before.HeapReleased+32<<20 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := cfg.TakePassivated(1); n != 0 {
		t.Errorf("the wave of 4 was not taken: %d left", n)
	}
	if after.HeapReleased <= before.HeapReleased+32<<20 {
		t.Errorf("no heap returned to the system: released %d → %d bytes", before.HeapReleased, after.HeapReleased)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("returnMemory did not stop with its context")
	}
}
