package supervisor

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/cortexfs/ctx/internal/config"
)

// memoryEvery and memoryWave: at most every memoryEvery, once at least
// memoryWave sessions were passivated since the last time, the daemon
// returns the memory they freed to the system.
const (
	memoryEvery = 10 * time.Second
	memoryWave  = 64
)

// returnMemory gives the heap that passivated sessions freed back to the
// system. Go keeps a heap's high-water mark mapped: a burst of live
// sessions would otherwise stay in the daemon's RSS long after they were
// passivated (CTX_SESSION_IDLE: idle sessions cost nothing). One forced
// collection per wave, rate-limited, costs a few ms of a quiet daemon.
func returnMemory(ctx context.Context, cfg *config.Config, every time.Duration, wave int64) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := cfg.TakePassivated(wave); n > 0 {
				start := time.Now()
				debug.FreeOSMemory()
				cfg.Log.Debug("returned freed memory after passivations", "sessions", n, "took", time.Since(start))
			}
		}
	}
}
