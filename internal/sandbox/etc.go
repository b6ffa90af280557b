package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
)

// EtcDir is where the /etc snapshot lives: a symlink in the runtime
// directory to the current generation.
func EtcDir(l layout.Layout) string { return filepath.Join(l.Runtime, "etc") }

// EnsureEtc builds a snapshot of the minimal /etc every sandbox sees (the
// loader cache, name service files, time zone, certificates, terminfo,
// alternatives — nothing secret) under the runtime directory, so a sandbox
// binds one directory instead of one mount per file. The daemon calls it at
// start; the snapshot is replaced atomically (a symlink swap), and a
// sandbox built while it is missing falls back to per-file binds.
func EnsureEtc(l layout.Layout) error {
	if fresh(l) {
		return nil
	}
	gen := filepath.Join(l.Runtime, "etc-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return fmt.Errorf("etc snapshot: %w", err)
	}
	for _, src := range bwrap.SystemEtc() {
		if err := copyTree(src, filepath.Join(gen, filepath.Base(src))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(gen)
			return fmt.Errorf("etc snapshot: %s: %w", src, err)
		}
	}
	link := EtcDir(l)
	tmp := link + ".new-" + filepath.Base(gen) // concurrent builders never share it
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		return fmt.Errorf("etc snapshot: %w", err)
	}
	old, _ := os.Readlink(link)
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("etc snapshot: %w", err)
	}
	_ = old
	// Old generations may still be mounted by running sandboxes (a terminal
	// outlives a daemon restart): remove only those a day old.
	ents, _ := os.ReadDir(l.Runtime)
	for _, e := range ents {
		if n := e.Name(); len(n) > 4 && n[:4] == "etc-" && n != filepath.Base(gen) {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
				_ = os.RemoveAll(filepath.Join(l.Runtime, n))
			}
		}
	}
	return nil
}

// fresh reports whether the current snapshot is newer than every source.
func fresh(l layout.Layout) bool {
	t, err := os.Readlink(EtcDir(l))
	if err != nil {
		return false
	}
	st, err := os.Stat(filepath.Join(l.Runtime, t))
	if err != nil {
		return false
	}
	for _, src := range bwrap.SystemEtc() {
		if s, err := os.Stat(src); err == nil && s.ModTime().After(st.ModTime()) {
			return false
		}
	}
	return true
}

// copyTree copies a file, a symlink (as a symlink) or a directory.
func copyTree(src, dst string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(t, dst)
	case st.IsDir():
		if err := os.MkdirAll(dst, st.Mode().Perm()|0o700); err != nil {
			return err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case st.Mode().IsRegular():
		if st.Mode().Perm()&0o004 == 0 {
			return nil // not world-readable: not for the sandbox
		}
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
		if err != nil {
			return err
		}
		_, cerr := io.Copy(out, in)
		return errors.Join(cerr, out.Close())
	}
	return nil
}
