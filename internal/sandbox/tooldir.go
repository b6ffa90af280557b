package sandbox

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/policy"
)

// A tool directory's listing — its tools, each tool's policy and the
// lstat of the tool and of its <name>.d/ — is what every view with tools
// reads, three syscalls a tool (+0.9 ms of daemon CPU a call with 100
// tools, docs/performance.md). It is kept between views while an inotify
// watch says nothing of it changed: a watch on the directory (a tool or
// a .d/ made, removed, renamed, written or chmod'ed), on each <name>.d/ (a
// policy or any other file of it made, removed, renamed, written) and on
// each policy file's inode (written through another hard link). Every
// watch is added before what it watches is read, so a change made while
// the listing is read shows as an event at the next use, and the events
// are read (without blocking) before every use: a change whose syscall
// returned before a view asks is in that view. What inotify cannot see —
// a mount over a file, a write through a shared mapping — is seen at the
// latest after dirMaxAge, when the listing is read again anyway. A
// directory holding a <name>.d/ that is a symlink (read through, so its
// target is out of the watches' sight) or that cannot be watched (the
// watch limit) is read for every view, as without the cache.

// dirMaxAge bounds how long a watched listing is used before it is read
// again whatever the watches say.
const dirMaxAge = 2 * time.Second

// dirMaxTools bounds the tools of a watched directory (two watches each).
const dirMaxTools = 4096

// dirsKept bounds the directories kept, each with an inotify instance (a
// per-user limit, 128 by default, shared with every other program of the
// user): a daemon's CTX_PATH shows two.
const dirsKept = 8

const (
	watchDir  = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	watchFile = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW
)

// dirTool is one tool of a listing, before any verdict: its policy as
// loaded (tp, terr) and the lstat of the tool and of its .d/ (quickKey).
type dirTool struct {
	name    string
	tp      *policy.Policy
	terr    error
	st, dst unix.Stat_t
	sterr   error
	derr    error
}

// toolDir is the kept listing of one tool directory.
type toolDir struct {
	mu       sync.Mutex
	fd       int // the inotify instance of the kept listing; -1: none
	dev, ino uint64
	evicted  bool // no longer in toolDirs: its listing is never kept
	at       time.Time
	tools    []dirTool
}

var toolDirs = struct {
	mu sync.Mutex
	m  map[string]*toolDir
}{m: map[string]*toolDir{}}

// readToolDir returns the tools of the directory host, kept or read now.
// The slice is shared: callers only read it.
func readToolDir(host string) ([]dirTool, error) {
	toolDirs.mu.Lock()
	d := toolDirs.m[host]
	if d == nil {
		if len(toolDirs.m) >= dirsKept { // a cache, not a record
			for _, old := range toolDirs.m {
				old.mu.Lock()
				old.drop()
				old.evicted = true // a view holding it still reads, but keeps nothing
				old.mu.Unlock()
			}
			clear(toolDirs.m)
		}
		d = &toolDir{fd: -1}
		toolDirs.m[host] = d
	}
	toolDirs.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fresh(host) {
		return d.tools, nil
	}
	return d.read(host)
}

// fresh reports whether the kept listing may be used: read less than
// dirMaxAge ago, the same directory at host, and no event since.
func (d *toolDir) fresh(host string) bool {
	if d.fd < 0 || time.Since(d.at) > dirMaxAge {
		return false
	}
	var st unix.Stat_t // followed, as the listing's open follows host
	if err := unix.Stat(host, &st); err != nil || st.Dev != d.dev || st.Ino != d.ino {
		return false
	}
	var buf [unix.SizeofInotifyEvent + unix.NAME_MAX + 1]byte
	for {
		_, err := unix.Read(d.fd, buf[:])
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return true // nothing happened since the listing was read
		default: // an event, an overflow or an error: read it all again
			return false
		}
	}
}

// drop forgets the kept listing and its watches.
func (d *toolDir) drop() {
	if d.fd >= 0 {
		_ = unix.Close(d.fd)
	}
	d.fd, d.tools = -1, nil
}

// read lists host (listTools' reads), watching what it reads when it can,
// and keeps the listing when every part of it is watched.
func (d *toolDir) read(host string) ([]dirTool, error) {
	d.drop()
	start := time.Now()
	dir, err := os.Open(host)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	dfd := int(dir.Fd())
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		return nil, err
	}
	in, ierr := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	watched := ierr == nil
	watch := func(rel string, mask uint32) {
		if !watched {
			return
		}
		// Through the descriptor: the directory that is read is the one
		// watched, whatever its path names meanwhile.
		p := "/proc/self/fd/" + strconv.Itoa(dfd)
		if rel != "" {
			p += "/" + rel
		}
		if _, err := unix.InotifyAddWatch(in, p, mask); err != nil && !(rel != "" && errors.Is(err, unix.ENOENT)) {
			watched = false // ENOENT: nothing there yet; the directory's watch sees it made
		}
	}
	watch("", watchDir&^unix.IN_DONT_FOLLOW) // the descriptor's magic link is followed to the directory
	ents, err := dir.ReadDir(-1)
	if err != nil {
		if ierr == nil {
			_ = unix.Close(in)
		}
		return nil, err
	}
	// In name order, as os.ReadDir gives them: the view's binds and the
	// tree's key do not depend on the directory's hash order.
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var tools []dirTool
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".d") || layout.CheckName("tool", name) != nil || !e.Type().IsRegular() {
			continue
		}
		if len(tools) == dirMaxTools {
			watched = false // no more watches spent on a listing not kept
		}
		t := dirTool{name: name}
		t.derr = fstatat(dfd, name+".d", &t.dst)
		switch {
		case t.derr == nil && t.dst.Mode&unix.S_IFMT == unix.S_IFDIR:
			watch(name+".d", watchDir)
		case t.derr == nil && t.dst.Mode&unix.S_IFMT == unix.S_IFLNK:
			watched = false // read through: its target is not watched
		}
		if t.derr != unix.ENOENT {
			// A tool's policy is read only when its .d/ exists:
			// <name>.d/policy below a missing .d/ is absent all the same.
			rel := name + ".d/policy"
			watch(rel, watchFile)
			t.tp, t.terr = policy.LoadAt(policy.ToolPolicy, dfd, rel, host+"/"+rel)
		}
		t.sterr = fstatat(dfd, name, &t.st)
		tools = append(tools, t)
	}
	if d.evicted {
		watched = false
	}
	if ierr == nil && !watched {
		_ = unix.Close(in)
	}
	if watched {
		d.fd, d.dev, d.ino, d.at, d.tools = in, dst.Dev, dst.Ino, start, tools
	}
	return tools, nil
}
