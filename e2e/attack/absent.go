package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// absent: what an absent protected name at the workspace's top looks like
// from inside a run, and every route to create it. Arguments:
//
//	absent DIR READY GO NAME...
//
// DIR is the workspace as the sandbox sees it; NAME is a directory name
// when it ends in "/" (.claude/), else a file name. Each result is one
// line OP:NAME=VALUE: for reads the errno name (ENOENT, EACCES, …) or
// "empty" / "content:" and its first 64 bytes; for creation routes "ok" or the errno name. Then
// it creates READY (in the agent's home) and waits up to 60 s for GO, so
// the host can look at the workspace while the run is alive.
func init() {
	register("absent", func(args []string) int {
		if len(args) < 3 {
			say("error", "usage: absent DIR READY GO NAME...")
			return 2
		}
		dir, ready, gofile := args[0], args[1], args[2]
		for _, n := range args[3:] {
			isDir := strings.HasSuffix(n, "/")
			n = strings.TrimSuffix(n, "/")
			p := filepath.Join(dir, n)
			if isDir {
				absentDir(p, n)
			} else {
				absentFile(p, n)
			}
		}
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			say("ready", result(err))
			return 1
		}
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(gofile); err == nil {
				return 0
			}
		}
		say("go", "timeout")
		return 1
	})
}

// errno names the errno in err ("ok" for nil).
func errno(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		for _, k := range []syscall.Errno{syscall.ENOENT, syscall.EACCES, syscall.EROFS, syscall.EEXIST, syscall.EBUSY,
			syscall.EISDIR, syscall.ENOTDIR, syscall.EPERM, syscall.ENOTEMPTY, syscall.EXDEV, syscall.ENXIO, syscall.ELOOP} {
			if e == k {
				return map[syscall.Errno]string{syscall.ENOENT: "ENOENT", syscall.EACCES: "EACCES", syscall.EROFS: "EROFS",
					syscall.EEXIST: "EEXIST", syscall.EBUSY: "EBUSY", syscall.EISDIR: "EISDIR", syscall.ENOTDIR: "ENOTDIR",
					syscall.EPERM: "EPERM", syscall.ENOTEMPTY: "ENOTEMPTY", syscall.EXDEV: "EXDEV", syscall.ENXIO: "ENXIO",
					syscall.ELOOP: "ELOOP"}[k]
			}
		}
	}
	return err.Error()
}

// readOf reads p without blocking (a FIFO would otherwise wait for a writer).
func readOf(p string) string {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return errno(err)
	}
	defer f.Close()
	b := make([]byte, 64)
	n, err := f.Read(b)
	switch {
	case n > 0:
		return "content:" + strings.TrimSpace(string(b[:n]))
	case err != nil && !errors.Is(err, io.EOF):
		return errno(err)
	}
	return "empty"
}

// creation routes at p: each must fail for an absent protected name.
func create(p, n string, isDir bool) {
	scratch := filepath.Join(filepath.Dir(p), ".absent-scratch-"+strings.TrimPrefix(n, "."))
	os.RemoveAll(scratch)
	if isDir {
		os.Mkdir(scratch, 0o755)
		os.WriteFile(filepath.Join(scratch, "settings.json"), []byte("{}"), 0o644)
	} else {
		os.WriteFile(scratch, []byte("planted\n"), 0o644)
	}
	defer os.RemoveAll(scratch)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o644)
	if err == nil {
		_, err = f.WriteString("planted\n")
		f.Close()
	}
	say("create:"+n, errno(err))
	say("mkdir:"+n, errno(os.Mkdir(p, 0o755)))
	say("rename:"+n, errno(os.Rename(scratch, p)))
	say("symlink:"+n, errno(os.Symlink(scratch, p)))
	if !isDir {
		say("link:"+n, errno(os.Link(scratch, p)))
	}
	say("mkfifo:"+n, errno(syscall.Mkfifo(p, 0o644)))
	say("remove:"+n, errno(os.Remove(p)))
	say("chmod:"+n, errno(os.Chmod(p, 0o777)))
}

// absentDir: nothing below a directory name exists or can be made.
func absentDir(p, n string) {
	_, err := os.Stat(filepath.Join(p, "settings.json"))
	say("stat:"+n+"/settings.json", errno(err))
	say("read:"+n+"/settings.json", readOf(filepath.Join(p, "settings.json")))
	ents, err := os.ReadDir(p)
	if err != nil {
		say("list:"+n, errno(err))
	} else {
		say("list:"+n, len(ents))
	}
	say("write:"+n+"/settings.json", errno(os.WriteFile(filepath.Join(p, "settings.json"), []byte("{}"), 0o644)))
	say("mkdir:"+n+"/sub", errno(os.Mkdir(filepath.Join(p, "sub"), 0o755)))
	create(p, n, true)
}

// absentFile: a file name reads as empty (or absent) and cannot be made.
func absentFile(p, n string) {
	say("read:"+n, readOf(p))
	create(p, n, false)
}
