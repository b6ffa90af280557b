package review

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// ErrChangedSince means a file the run changed was changed again after
// it: undo would lose that work, so it refuses.
var ErrChangedSince = errors.New("changed since the run")

// Change is one path the run changed: A added, M modified (or its type
// changed), D deleted; Rel is below the workspace.
type Change struct {
	Status string
	Rel    string
}

// Changes lists what the run changed.
func Changes(ctx context.Context, r Record) ([]Change, error) {
	if r.Skipped != "" {
		return nil, fmt.Errorf("run %s has no snapshot: %s", r.Run, r.Skipped)
	}
	if r.After == "" {
		return nil, errors.New("the run has not ended: nothing to undo yet")
	}
	out, err := git(ctx, r.Top, "", r.store(), "diff", "--name-status", "-z", "--no-renames", r.Before, r.After, "--", pathspec(r))
	if err != nil {
		return nil, err
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	var cs []Change
	for i := 0; i+1 < len(f); i += 2 {
		rel := f[i+1]
		if r.Prefix != "" {
			rel = strings.TrimPrefix(rel, r.Prefix+"/")
		}
		cs = append(cs, Change{Status: f[i][:1], Rel: rel})
	}
	return cs, nil
}

// Undo puts back the files the run changed as they were before it: one it
// added is removed, one it changed or deleted is written again, byte for
// byte with its mode. It refuses — changing nothing — when any of them
// changed again since the run ended (ErrChangedSince, naming them). Files
// are written beneath the workspace with no symbolic link on the way (a
// link the run left cannot send a write elsewhere).
func Undo(ctx context.Context, r Record) ([]Change, error) {
	cs, err := Changes(ctx, r)
	if err != nil || len(cs) == 0 {
		return cs, err
	}
	now, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out, err := git(ctx, r.Top, "", r.store(), "diff", "--name-only", "-z", "--no-renames", r.After, now, "--", pathspec(r))
	if err != nil {
		return nil, err
	}
	changed := map[string]bool{}
	for _, p := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p != "" {
			changed[strings.TrimPrefix(p, r.Prefix+"/")] = true
		}
	}
	var since []string
	for _, c := range cs {
		if changed[c.Rel] {
			since = append(since, c.Rel)
		}
	}
	if len(since) > 0 {
		return nil, fmt.Errorf("%w: %s (undo would lose that; restore by hand with ctx agent diff)", ErrChangedSince, strings.Join(since, ", "))
	}
	top, err := os.Open(r.Workspace)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	for _, c := range cs {
		full := c.Rel
		if r.Prefix != "" {
			full = r.Prefix + "/" + c.Rel
		}
		if c.Status == "A" {
			if err := remove(top, c.Rel); err != nil {
				return nil, fmt.Errorf("undo %s: %w", c.Rel, err)
			}
			continue
		}
		mode, data, err := blob(ctx, r, full)
		if err != nil {
			return nil, fmt.Errorf("undo %s: %w", c.Rel, err)
		}
		if err := restore(top, c.Rel, mode, data); err != nil {
			return nil, fmt.Errorf("undo %s: %w", c.Rel, err)
		}
	}
	return cs, nil
}

// blob is the mode and content of path in the before tree.
func blob(ctx context.Context, r Record, full string) (string, []byte, error) {
	out, err := git(ctx, r.Top, "", r.store(), "ls-tree", "-z", r.Before, "--", full)
	if err != nil {
		return "", nil, err
	}
	meta, _, ok := strings.Cut(string(out), "\t")
	fs := strings.Fields(meta)
	if !ok || len(fs) != 3 || fs[1] != "blob" {
		return "", nil, fmt.Errorf("not a file in the snapshot: %q", out)
	}
	data, err := git(ctx, r.Top, "", r.store(), "cat-file", "blob", fs[2])
	return fs[0], data, err
}

// parent opens rel's directory beneath top (made as needed, 0755), with
// no symbolic link on the way.
func parent(top *os.File, rel string, create bool) (*os.File, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if create && dir != "" {
		cur := ""
		for _, part := range strings.Split(dir, "/") {
			cur = path.Join(cur, part)
			d, err := safefs.OpenBeneath(top, cur, unix.O_PATH|unix.O_DIRECTORY)
			if err == nil {
				d.Close()
				continue
			}
			p, err := safefs.OpenBeneath(top, path.Dir(cur), unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				return nil, "", err
			}
			err = unix.Mkdirat(int(p.Fd()), path.Base(cur), 0o755)
			p.Close()
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return nil, "", err
			}
		}
	}
	d, err := safefs.OpenBeneath(top, dir, unix.O_PATH|unix.O_DIRECTORY)
	return d, name, err
}

func remove(top *os.File, rel string) error {
	d, name, err := parent(top, rel, false)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// restore writes data as rel (a temp file renamed over it), mode 100644,
// 100755 or 120000 (a symbolic link whose target is data).
func restore(top *os.File, rel, mode string, data []byte) error {
	d, name, err := parent(top, rel, true)
	if err != nil {
		return err
	}
	defer d.Close()
	dfd := int(d.Fd())
	tmp := ".ctx-undo-" + strconv.Itoa(os.Getpid()) + "-" + name
	if mode == "120000" {
		_ = unix.Unlinkat(dfd, tmp, 0)
		if err := unix.Symlinkat(string(bytes.TrimRight(data, "\x00")), dfd, tmp); err != nil {
			return err
		}
		return unix.Renameat(dfd, tmp, dfd, name)
	}
	perm := uint32(0o644)
	if mode == "100755" {
		perm = 0o755
	}
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(os.FileMode(perm))
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return werr
	}
	return unix.Renameat(dfd, tmp, dfd, name)
}
