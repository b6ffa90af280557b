package proc

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/safefs"
)

// TestCheckViewAnchors (spec: B1): a held sandbox with anchors runs its
// program only when each anchored mount, in the finished view, is
// read-only, shows what was bound, and sits in the directory the walk
// found it in. An anchor naming another directory (the repository's
// directory moved and bwrap made one in its place), another mounted file
// or a writable path fails the start with bwrap.ErrMoved, and the
// program never runs — with and without launch roots. A tmpfs anchor
// (what hides the runtime's tree in a workspace) must be a tmpfs mounted
// in its directory; a pin (a directory bound writable over itself so no
// sandbox can move it) must cover the directory itself: one bwrap bound
// on a directory it made, by path, leaves the directory writable under
// the workspace's own mount.
func TestCheckViewAnchors(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	ws, marks := t.TempDir(), t.TempDir()
	for _, d := range []string{"sub/.git/hooks", "sub/hidden"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := func(p string) safefs.Identity {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		i, err := safefs.ID(f)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	sub, git := id(filepath.Join(ws, "sub")), id(filepath.Join(ws, "sub", ".git"))
	reg, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	good := bwrap.Anchor{Dst: "/workspace/sub/.git", Dir: sub, Mounted: git}
	pin := bwrap.Anchor{Dst: "/workspace/sub", Dir: id(ws), Mounted: sub, Under: sub, Pin: true}
	for _, c := range []struct {
		name    string
		anchors []bwrap.Anchor
		why     string // "" when the program runs
		mounts  []bwrap.Mount
	}{
		{"where the walk found it", []bwrap.Anchor{good}, "", nil},
		{"in another directory", []bwrap.Anchor{{Dst: good.Dst, Dir: id(ws), Mounted: git}}, "not the directory the walk found", nil},
		{"another file mounted", []bwrap.Anchor{{Dst: good.Dst, Dir: sub, Mounted: sub}}, "not what was bound there", nil},
		{"writable", []bwrap.Anchor{good, {Dst: "/workspace/sub", Dir: id(ws), Mounted: sub}}, "is writable", nil},
		{"gone", []bwrap.Anchor{{Dst: "/workspace/x/.git", Dir: sub, Mounted: git}}, "no such file", nil},
		{"a hiding tmpfs", []bwrap.Anchor{good, {Dst: "/workspace/sub/hidden", Dir: sub, Tmpfs: true, Under: id(filepath.Join(ws, "sub", "hidden"))}}, "", nil},
		{"no tmpfs there", []bwrap.Anchor{{Dst: "/workspace/sub/.git", Dir: sub, Tmpfs: true}}, "not the tmpfs that hides it", nil},
		{"a tmpfs elsewhere", []bwrap.Anchor{{Dst: "/workspace/sub/hidden", Dir: id(ws), Tmpfs: true}}, "not the directory the walk found", nil},
		{"over what was found", []bwrap.Anchor{{Dst: good.Dst, Dir: sub, Mounted: git, Under: git}}, "", nil},
		{"over another entry", []bwrap.Anchor{{Dst: good.Dst, Dir: sub, Mounted: git, Under: sub}}, "covers another entry", nil},
		{"a pin", []bwrap.Anchor{pin, good}, "", []bwrap.Mount{{Src: filepath.Join(ws, "sub"), Dst: "/workspace/sub", Write: true}}},
		// bwrap made /workspace/y for a pin whose directory had moved
		// there (it binds by path): sub is then in the view twice, and
		// under the workspace's own mount its .git is writable.
		{"a pin on a made directory", []bwrap.Anchor{{Dst: "/workspace/y", Dir: id(ws), Mounted: sub, Under: sub, Pin: true}}, "covers another entry",
			[]bwrap.Mount{{Src: filepath.Join(ws, "sub"), Dst: "/workspace/y", Write: true}}},
	} {
		for _, roots := range []bool{false, true} {
			marker := filepath.Join(marks, "ran")
			os.Remove(marker)
			o := Options{Bwrap: bwrap.DefaultPath, Spec: bwrap.Spec{System: true,
				Mounts: append(append([]bwrap.Mount{{Src: ws, Dst: "/workspace", Write: true}}, c.mounts...),
					bwrap.Mount{Src: filepath.Join(ws, "sub", ".git"), Dst: good.Dst}, bwrap.Mount{Src: marks, Dst: marks, Write: true}),
				TmpfsAfter: []string{"/workspace/sub/hidden"},
				Anchors:    c.anchors,
				Argv:       []string{"/bin/sh", "-c", "touch " + marker + "; touch /workspace/sub/.git/hooks/x 2>/dev/null; true"}}}
			if roots {
				o.Roots, o.Ident = reg, launchroot.Identity{UID: os.Getuid(), Agent: "a", Session: "s", Run: "r"}
			}
			p, err := Start(o)
			if c.why == "" {
				if err != nil {
					t.Fatalf("%s (roots %v): %v", c.name, roots, err)
				}
				io.Copy(io.Discard, p.Stdout)
				if err := p.Wait(); err != nil {
					t.Fatalf("%s (roots %v): %v %s", c.name, roots, err, p.Stderr())
				}
				if _, err := os.Stat(marker); err != nil {
					t.Errorf("%s (roots %v): the program did not run", c.name, roots)
				}
				if _, err := os.Stat(filepath.Join(ws, "sub", ".git", "hooks", "x")); err == nil {
					t.Errorf("%s (roots %v): the anchored mount was writable", c.name, roots)
				}
				continue
			}
			if err == nil || !errors.Is(err, bwrap.ErrMoved) || !strings.Contains(err.Error(), c.why) {
				if p != nil {
					io.Copy(io.Discard, p.Stdout)
					p.Wait()
				}
				t.Errorf("%s (roots %v): start error %v, want ErrMoved (%s)", c.name, roots, err, c.why)
				continue
			}
			time.Sleep(50 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("%s (roots %v): the program ran: %v", c.name, roots, err)
			}
		}
	}
}
