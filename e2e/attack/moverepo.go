package main

import (
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// swap: move a directory holding a repository away and back, over and
// over, while other sandboxes of the workspace start — so that the host's
// protected-path walk finds DIR/A/.git under one name and bwrap mounts
// its protection under a name that by then is the other (or a directory
// the mount made). It holds each name for HOLD microseconds, for SECONDS,
// creating READY once it began. A directory a sandbox's mount made in
// the way (bwrap makes a missing mount point) is removed, so the race
// goes on. Prints swaps=N, cleared=N (directories removed so) and, if a
// rename still failed, stuck=the error.
//
//	swap DIR A B HOLD SECONDS READY
func init() {
	register("swap", func(args []string) int {
		if len(args) != 6 {
			say("error", "usage: swap DIR A B HOLD SECONDS READY")
			return 2
		}
		hold, err1 := strconv.Atoi(args[3])
		secs, err2 := strconv.Atoi(args[4])
		if err1 != nil || err2 != nil {
			say("error", "bad HOLD or SECONDS")
			return 2
		}
		a, b := filepath.Join(args[0], args[1]), filepath.Join(args[0], args[2])
		os.WriteFile(args[5], nil, 0o644)
		n, cleared := 0, 0
		// move renames from to to; a directory in the way that holds no
		// repository (one a sandbox's mount made) is removed first.
		move := func(from, to string) bool {
			for range 3 {
				err := os.Rename(from, to)
				if err == nil {
					return true
				}
				if _, herr := os.Stat(filepath.Join(to, ".git", "HEAD")); herr == nil || os.RemoveAll(to) != nil {
					say("stuck", result(err))
					return false
				}
				cleared++
			}
			return false
		}
		for end := time.Now().Add(time.Duration(secs) * time.Second); time.Now().Before(end); {
			if !move(a, b) {
				break
			}
			time.Sleep(time.Duration(hold) * time.Microsecond)
			if !move(b, a) {
				break
			}
			n++
			time.Sleep(time.Duration(hold) * time.Microsecond)
		}
		say("cleared", cleared)
		say("swaps", n)
		return 0
	})
}

// hookrace: from a sandbox started while swap runs, plant a hook in the
// moving repository under each NAME it may have (DIR/NAME/.git/hooks),
// trying for up to MS milliseconds. Prints planted:NAME=ok for a hook
// written (a wall broken) and tries=N.
//
//	hookrace DIR MARKER MS NAME...
func init() {
	register("hookrace", func(args []string) int {
		if len(args) < 4 {
			say("error", "usage: hookrace DIR MARKER MS NAME...")
			return 2
		}
		ms, err := strconv.Atoi(args[2])
		if err != nil {
			say("error", "bad MS")
			return 2
		}
		tries := 0
		for end := time.Now().Add(time.Duration(ms) * time.Millisecond); time.Now().Before(end); tries++ {
			for _, n := range args[3:] {
				p := filepath.Join(args[0], n, ".git", "hooks", "post-checkout")
				if write(p, "#!/bin/sh\ntouch "+args[1]+"\n", 0o755) == nil {
					say("planted:"+n, "ok")
					say("tries", tries)
					return 0
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
		say("tries", tries)
		return 0
	})
}
