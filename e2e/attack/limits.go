package main

import (
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// forkbomb MARKER MAX HOLD: fork until fork fails (or MAX
// children, so a failing test stays survivable), each child waiting
// forever; report how many it got, hold them for HOLD, then exit.
func init() {
	register("forkbomb", func(args []string) int {
		if len(args) != 3 {
			say("error", "usage: forkbomb MARKER MAX HOLD")
			return 2
		}
		limit, _ := strconv.Atoi(args[1])
		hold, _ := time.ParseDuration(args[2])
		// The runtime must not need a new thread once forks fail.
		runtime.GOMAXPROCS(1)
		runtime.GC()
		n := 0
		var ferr syscall.Errno
		for n < limit {
			// A raw fork: the child runs nothing but a wait (no Go runtime).
			pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
			if e != 0 {
				ferr = e
				break
			}
			if pid == 0 {
				for {
					syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
				}
			}
			n++
		}
		say("forks", n)
		say("fork_error", errText(errOrNil(ferr)))
		time.Sleep(hold)
		return 0
	})
}

func errOrNil(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// membomb MIB: map MIB MiB and touch every page; report
// how far it got (an OOM kill ends it before the report).
func init() {
	register("membomb", func(args []string) int {
		mib, err := strconv.Atoi(args[0])
		if err != nil {
			say("error", "usage: membomb MIB")
			return 2
		}
		b, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			say("mmap_error", err)
			return 1
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		say("touched_mib", mib)
		return 0
	})
}

// orphan MARKER HOLD: leave a detached grandchild
// (double fork, setsid, SIGTERM ignored, MARKER in its argv), then sleep
// HOLD as a long tool would.
func init() {
	register("orphan", func(args []string) int {
		mid := exec.Command(self(), "orphan-mid", args[0])
		out, err := mid.Output()
		if err != nil {
			say("error", err)
			return 1
		}
		say("grandchild", string(out))
		hold, _ := time.ParseDuration(args[1])
		time.Sleep(hold)
		return 0
	})
	register("orphan-mid", func(args []string) int {
		gc := exec.Command(self(), "linger", args[0])
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			return 1
		}
		os.Stdout.WriteString(strconv.Itoa(gc.Process.Pid))
		return 0 // the grandchild is reparented to PID 1
	})
	register("linger", func(args []string) int {
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
		for {
			time.Sleep(time.Hour)
		}
	})
}

func self() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return os.Args[0]
}
