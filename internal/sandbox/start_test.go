package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/workspace"
)

// TestStartWalksAgainWhenMoved (spec: B1): a directory holding a nested
// repository moved on the host between the walk and the mount (here: by
// the first start itself, just before bwrap runs) is refused by the view
// check; what bwrap made in the moved directory's place (an empty sub/)
// is removed, and the second start, walked again, protects the repository
// where it now is — its hooks read-only in the sandbox that runs.
func TestStartWalksAgainWhenMoved(t *testing.T) {
	if _, err := exec.LookPath(bwrap.DefaultPath); err != nil {
		t.Skip("no bwrap")
	}
	v := startView(t)
	ws := v.Workspace
	var errs []error
	p, h, err := Start(context.Background(), v, []string{"/bin/sh", "-c", "touch /workspace/x/.git/hooks/h 2>/dev/null && echo WROTE; ls /workspace"}, nil,
		tries(&errs, func(s *bwrap.Spec) {
			if err := os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "x")); err != nil {
				t.Fatal(err)
			}
		}, nil))
	if err != nil {
		t.Fatalf("start: %v (tries %v)", err, errs)
	}
	defer h.Ended()
	out, _ := readAll(p)
	if len(errs) != 2 || !errors.Is(errs[0], bwrap.ErrMoved) || errs[1] != nil {
		t.Errorf("tries %v: want one refused (moved), then one started", errs)
	}
	if _, err := os.Lstat(filepath.Join(ws, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("what bwrap made for the refused start is left on the host: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "x", ".git", "hooks", "h")); err == nil || string(out) == "" {
		t.Errorf("the moved repository's hooks were writable (output %q)", out)
	}
}

// tries is a start that records each try's error in errs, changing the
// spec (or the host) first with first on the first try and with then on
// the later ones (nil: nothing).
func tries(errs *[]error, first, then func(*bwrap.Spec)) func(bwrap.Spec) (*proc.Proc, error) {
	return func(s bwrap.Spec) (*proc.Proc, error) {
		change := then
		if len(*errs) == 0 {
			change = first
		}
		if change != nil {
			change(&s)
		}
		p, err := proc.Start(proc.Options{Bwrap: bwrap.DefaultPath, Spec: s})
		*errs = append(*errs, err)
		return p, err
	}
}

func readAll(p *proc.Proc) ([]byte, error) {
	b := make([]byte, 0, 4096)
	buf := make([]byte, 4096)
	for {
		n, err := p.Stdout.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			p.Wait()
			return b, err
		}
	}
}

// TestStartWalksAgainWhenBwrapMeetsAMove (spec: B1): bwrap itself fails
// when a directory it binds is gone from its path when it looks (here:
// removed after the walk, so its descriptor names a deleted directory);
// the host shows the anchored path changed, so the view is walked and
// started again, and the call runs. A bwrap failure where nothing moved
// is the caller's to see.
func TestStartWalksAgainWhenBwrapMeetsAMove(t *testing.T) {
	if _, err := exec.LookPath(bwrap.DefaultPath); err != nil {
		t.Skip("no bwrap")
	}
	v := startView(t)
	ws := v.Workspace
	var errs []error
	p, h, err := Start(context.Background(), v, []string{"/bin/sh", "-c", "echo ran"}, nil,
		tries(&errs, func(*bwrap.Spec) { os.RemoveAll(filepath.Join(ws, "sub")) }, nil))
	if err != nil {
		t.Fatalf("start: %v (tries %v)", err, errs)
	}
	defer h.Ended()
	out, _ := readAll(p)
	if len(errs) != 2 || !errors.Is(errs[0], bwrap.ErrNoView) || errs[1] != nil || string(out) != "ran\n" {
		t.Errorf("tries %v, output %q: want bwrap's failure on the removed directory, then a run", errs, out)
	}

	// Nothing moved: bwrap's failure (a bind whose source never existed)
	// is returned at once, classified as bwrap's (proc.ErrSandbox).
	os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755)
	errs = nil
	never := func(s *bwrap.Spec) {
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: filepath.Join(ws, "never"), Dst: "/never"})
	}
	_, _, err = Start(context.Background(), v, []string{"/bin/true"}, nil, tries(&errs, never, never))
	if len(errs) != 1 || !errors.Is(err, bwrap.ErrNoView) || errors.Is(err, bwrap.ErrMoved) || !strings.Contains(err.Error(), "never") {
		t.Errorf("tries %v, error %v: want bwrap's own failure once", errs, err)
	}
	if !errors.Is(err, proc.ErrSandbox) || !strings.Contains(err.Error(), "check that bubblewrap works") {
		t.Errorf("error %v: bwrap's failure is not told as one, with its fix", err)
	}
}

// startView is a view that starts: a workspace with a nested repository
// (sub/.git), the agent's object and the runtime's directories there.
func startView(t *testing.T) View {
	t.Helper()
	v := view(t)
	v.Placeholders = workspace.NewRegistry()
	if err := os.MkdirAll(filepath.Join(v.Workspace, "sub", ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{v.Layout.BinDir(), v.Layout.ToolDir(), filepath.Dir(v.Def.Object)} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(v.Def.Object, []byte("#!/bin/sh\n"), 0o755)
	return v
}
