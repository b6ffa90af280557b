package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A tool tree is one prepared directory holding exactly the tools a view
// shows from one tool directory: a hard link of each allowed tool and a
// copy of its <name>.d/ made of hard links (directories made, symlinks
// made again, nothing else). The view binds it read-only in one mount,
// where it would otherwise take a tmpfs, two binds per tool and a
// read-only remount: bwrap reads /proc/self/mountinfo again for every
// mount, so a call's cost grew with each tool installed (60 mounts for
// a view of the standard toolset; +100 tools cost +98 ms a call).
//
// Trees live in the tool directory itself (hard links need the same
// filesystem), under .views/, a dot name no tool listing shows. A tree
// is named by a hash of what it holds — every name with its file's
// identity (device, inode, mode, size, mtime, owner), every symlink's
// target — so a tool installed again, a .d/ changed or another policy
// verdict makes another tree, and an existing tree is never written: it
// is made beside, checked, and renamed into place. Trees unused for a day,
// or past the newest treesKept, are removed when a new one is made: only
// views that live one call use trees (CallTools), never a terminal's
// shell, so no live view loses its tools to the pruning.

const (
	treesDir  = ".views"
	treesKept = 256
	treeAge   = 24 * time.Hour
	// treeTouch: a tree in use has its mtime set again at most this often
	// (its age is what pruning reads), not on every call.
	treeTouch = time.Hour
	// treeMax bounds the entries of one tree (the tools and their .d/
	// contents); a tool directory past it is shown bind by bind.
	treeMax = 4096
)

// errTreeTooBig: the tools and their .d/ contents are past treeMax.
var errTreeTooBig = errors.New("tool tree: too many entries")

type treeEntry struct {
	rel    string
	mode   fs.FileMode
	id     string // the identity that names the tree
	ino    uint64
	target string // a symlink's
}

// toolTree returns the tree of host showing names (each a regular file in
// host, allowed by policy), making it when it does not exist yet.
//
// Naming a tree reads every entry of every <name>.d/; a view reuses the
// tree found for the same quick key (each name's file and its .d/
// directory: identity and mtime) for treeRecheck before reading them all
// again, so a call pays one lstat per tool and per .d/. What the quick key
// sees (a tool or its .d/ replaced, a file made, removed or renamed in the
// .d/ itself — its tool.json, its policy) makes another tree at once; a
// change deeper inside a .d/ shows within treeRecheck.
func toolTree(host string, names []string, qk string, qerr error) (string, error) {
	if qerr == nil {
		if dir, ok := treeCache.get(qk); ok {
			return dir, nil
		}
	}
	dir, err := makeTree(host, names)
	if err == nil && qerr == nil {
		treeCache.put(qk, dir)
	}
	return dir, err
}

// treeRecheck is how long a quick key's tree is reused without reading
// every entry of the .d/ directories again.
const treeRecheck = 2 * time.Second

// treeCache maps quick keys to the tree last made or found for them.
var treeCache = &quickTrees{m: map[string]quickTree{}}

type quickTrees struct {
	mu sync.Mutex
	m  map[string]quickTree
}

type quickTree struct {
	dir string
	at  time.Time
}

func (q *quickTrees) get(k string) (string, bool) {
	q.mu.Lock()
	t, ok := q.m[k]
	q.mu.Unlock()
	if !ok || time.Since(t.at) > treeRecheck {
		return "", false
	}
	if st, err := os.Lstat(t.dir); err != nil || !st.IsDir() {
		return "", false // pruned meanwhile
	}
	return t.dir, true
}

func (q *quickTrees) put(k, dir string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.m) >= 1024 {
		clear(q.m) // a cache, not a record: start again
	}
	q.m[k] = quickTree{dir, time.Now()}
}

// quickKey names what a tree holds as far as one lstat of each tool and
// of its .d/ tells (listTools takes them, in the names' order).
type quickKey struct {
	h   hash.Hash
	buf []byte
}

func newQuickKey(host string) *quickKey {
	k := &quickKey{h: sha256.New()}
	k.buf = strconv.AppendQuote(k.buf[:0], host)
	k.h.Write(append(k.buf, '\n'))
	return k
}

// add records rel's lstat (st, err): absent (ENOENT) is a key too; any
// other error means no key.
func (k *quickKey) add(rel string, st *unix.Stat_t, err error) error {
	b := strconv.AppendQuote(k.buf[:0], rel)
	switch {
	case err == nil:
		for i, v := range []uint64{uint64(st.Mode), st.Dev, st.Ino, uint64(st.Size), uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec), uint64(st.Uid), uint64(st.Gid)} {
			b = append(b, "  :::.::"[i])
			b = strconv.AppendUint(b, v, 10)
		}
	case errors.Is(err, unix.ENOENT):
		b = append(b, " -"...)
	default:
		return err
	}
	k.buf = append(b, '\n')
	k.h.Write(k.buf)
	return nil
}

func (k *quickKey) sum() string { return string(k.h.Sum(nil)) }

