package sessions

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// ErrExists means the new name is taken.
var ErrExists = errors.New("a session of that name exists")

// Rename gives a session another name: one atomic rename of its
// directory that never replaces a session (RENAME_NOREPLACE), made
// durable by syncing the parent; a private session's editor-declared MCP
// servers follow it. Its log is unchanged: the frames recorded before
// keep the name they were recorded under. Whether the session may be
// renamed (no active run, its log closed) is the caller's check.
func Rename(l layout.Layout, agent, scope, from, to string) error {
	if err := layout.CheckName("agent", agent); err != nil {
		return err
	}
	for _, n := range []string{from, to} {
		if err := layout.CheckName("session", n); err != nil {
			return err
		}
	}
	src, dst := l.SessionDir(agent, scope, from), l.SessionDir(agent, scope, to)
	if st, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s/%s (%s): %w", agent, from, scope, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("rename session %s: %w", from, err)
	} else if !st.IsDir() {
		return fmt.Errorf("rename session %s: %s is not a directory", from, src)
	}
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A file system without RENAME_NOREPLACE: checked, then renamed.
		if _, lerr := os.Lstat(dst); lerr == nil {
			err = unix.EEXIST
		} else {
			err = os.Rename(src, dst)
		}
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("rename session %s to %s: %w", from, to, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("rename session %s: %w", from, err)
	}
	if err := atomicfile.SyncDir(l.SessionsDir(agent, scope)); err != nil {
		return fmt.Errorf("rename session %s: %w", from, err)
	}
	if scope == layout.ScopePrivate {
		if err := os.Rename(mcpinstall.SessionDir(l, agent, from), mcpinstall.SessionDir(l, agent, to)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rename session %s: its MCP servers: %w", from, err)
		}
	}
	return nil
}
