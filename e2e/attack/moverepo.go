package main

import (
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// hookrace: from a sandbox started while a repository moves (on the
// host, or by a tool: mv), plant a hook in it under each NAME it may
// have (DIR/NAME/.git/hooks), trying for up to MS milliseconds. Prints
// planted:NAME=ok for a hook written (a wall broken) and tries=N.
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
				// No directory made: a directory a sandbox's mount made
				// (sub/.git with nothing in it) is no repository.
				if os.WriteFile(p, []byte("#!/bin/sh\ntouch "+args[1]+"\n"), 0o755) == nil {
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

// mv: rename FROM to TO (making TO's parent first), as a tool may.
// Prints mv=ok or the error.
//
//	mv FROM TO
func init() {
	register("mv", func(args []string) int {
		if len(args) != 2 {
			say("error", "usage: mv FROM TO")
			return 2
		}
		err := os.MkdirAll(filepath.Dir(args[1]), 0o755)
		if err == nil {
			err = os.Rename(args[0], args[1])
		}
		say("mv", result(err))
		return 0
	})
}
