package main

import (
	"os"
	"strconv"
	"time"
)

// fill: the disk has a reserve — write PATH in CHUNK_KB pieces with a
// pause of PAUSE_MS between them, up to TOTAL_MB or the first error, as a
// build or a download filling the agent home would. Prints written=BYTES
// and error=... when a write failed (it is normally killed before).
//
//	fill PATH TOTAL_MB CHUNK_KB PAUSE_MS
//
// fill-unlinked does the same after deleting PATH, holding it open: the
// space is used, but no directory shows the file.
func init() {
	register("fill", func(args []string) int { return fill(args, false) })
	register("fill-unlinked", func(args []string) int { return fill(args, true) })
}

func fill(args []string, unlink bool) int {
	if len(args) != 4 {
		say("error", "usage: fill PATH TOTAL_MB CHUNK_KB PAUSE_MS")
		return 2
	}
	var n [3]int
	for i, a := range args[1:] {
		v, err := strconv.Atoi(a)
		if err != nil || v < 0 {
			say("error", "bad number "+a)
			return 2
		}
		n[i] = v
	}
	f, err := os.Create(args[0])
	if err != nil {
		say("error", err)
		return 1
	}
	defer f.Close()
	if unlink {
		if err := os.Remove(args[0]); err != nil {
			say("error", err)
			return 1
		}
	}
	buf := make([]byte, n[1]<<10)
	for i := range buf {
		buf[i] = byte(i) | 1 // not sparse, not all zeroes
	}
	written := 0
	for written < n[0]<<20 {
		k, err := f.Write(buf)
		written += k
		if err != nil {
			say("written", written)
			say("error", err)
			return 1
		}
		time.Sleep(time.Duration(n[2]) * time.Millisecond)
	}
	say("written", written)
	return 0
}
