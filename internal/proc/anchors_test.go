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
// program never runs — with and without launch roots.
func TestCheckViewAnchors(t *testing.T) {
	if _, err := os.Stat(bwrap.DefaultPath); err != nil {
		t.Skip("bwrap not installed")
	}
	ws, marks := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub", ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := func(p string) bwrap.FileID {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		i, err := safefs.ID(f)
		if err != nil {
			t.Fatal(err)
		}
		return bwrap.FileID(i)
	}
	sub, git := id(filepath.Join(ws, "sub")), id(filepath.Join(ws, "sub", ".git"))
	reg, err := launchroot.New(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	good := bwrap.Anchor{Dst: "/workspace/sub/.git", Dir: sub, Mounted: git}
	for _, c := range []struct {
		name    string
		anchors []bwrap.Anchor
		why     string // "" when the program runs
	}{
		{"where the walk found it", []bwrap.Anchor{good}, ""},
		{"in another directory", []bwrap.Anchor{{Dst: good.Dst, Dir: id(ws), Mounted: git}}, "not the directory the walk found"},
		{"another file mounted", []bwrap.Anchor{{Dst: good.Dst, Dir: sub, Mounted: sub}}, "not what was bound there"},
		{"writable", []bwrap.Anchor{good, {Dst: "/workspace/sub", Dir: id(ws), Mounted: sub}}, "is writable"},
		{"gone", []bwrap.Anchor{{Dst: "/workspace/x/.git", Dir: sub, Mounted: git}}, "no such file"},
	} {
		for _, roots := range []bool{false, true} {
			marker := filepath.Join(marks, "ran")
			os.Remove(marker)
			o := Options{Bwrap: bwrap.DefaultPath, Spec: bwrap.Spec{System: true,
				Mounts: []bwrap.Mount{{Src: ws, Dst: "/workspace", Write: true}, {Src: filepath.Join(ws, "sub", ".git"), Dst: good.Dst},
					{Src: marks, Dst: marks, Write: true}},
				Anchors: c.anchors,
				Argv:    []string{"/bin/sh", "-c", "touch " + marker + "; touch /workspace/sub/.git/hooks/x 2>/dev/null; true"}}}
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
