package main

import (
	"os"
	"syscall"
)

// preview-plant: the approval preview (docs/walls.md) — make, from inside the
// sandbox, what a person's client would trip over when it previews a
// write: a FIFO (opening it blocks until a writer comes) or a symlink
// naming a host path outside the workspace (the sandbox need not see it).
// Usage: attack preview-plant fifo PATH | attack preview-plant link TARGET PATH
func init() {
	register("preview-plant", func(args []string) int {
		if len(args) < 2 {
			say("error", "usage: preview-plant fifo PATH | preview-plant link TARGET PATH")
			return 2
		}
		switch {
		case args[0] == "fifo":
			say("fifo:"+args[1], result(syscall.Mkfifo(args[1], 0o644)))
		case args[0] == "link" && len(args) == 3:
			say("link:"+args[2], result(os.Symlink(args[1], args[2])))
		default:
			say("error", "bad plant "+args[0])
			return 2
		}
		return 0
	})
}
