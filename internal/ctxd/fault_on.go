//go:build ctxfault

package ctxd

import (
	"os"
	"strings"
)

// faultHook (test builds only, -tags ctxfault) panics at the points named in
// CTX_FAULT (comma-separated), e.g. CTX_FAULT=run.tool_call, once per point
// per process when the name ends in "!once".
func faultHook() func(string) {
	spec := os.Getenv("CTX_FAULT")
	if spec == "" {
		return nil
	}
	points := map[string]bool{}
	for _, p := range strings.Split(spec, ",") {
		points[p] = true
	}
	return func(point string) {
		if points[point] {
			panic("injected fault at " + point)
		}
	}
}
