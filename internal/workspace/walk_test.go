package workspace

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/safefs"

	"golang.org/x/sys/unix"
)

// TestWalkIsReference: the walk over getdents finds what the walk over
// File.ReadDir found (walkReference, kept here as it was), entry for entry
// and in the same order — nested and bare repositories, protected names of
// every kind, symlinks, FIFOs, the depth bound, skipped paths, grants —
// and on Go's own src. spec: B1
func TestWalkIsReference(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"r/.git/hooks", "bare/objects", "bare/refs", "nohead/objects", "nohead/refs", ".vscode/sub/.git",
		"a/b/c/d/e/f/g/h/i/.git", "a/b/c/d/e/f/g/.git", "hide/.git", "x/.claude", "x/.idea", ".codex"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	for _, f := range []string{"r/.git/HEAD", "bare/HEAD", "bare/config", ".envrc", "x/.mcp.json", "x/.bashrc", "wt/.git", "a/b/plain"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644)
	}
	os.MkdirAll(filepath.Join(ws, "linked"), 0o755)
	os.Symlink("r/.git", filepath.Join(ws, "linked/.git"))
	os.Symlink("/etc", filepath.Join(ws, ".zshrc"))
	os.Symlink("a", filepath.Join(ws, "dirlink"))
	syscall.Mkfifo(filepath.Join(ws, ".profile"), 0o600)
	d, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct{ grants, skip string }{
		{"", ""},
		{"writable .vscode\nwritable .envrc\n", ""},
		{"creatable .git\ncreatable .idea\n", "hide"},
		{"", "x/.claude"},
	} {
		g, err := ParseGrants([]byte(c.grants))
		if err != nil {
			t.Fatal(err)
		}
		var skip []string
		if c.skip != "" {
			skip = []string{c.skip}
		}
		got, want := Walk(d, g, skip), walkReference(d, g, skip)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("grants %q skip %q:\n walk      %+v\n reference %+v", c.grants, c.skip, got, want)
		}
		if len(want.Entries) < 10 {
			t.Errorf("grants %q: the fixture's paths were not found: %+v", c.grants, want)
		}
	}
	if src, err := os.Open(goSrc()); err == nil {
		defer src.Close()
		if got, want := Walk(src, Grants{}, nil), walkReference(src, Grants{}, nil); !reflect.DeepEqual(got, want) {
			t.Errorf("Go's src: walk %+v, reference %+v", got, want)
		}
	}
}

// walkReference is Walk as it was over File.ReadDir.
func walkReference(dir *os.File, g Grants, skip []string) Found {
	var out Found
	start := time.Now()
	entries := 0
	type item struct {
		fd    int
		rel   string
		depth int
	}
	top, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		out.Truncated = "cannot read the top directory: " + err.Error()
		return out
	}
	queue := []item{{top, "", 0}}
	defer func() {
		for _, it := range queue {
			unix.Close(it.fd)
		}
	}()
	add := func(e Entry) bool {
		if len(out.Entries) >= MaxProtected {
			out.Truncated = "more than " + strconv.Itoa(MaxProtected) + " protected paths"
			return false
		}
		out.Entries = append(out.Entries, e)
		return true
	}
	for len(queue) > 0 && out.Truncated == "" {
		it := queue[0]
		queue = queue[1:]
		f := os.NewFile(uintptr(it.fd), it.rel)
		dirID, _ := safefs.ID(f)
		ents, err := f.ReadDir(-1)
		names := map[string]os.FileMode{}
		for _, e := range ents {
			names[e.Name()] = e.Type()
		}
		entries += len(ents)
		if entries > MaxEntries {
			out.Truncated = "more than " + strconv.Itoa(MaxEntries) + " directory entries"
		} else if time.Since(start) > MaxWalk {
			out.Truncated = "the walk took longer than " + MaxWalk.String()
		}
		if err != nil && out.Truncated == "" {
			// An unreadable directory may hold a repository the sandbox's
			// owner can make readable again inside: unknown, so cut short.
			out.Truncated = "cannot read " + shown(it.rel) + ": " + err.Error()
		}
		if out.Truncated != "" {
			f.Close()
			continue
		}
		// A bare repository: HEAD, objects/ and refs/ side by side. Its
		// hooks/ and config are protected; nothing below is walked.
		if it.rel != "" && names["HEAD"].IsRegular() && names["objects"].IsDir() && names["refs"].IsDir() {
			out.Bare = append(out.Bare, it.rel)
			for _, n := range []string{"hooks", "config"} {
				k := kindOf(names, n)
				if k == KindAbsent && n == "config" {
					continue
				}
				if !add(Entry{Rel: path.Join(it.rel, n), Kind: k, Repo: true, Dir: dirID}) {
					break
				}
			}
			f.Close()
			continue
		}
		for _, e := range ents {
			n, rel := e.Name(), path.Join(it.rel, e.Name())
			if slices.Contains(skip, rel) {
				continue
			}
			if slices.Contains(Protected, n) && !g.Writable[n] {
				if !add(Entry{Rel: rel, Kind: kindOf(names, n), Repo: n == ".git", Dir: dirID}) {
					break
				}
				continue // protected whole: not walked
			}
			if e.IsDir() && it.depth < MaxDepth {
				fd, err := unix.Openat(it.fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
				switch {
				case err == nil:
					queue = append(queue, item{fd, rel, it.depth + 1})
				case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
					// Gone or replaced since it was listed: not a directory to walk.
				default:
					out.Truncated = "cannot read " + shown(rel) + ": " + err.Error()
				}
			}
		}
		if it.rel == "" {
			for _, n := range Protected {
				if _, ok := names[n]; !ok && !g.Writable[n] && !g.Creatable[n] {
					add(Entry{Rel: n, Kind: KindAbsent, Repo: n == ".git", Dir: dirID})
				}
			}
		}
		f.Close()
	}
	return out
}

