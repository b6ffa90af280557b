package sessions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// TrashName is the directory, inside an agent's sessions directory of one
// scope, that a removed session passes through. It is not a valid session
// name, so no session can take it and no listing shows it; it lives under
// session/, which every sandbox hides, so no agent sees what it holds.
const TrashName = ".trash"

// TrashDir is the trash of one scope's sessions.
func TrashDir(l layout.Layout, agent, scope string) string {
	return filepath.Join(l.SessionsDir(agent, scope), TrashName)
}

// Remove removes a session's files: the directory is first
// renamed into the scope's .trash (one atomic rename on the same file
// system, made durable by syncing the parent), so the session vanishes
// whole — a reader sees it or not, never half of it — and only then is the
// renamed tree deleted. A crash between the two leaves it in .trash, and
// the next Remove of that scope deletes it. Whether the session may be
// removed (no active run) is the caller's check.
func Remove(l layout.Layout, agent, scope, session string) error {
	if err := layout.CheckName("agent", agent); err != nil {
		return err
	}
	if err := layout.CheckName("session", session); err != nil {
		return err
	}
	dir := l.SessionDir(agent, scope, session)
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s/%s (%s): %w", agent, session, scope, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("remove session %s: %w", session, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("remove session %s: %s is not a directory", session, dir)
	}
	trash := TrashDir(l, agent, scope)
	if err := os.Mkdir(trash, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("remove session %s: %w", session, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	dst := filepath.Join(trash, session+"."+hex.EncodeToString(b[:]))
	if err := os.Rename(dir, dst); err != nil {
		return fmt.Errorf("remove session %s: archive: %w", session, err)
	}
	if err := atomicfile.SyncDir(l.SessionsDir(agent, scope)); err != nil {
		return fmt.Errorf("remove session %s: %w", session, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("remove session %s: delete %s: %w", session, dst, err)
	}
	sweep(trash)
	if scope == layout.ScopePrivate {
		// The MCP servers its editor declared (and their env values) go
		// with the session: a later session of the same name never sees them.
		if err := os.RemoveAll(mcpinstall.SessionDir(l, agent, session)); err != nil {
			return fmt.Errorf("remove session %s: its MCP servers: %w", session, err)
		}
	}
	return nil
}

// sweep deletes what earlier removals left in the trash (a crash between
// the rename and the delete). Errors are ignored: another removal may be
// deleting the same tree.
func sweep(trash string) {
	ents, _ := os.ReadDir(trash)
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(trash, e.Name()))
	}
}