// makeTree names the tree of names by everything it holds and returns it,
// made now when it does not exist yet.
func makeTree(host string, names []string) (string, error) {
	ents, err := scanTree(host, names)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range ents {
		fmt.Fprintf(h, "%q %o %s %q\n", e.rel, e.mode, e.id, e.target)
	}
	root := filepath.Join(host, treesDir)
	dir := filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:32])
	if st, err := os.Lstat(dir); err == nil && st.IsDir() {
		if time.Since(st.ModTime()) > treeTouch {
			now := time.Now()
			_ = os.Chtimes(dir, now, now)
		}
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("tool tree: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".new-")
	if err != nil {
		return "", fmt.Errorf("tool tree: %w", err)
	}
	if err := fillTree(host, tmp, ents); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if st, serr := os.Lstat(dir); serr == nil && st.IsDir() {
			return dir, nil // made meanwhile by another view
		}
		return "", fmt.Errorf("tool tree: %w", err)
	}
	pruneTrees(root, filepath.Base(dir))
	return dir, nil
}

// scanTree lists what the tree of names holds, in a fixed order.
func scanTree(host string, names []string) ([]treeEntry, error) {
	names = append([]string(nil), names...)
	sort.Strings(names)
	var ents []treeEntry
	add := func(rel string) (fs.FileInfo, error) {
		st, err := os.Lstat(filepath.Join(host, rel))
		if err != nil {
			return nil, err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, fmt.Errorf("tool tree: %s: no identity", rel)
		}
		e := treeEntry{rel: rel, mode: st.Mode(), ino: sys.Ino,
			// Not the ctime: linking the file into a tree changes it.
			id: fmt.Sprintf("%d:%d:%d:%d.%d:%d:%d", sys.Dev, sys.Ino, sys.Size, sys.Mtim.Sec, sys.Mtim.Nsec, sys.Uid, sys.Gid)}
		switch {
		case st.Mode().IsRegular(), st.IsDir():
		case st.Mode()&fs.ModeSymlink != 0:
			if e.target, err = os.Readlink(filepath.Join(host, rel)); err != nil {
				return nil, err
			}
		default:
			return st, nil // a FIFO, a socket, a device: never shown
		}
		if len(ents) >= treeMax {
			return nil, errTreeTooBig
		}
		ents = append(ents, e)
		return st, nil
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		des, err := os.ReadDir(filepath.Join(host, rel))
		if err != nil {
			return err
		}
		for _, de := range des {
			r := rel + "/" + de.Name()
			st, err := add(r)
			if err != nil {
				return err
			}
			if st.IsDir() {
				if err := walk(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, n := range names {
		st, err := add(n)
		if err != nil {
			return nil, fmt.Errorf("tool tree: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("tool tree: %s is not a regular file", n)
		}
		if st, err := os.Lstat(filepath.Join(host, n+".d")); err == nil && st.IsDir() {
			if _, err := add(n + ".d"); err != nil {
				return nil, fmt.Errorf("tool tree: %w", err)
			}
			if err := walk(n + ".d"); err != nil {
				return nil, fmt.Errorf("tool tree: %w", err)
			}
		}
	}
	return ents, nil
}

// fillTree makes ents in the new tree dir, then checks that every link
// is the file the tree is named after (one replaced meanwhile fails it).
func fillTree(host, dir string, ents []treeEntry) error {
	for _, e := range ents {
		src, dst := filepath.Join(host, e.rel), filepath.Join(dir, e.rel)
		var err error
		switch {
		case e.mode.IsDir():
			err = os.Mkdir(dst, e.mode.Perm())
		case e.mode&fs.ModeSymlink != 0:
			err = os.Symlink(e.target, dst)
		default:
			if err = os.Link(src, dst); err == nil {
				var st syscall.Stat_t
				if err = syscall.Lstat(dst, &st); err == nil && st.Ino != e.ino {
					err = fmt.Errorf("%s changed while its tree was made", e.rel)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("tool tree: %w", err)
		}
	}
	// The directories' modes exactly (Mkdir applies the umask).
	for _, e := range ents {
		if e.mode.IsDir() {
			if err := os.Chmod(filepath.Join(dir, e.rel), e.mode.Perm()); err != nil {
				return fmt.Errorf("tool tree: %w", err)
			}
		}
	}
	return os.Chmod(dir, 0o755)
}

// pruneTrees removes the trees of root unused for treeAge and, past
// treesKept, the oldest, never keep (the one just made); and what a
// crashed maker left (.new-*) after treeAge.
func pruneTrees(root, keep string) {
	des, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type tree struct {
		name string
		mod  time.Time
	}
	var trees []tree
	for _, de := range des {
		if de.Name() == keep || !de.IsDir() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		if time.Since(info.ModTime()) > treeAge {
			os.RemoveAll(filepath.Join(root, de.Name()))
			continue
		}
		if !strings.HasPrefix(de.Name(), ".") {
			trees = append(trees, tree{de.Name(), info.ModTime()})
		}
	}
	sort.Slice(trees, func(i, j int) bool { return trees[i].mod.After(trees[j].mod) })
	for i := treesKept - 1; i < len(trees); i++ {
		os.RemoveAll(filepath.Join(root, trees[i].name))
	}
}
