package main

import (
	"os"
	"path/filepath"
	"strconv"
)

// plant: protection must fail closed — make N directories below DIR, each
// holding an empty .envrc (a protected name), so that the host's
// protected-path walk meets more paths than its bound before it reaches
// a nested repository further down. Prints planted=N or the error.
//
//	plant N DIR
func init() {
	register("plant", func(args []string) int {
		if len(args) != 2 {
			say("error", "usage: plant N DIR")
			return 2
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			say("error", err)
			return 2
		}
		for i := 0; i < n; i++ {
			d := filepath.Join(args[1], "plant"+strconv.Itoa(i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				say("planted", err)
				return 1
			}
			if err := os.WriteFile(filepath.Join(d, ".envrc"), nil, 0o644); err != nil {
				say("planted", err)
				return 1
			}
		}
		say("planted", n)
		return 0
	})
}
