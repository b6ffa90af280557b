// Package killtree is the one way ctx ends a process and everything it
// started: the descendants read from /proc (a setsid grandchild leaves the
// process group, not the tree), the process group, the process itself; and
// a group's SIGTERM → grace → SIGKILL escalation (X12). It imports only the
// standard library, so the in-sandbox tools use it as the daemon does.
package killtree

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxTree bounds how many descendants one walk collects.
const maxTree = 4096

// Descendants lists the pids below pid (children first), read from
// /proc/<pid>/task/<tid>/children, or from every process's stat on a
// kernel without those files (CONFIG_PROC_CHILDREN unset).
func Descendants(pid int) []int {
	var kids map[int][]int // by parent, from stat, where the children files are missing
	if noChildrenFiles(pid) {
		kids = parents()
	}
	var out []int
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 && len(out) < maxTree {
		cur := queue[0]
		queue = queue[1:]
		cs := kids[cur]
		if kids == nil {
			cs = childrenFiles(cur)
		}
		for _, c := range cs {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// Children lists pid's children (from every thread: a Go process forks
// from any of its threads), as Descendants reads them.
func Children(pid int) []int {
	if noChildrenFiles(pid) {
		return parents()[pid]
	}
	return childrenFiles(pid)
}

// noChildrenFiles: pid lives but the kernel keeps no children files.
func noChildrenFiles(pid int) bool {
	p := "/proc/" + strconv.Itoa(pid)
	if _, err := os.Stat(p + "/task/" + strconv.Itoa(pid) + "/children"); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// childrenFiles reads pid's children from each thread's children file.
func childrenFiles(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue // a thread that ended meanwhile
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// parents maps each parent to its children, read from every process's
// /proc/<pid>/stat in one pass.
func parents() map[int][]int {
	ents, _ := os.ReadDir("/proc")
	kids := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold anything but its last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			kids[pp] = append(kids[pp], p)
		}
	}
	return kids
}

// Signal sends sig to every descendant of pid (not to pid itself).
func Signal(pid int, sig syscall.Signal) {
	for _, d := range Descendants(pid) {
		_ = syscall.Kill(d, sig)
	}
}

// Kill SIGKILLs pid's whole tree: every descendant first (so none is
// reparented and missed), then pid's process group, then pid. The caller
// must know pid is still its own (not yet reaped): a reaped pid may belong
// to someone else.
func Kill(pid int) {
	Signal(pid, syscall.SIGKILL)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// GroupAlive reports whether the process group pgid has a process left
// that is not a zombie (a zombie is its reaper's to collect; it runs
// nothing).
func GroupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc to tell zombies: trust kill
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// "pid (comm) S ppid pgrp …"; comm may hold spaces and parentheses
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pg, err := strconv.Atoi(f[2]); err == nil && pg == pgid {
			return true
		}
	}
	return false
}

// TermGroup sends SIGTERM to the group pgid, then SIGKILL after grace when
// some of it is still there. It blocks up to grace. spec: X12
func TermGroup(pgid int, grace time.Duration) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // no such group: nothing left
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if !GroupAlive(pgid) {
			return
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
