// Package binstall copies the runtime's helper binaries (tsh, ctxterm)
// from beside ctx into CTX_ROOT/bin; both `ctx init` and the daemon use it.
package binstall

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/atomicfile"
)

// Install copies tsh and ctxterm from src into binDir when they differ.
// A binary missing from src is skipped.
func Install(src, binDir string) error {
	var errs []error
	for _, name := range []string{"tsh", "ctxterm"} {
		errs = append(errs, CopyIfChanged(filepath.Join(src, name), filepath.Join(binDir, name)))
	}
	return errors.Join(errs...)
}

// CopyIfChanged replaces dst (atomically, mode 0755) with src's bytes when
// they differ. A missing src is not an error. The copy takes src's
// modification time, so a dst of the same size and time is taken as
// unchanged without reading either (rsync's quick check): a daemon start
// does not read megabytes to find nothing to do.
func CopyIfChanged(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer in.Close()
	sst, err := in.Stat()
	if err != nil {
		return err
	}
	if dst, err := os.Stat(dst); err == nil && dst.Mode().IsRegular() && dst.Size() == sst.Size() && dst.ModTime().Equal(sst.ModTime()) {
		return nil
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(dst); err != nil || string(old) != string(b) {
		if err := atomicfile.WriteFile(dst, b, 0o755); err != nil {
			return err
		}
	}
	return os.Chtimes(dst, sst.ModTime(), sst.ModTime())
}
