//go:build ctxfault

package ctxd

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
)

// faultHook (test builds only, -tags ctxfault) panics at fault points:
//   - CTX_FAULT names points (comma-separated) that panic every time, e.g.
//     CTX_FAULT=run.tool_call;
//   - CTX_FAULT_DIR is a directory where a file named after a point arms
//     it once: the hook that finds the file removes it and panics (the
//     chaos test arms actors this way while a daemon runs).
//
// Points: run.start, run.tool_call, session.request, agent.incoming.
//
// With CTX_FAULT_DIR set, SIGUSR2 makes the daemon write its goroutine
// count (first line) and their stacks to CTX_FAULT_DIR/goroutines, so the
// chaos test can tell a leaked goroutine from one still finishing.
func faultHook() func(string) {
	spec, dir := os.Getenv("CTX_FAULT"), os.Getenv("CTX_FAULT_DIR")
	if spec == "" && dir == "" {
		return nil
	}
	if dir != "" {
		probeOnce.Do(func() { go goroutineProbe(dir) })
	}
	points := map[string]bool{}
	for _, p := range strings.Split(spec, ",") {
		if p != "" {
			points[p] = true
		}
	}
	return func(point string) {
		if points[point] {
			panic("injected fault at " + point)
		}
		if dir != "" && os.Remove(filepath.Join(dir, point)) == nil {
			panic("injected fault at " + point + " (armed once)")
		}
	}
}

var probeOnce sync.Once

// goroutineProbe lives as long as the (test build's) process: one
// goroutine, counted in what it reports.
func goroutineProbe(dir string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	for range ch {
		var b strings.Builder
		fmt.Fprintf(&b, "%d\n", runtime.NumGoroutine())
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		tmp := filepath.Join(dir, ".goroutines.tmp")
		if os.WriteFile(tmp, []byte(b.String()), 0o600) == nil {
			_ = os.Rename(tmp, filepath.Join(dir, "goroutines"))
		}
	}
}
