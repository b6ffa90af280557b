package stdtool

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/cortexfs/ctx/internal/pathin"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/atomicfile"
)

// WorkspaceDir is where the sandbox binds the run's workspace.
const WorkspaceDir = "/workspace"

// Root is the directory the tools treat as the workspace: /workspace when
// the cwd is inside it, else the cwd (an agent without a workspace works in
// its home). Mutating tools refuse to write through a symlink that leaves
// it (CheckWritable); everything else the view shows is readable.
func Root() string {
	cwd, err := os.Getwd()
	if err != nil {
		return WorkspaceDir
	}
	if Inside(cwd, WorkspaceDir) {
		return WorkspaceDir
	}
	return cwd
}

// Inside reports whether path is dir or below it (both clean and absolute).
func Inside(path, dir string) bool {
	return pathin.Inside(path, dir)
}

// Abs makes a tool's path argument absolute against the cwd.
func Abs(p string) (string, error) {
	if p == "" {
		return "", Failf("empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", Failf("path %q holds a NUL byte", p)
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("path %s: %w", p, err)
	}
	return a, nil
}

// CheckWritable resolves path for a mutating tool: the path it will write
// (symlinks followed, also for a file not yet there: its parent is
// resolved), refused when that leaves the workspace root. The sandbox is the
// authority; this only keeps a symlink planted in the repository from
// turning an edit of ./config into a write elsewhere in the view.
func CheckWritable(path string) (string, error) {
	root := Root()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	target := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		target = r
	} else if errors.Is(err, fs.ErrNotExist) {
		// a new file: resolve the deepest parent that exists
		dir, rest := filepath.Dir(path), filepath.Base(path)
		for {
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				target = filepath.Join(r, rest)
				break
			}
			if dir == "/" || dir == "." {
				break
			}
			rest = filepath.Join(filepath.Base(dir), rest)
			dir = filepath.Dir(dir)
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return "", Failf("%s is a symlink to a path that does not exist; write the target directly", path)
		}
	}
	if !Inside(target, root) && Inside(path, root) {
		return "", Failf("%s resolves to %s, outside the workspace %s (a symlink); write that path directly if you mean it", path, target, root)
	}
	return target, nil
}

// WriteAtomic replaces path with data: a temp file beside it, fsync, rename,
// fsync the directory — a reader sees the old or the new file, never a mix.
// mode is kept from an existing file, else perm; parents are created.
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return Failf("%s is a directory", path)
		}
		perm = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return fmt.Errorf("create parents of %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, perm); err != nil {
		return err
	}
	return nil
}

// SniffLen is how much of a file IsBinary looks at.
const SniffLen = 8 << 10

// IsBinary reports whether head (a file's first bytes) looks binary: a NUL
// byte, or mostly not text — more than a quarter of its bytes invalid UTF-8
// or control characters other than tab, line breaks, form feed, backspace
// and escape. A rune cut at the end of head is not invalid. A text file in
// a legacy encoding (Latin-1 accents here and there) is text.
func IsBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	odd := 0
	for b := head; len(b) > 0; {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1:
			if len(b) < utf8.UTFMax && !utf8.FullRune(b) {
				b = nil // a rune cut by the end of head
				continue
			}
			odd++
		case r < 0x20 && !strings.ContainsRune("\t\n\r\f\v\b\x1b", r), r == 0x7f:
			odd++
		}
		b = b[n:]
	}
	return odd*4 > len(head)
}