func kindOf(names map[string]os.FileMode, n string) Kind {
	t, ok := names[n]
	switch {
	case !ok:
		return KindAbsent
	case t&os.ModeSymlink != 0:
		return KindSymlink
	case t.IsDir():
		return KindDir
	}
	return KindFile
}

// TestWalkListingsFollowChanges: a walk reuses the listings of the last
// walk only for directories whose stamp is unchanged, and finds what a
// fresh walk finds after every kind of change — made moments before the
// walk (within the racy window) or long enough before. spec: B1
func TestWalkListingsFollowChanges(t *testing.T) {
	ws := t.TempDir()
	mk := func(dirs ...string) {
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 40 {
		mk("src/p" + strconv.Itoa(i) + "/q/r")
	}
	mk("r/.git/hooks", "x/y/z")
	os.WriteFile(filepath.Join(ws, "r/.git/HEAD"), []byte("ref: x\n"), 0o644)
	d, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	check := func(step string) {
		t.Helper()
		got, want := Walk(d, Grants{}, nil), walkReference(d, Grants{}, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n walk      %+v\n reference %+v", step, got, want)
		}
	}
	settle := func() { time.Sleep(listingRacy + 50*time.Millisecond) }
	settle()
	check("first walk")
	n0 := listingsRead.Load()
	check("again, nothing changed")
	if n := listingsRead.Load() - n0; n != 0 {
		t.Errorf("a walk of an unchanged, settled tree read %d directories", n)
	}
	steps := []struct {
		name   string
		change func()
	}{
		{"a repository made deep down", func() {
			mk("src/p7/q/r/.git")
			os.WriteFile(filepath.Join(ws, "src/p7/q/r/.git/HEAD"), []byte("ref: x\n"), 0o644)
		}},
		{"a bare repository made", func() { mk("x/y/z/b.git/objects", "x/y/z/b.git/refs") }},
		{"a directory holding a repository renamed", func() { os.Rename(filepath.Join(ws, "src/p7"), filepath.Join(ws, "src/p7b")) }},
		{"a file replaced by a directory with a repository", func() {
			os.WriteFile(filepath.Join(ws, "src/p3/f"), []byte("x"), 0o644)
			settle()
			check("the file")
			os.Remove(filepath.Join(ws, "src/p3/f"))
			mk("src/p3/f/.git")
		}},
		{"a directory swapped for a symlink to a repository", func() {
			os.RemoveAll(filepath.Join(ws, "src/p9"))
			os.Symlink("../r", filepath.Join(ws, "src/p9"))
		}},
		{"a repository removed", func() { os.RemoveAll(filepath.Join(ws, "src/p7b/q/r/.git")) }},
		{"a protected name made at the top", func() { os.WriteFile(filepath.Join(ws, ".envrc"), nil, 0o644) }},
	}
	for _, s := range steps {
		s.change()
		check(s.name + " (walked at once)")
		settle()
		n0 := listingsRead.Load()
		check(s.name + " (walked later)")
		if n := listingsRead.Load() - n0; n > 6 {
			t.Errorf("%s: the walk after read %d directories, not only the changed ones", s.name, n)
		}
	}
}

// TestWalkListingsConcurrent: walks of one directory at once (runs
// starting together) share the cache safely and agree.
func TestWalkListingsConcurrent(t *testing.T) {
	ws := t.TempDir()
	for i := range 20 {
		os.MkdirAll(filepath.Join(ws, "d"+strconv.Itoa(i), ".git"), 0o755)
	}
	d, _ := os.Open(ws)
	defer d.Close()
	want := walkReference(d, Grants{}, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got := Walk(d, Grants{}, nil); !reflect.DeepEqual(got, want) {
					t.Errorf("a concurrent walk found %+v", got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestWalkIsASnapshot: while something moves a directory that holds a
// repository away and back in a loop (another sandbox of the workspace),
// no complete walk misses the repository: a walk that saw the tree change
// walks again, and one that keeps seeing it change is cut short (bound
// read-only). The walk over File.ReadDir missed it in a quarter of its
// walks. spec: B1
func TestWalkIsASnapshot(t *testing.T) {
	ws := t.TempDir()
	for i := range 300 {
		os.MkdirAll(filepath.Join(ws, "a", "b"+strconv.Itoa(i), "c"), 0o755)
		os.MkdirAll(filepath.Join(ws, "z", "y"+strconv.Itoa(i)), 0o755)
	}
	os.MkdirAll(filepath.Join(ws, "a/b150/c/.git"), 0o755)
	d, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "a2"))
			os.Rename(filepath.Join(ws, "a2"), filepath.Join(ws, "a"))
		}
	}()
	complete, cut := 0, 0
	for range 200 {
		f := Walk(d, Grants{}, nil)
		if f.Truncated != "" {
			cut++
			continue
		}
		complete++
		found := false
		for _, e := range f.Entries {
			if strings.HasSuffix(e.Rel, "/b150/c/.git") {
				found = true
			}
		}
		if !found {
			t.Errorf("a complete walk missed the repository: %+v", f.Entries)
			break
		}
	}
	stop.Store(true)
	<-done
	t.Logf("%d complete walks, %d cut short", complete, cut)
}

// TestWalkToleratesChurn: files made and removed all the time (a build
// writing its output) and protected names coming and going at the top
// (other runs' placeholders) change directories' stamps but nothing a
// walk finds: walks complete, and find the repository. spec: B1
func TestWalkToleratesChurn(t *testing.T) {
	ws := t.TempDir()
	for i := range 100 {
		os.MkdirAll(filepath.Join(ws, "src", "p"+strconv.Itoa(i)), 0o755)
	}
	os.MkdirAll(filepath.Join(ws, "src/p50/.git"), 0o755)
	d, err := os.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			f := filepath.Join(ws, "src/p"+strconv.Itoa(i%100), "out.tmp")
			os.WriteFile(f, nil, 0o644)
			os.Remove(f)
			syscall.Mkfifo(filepath.Join(ws, ".envrc"), 0)
			os.Remove(filepath.Join(ws, ".envrc"))
		}
	}()
	complete := 0
	for range 100 {
		f := Walk(d, Grants{}, nil)
		if f.Truncated != "" {
			continue
		}
		complete++
		if !slices.ContainsFunc(f.Entries, func(e Entry) bool { return e.Rel == "src/p50/.git" }) {
			t.Fatalf("a complete walk missed the repository: %+v", f.Entries)
		}
	}
	stop.Store(true)
	<-done
	if complete < 95 {
		t.Errorf("only %d of 100 walks completed under churn that changes nothing they find", complete)
	}
}
