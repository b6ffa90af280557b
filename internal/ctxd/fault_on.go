//go:build ctxfault

package ctxd

import (
	"os"
	"path/filepath"
	"strings"
)

// faultHook (test builds only, -tags ctxfault) panics at fault points:
//   - CTX_FAULT names points (comma-separated) that panic every time, e.g.
//     CTX_FAULT=run.tool_call;
//   - CTX_FAULT_DIR is a directory where a file named after a point arms
//     it once: the hook that finds the file removes it and panics (the
//     chaos test arms actors this way while a daemon runs; issue 15 item 5).
//
// Points: run.start, run.tool_call, session.request, agent.incoming.
func faultHook() func(string) {
	spec, dir := os.Getenv("CTX_FAULT"), os.Getenv("CTX_FAULT_DIR")
	if spec == "" && dir == "" {
		return nil
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
