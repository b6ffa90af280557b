package main

import (
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ctty KEY: a tool started from the persistent terminal looks for a
// controlling terminal (README "The walls": a tool that is not interactive
// runs in a new session without one). It prints KEY_NR= (tty_nr of
// /proc/self/stat, 0 without a controlling terminal), KEY_DEVTTY= (opening
// /dev/tty: refused:… without one), KEY_LEADER= (whether it leads its
// session) and KEY_FG= (whether stdin's terminal, if any, would take its
// input: tcgetpgrp equals its process group).
func init() {
	register("ctty", func(args []string) int {
		if len(args) != 1 {
			say("error", "usage: ctty KEY")
			return 2
		}
		key := args[0]
		nr := "?"
		if b, err := os.ReadFile("/proc/self/stat"); err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i >= 0 {
				// after "pid (comm)": state ppid pgrp session tty_nr …
				if f := strings.Fields(s[i+1:]); len(f) > 4 {
					nr = f[4]
				}
			}
		}
		say(key+"_NR", nr)
		if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			say(key+"_DEVTTY", "refused:"+errText(err))
		} else {
			f.Close()
			say(key+"_DEVTTY", "opened")
		}
		sid, _ := unix.Getsid(0)
		say(key+"_LEADER", sid == os.Getpid())
		fg := "no-terminal"
		if pg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil {
			fg = "other-group"
			if pg == syscall.Getpgrp() {
				fg = "foreground"
			}
		}
		say(key+"_FG", fg)
		return 0
	})
}
