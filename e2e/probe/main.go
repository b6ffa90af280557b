// Command probe is a tool the e2e tests run inside the sandbox: it reports
// what it can see and do, one KEY=VALUE line each.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"unsafe"
)

func main() {
	env := os.Environ()
	sort.Strings(env)
	for _, e := range env {
		fmt.Println("env", e)
	}
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
			n++
		}
	}
	fmt.Printf("procs=%d\n", n)
	// TIOCSTI into the controlling terminal.
	tiocsti := "ok"
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
		tiocsti = "no-tty:" + err.Error()
	} else {
		c := byte('x')
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCSTI, uintptr(unsafe.Pointer(&c))); e != 0 {
			tiocsti = "refused:" + e.Error()
		}
	}
	fmt.Printf("tiocsti=%s\n", tiocsti)
	if len(os.Args) > 1 && os.Args[1] == "kill" {
		signal.Ignore(syscall.SIGTERM) // kill(0) signals our own group, us included
		fmt.Printf("kill-1=%v\n", syscall.Kill(-1, syscall.SIGKILL))
		fmt.Printf("kill0=%v\n", syscall.Kill(0, syscall.SIGTERM) == nil)
	}
	b, _ := os.ReadFile("/proc/1/cmdline")
	fmt.Printf("pid1=%s\n", strings.ReplaceAll(string(b), "\x00", " "))
	_, err := os.Stat("/ctx/home")
	fmt.Printf("secrets-visible=%v\n", fileExists("/ctx/home/"+fmt.Sprint(os.Getuid())+"/secrets"))
	_ = err
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
