// Package layout names every path ctx uses under CTX_ROOT and CTX_RUNTIME_DIR
// (interfaces.md "Locations") and validates the names that become path parts.
package layout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cortexfs/ctx/internal/ident"
	"github.com/cortexfs/ctx/internal/pathin"

	"golang.org/x/sys/unix"
)

// ErrBadName is wrapped by every name-validation error.
var ErrBadName = errors.New("bad name")

var nameFirst, nameRest = ident.NewClass("A-Za-z0-9"), ident.NewClass("A-Za-z0-9._-") // [A-Za-z0-9][A-Za-z0-9._-]{0,63}

// CheckName validates an agent, session or tool name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
// Nothing that passes can escape its directory ("." and ".." cannot start a name).
func CheckName(kind, name string) error {
	if !ident.Valid(name, nameFirst, nameRest, 63) {
		return fmt.Errorf("%s name %q: must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}: %w", kind, name, ErrBadName)
	}
	return nil
}

// SandboxRoot is where CTX_ROOT appears inside every sandbox.
const SandboxRoot = "/ctx"

// SandboxHome is the agent's HOME inside the sandbox (B2).
const SandboxHome = "/home/agent"

// SandboxWorkspace is where the workspace is bound (B1).
const SandboxWorkspace = "/workspace"

// SandboxControlSocket is where the control socket is bound (U2).
const SandboxControlSocket = "/run/cortexfs/control.sock"

// ViewOwned are the sandbox paths every view builds itself (the runtime's
// root, /proc, /dev, the control socket's directory, the agent's home, the
// workspace, the system /etc): no bind of an agent's mount file or of an
// MCP server's declaration may cover or replace one. The one list
// (internal/agentdef and internal/mcpconf check against it).
var ViewOwned = []string{SandboxRoot, "/proc", "/dev", "/run/cortexfs", SandboxHome, SandboxWorkspace, "/etc"}

// SystemDirs are the system the agent's sandbox runs on (/usr and its
// links, /tmp): an agent's own mount may not replace them. An MCP server's
// bind may go under them (a package bound at its host path, such as
// /usr/lib/node_modules/x), hence a second list rather than one.
var SystemDirs = []string{"/tmp", "/usr", "/bin", "/sbin", "/lib", "/lib64"}

// Layout holds the two roots; every path is derived from them.
type Layout struct {
	Root    string // CTX_ROOT on the host
	Runtime string // CTX_RUNTIME_DIR on the host
	UID     int    // the owner
}

// FromEnv resolves CTX_ROOT and CTX_RUNTIME_DIR as interfaces.md pins them.
// It does not create anything.
func FromEnv() Layout {
	uid := os.Getuid()
	return Layout{Root: DefaultRoot(), Runtime: DefaultRuntime(uid), UID: uid}
}

// DefaultRoot: $CTX_ROOT, else /ctx if it is a writable directory, else
// ${XDG_DATA_HOME:-~/.local/share}/cortexfs.
func DefaultRoot() string {
	if r := os.Getenv("CTX_ROOT"); r != "" {
		return filepath.Clean(r)
	}
	if st, err := os.Stat("/ctx"); err == nil && st.IsDir() && unix.Access("/ctx", unix.W_OK) == nil {
		return "/ctx"
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		home, _ := os.UserHomeDir()
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, "cortexfs")
}

// DefaultRuntime: $CTX_RUNTIME_DIR, else $XDG_RUNTIME_DIR/cortexfs, else /tmp/cortexfs-<uid>.
func DefaultRuntime(uid int) string {
	if r := os.Getenv("CTX_RUNTIME_DIR"); r != "" {
		return filepath.Clean(r)
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "cortexfs")
	}
	return "/tmp/cortexfs-" + strconv.Itoa(uid)
}

// EnsureRuntime creates the runtime directory 0700 and checks it is owned by
// the owner and not reachable by others (a shared /tmp must not be hijacked).
func (l Layout) EnsureRuntime() error {
	if err := os.MkdirAll(l.Runtime, 0o700); err != nil {
		return fmt.Errorf("runtime dir: %w", err)
	}
	st, err := os.Lstat(l.Runtime)
	if err != nil {
		return fmt.Errorf("runtime dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("runtime dir %s: not a directory", l.Runtime)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if int(sys.Uid) != l.UID {
		return fmt.Errorf("runtime dir %s: owned by uid %d, not %d", l.Runtime, sys.Uid, l.UID)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(l.Runtime, 0o700); err != nil {
			return fmt.Errorf("runtime dir %s: mode %v: %w", l.Runtime, st.Mode().Perm(), err)
		}
	}
	return nil
}

// Host paths under CTX_ROOT.

func (l Layout) AgentDir() string                { return filepath.Join(l.Root, "agent") }
func (l Layout) AgentObject(name string) string  { return filepath.Join(l.Root, "agent", name) }
func (l Layout) AgentControl(name string) string { return filepath.Join(l.Root, "agent", name+".d") }
func (l Layout) AgentSocket(name string) string  { return filepath.Join(l.Root, "agent", name+".sock") }
func (l Layout) BinDir() string                  { return filepath.Join(l.Root, "bin") }
func (l Layout) ToolDir() string                 { return filepath.Join(l.Root, "tool") }
func (l Layout) UserHome() string                { return filepath.Join(l.Root, "home", strconv.Itoa(l.UID)) }
func (l Layout) UserToolDir() string             { return filepath.Join(l.UserHome(), "tool") }
func (l Layout) Tshrc() string                   { return filepath.Join(l.UserHome(), ".tshrc") }

// ChatHistory is the file of the messages the owner sent to agent from
// `ctx agent chat`, kept across chats (owner-only, never in a view).
func (l Layout) ChatHistory(agent string) string {
	return filepath.Join(l.UserHome(), "history", agent)
}

// AgentHome is home/<uid>/agent/<name>, mounted at /home/agent (B2).
func (l Layout) AgentHome(agent string) string {
	return filepath.Join(l.UserHome(), "agent", agent)
}

// Scope of a session: private (per uid) or shared.
const (
	ScopePrivate = "private"
	ScopeShared  = "shared"
)

// SessionsDir holds the sessions of one agent in one scope.
func (l Layout) SessionsDir(agent, scope string) string {
	if scope == ScopeShared {
		return filepath.Join(l.Root, "home", "shared", "agent", agent, "session")
	}
	return filepath.Join(l.AgentHome(agent), "session")
}

// SessionDir is the directory of one session.
func (l Layout) SessionDir(agent, scope, session string) string {
	return filepath.Join(l.SessionsDir(agent, scope), session)
}

// TerminalDir is the terminal resource of a (private) session (T5).
func (l Layout) TerminalDir(agent, session string) string {
	return filepath.Join(l.SessionDir(agent, ScopePrivate, session), "terminal")
}

// Host paths under CTX_RUNTIME_DIR.

func (l Layout) SystemSocket() string  { return filepath.Join(l.Runtime, "system.sock") }
func (l Layout) ControlSocket() string { return filepath.Join(l.Runtime, "control", "control.sock") }

// ControlSocketLink is the pinned host path of the control socket
// (interfaces.md: $CTX_RUNTIME_DIR/control.sock), a symlink to
// ControlSocket: the socket lives alone in control/, which sandboxes bind
// as a directory, so a restarted daemon's new socket is reachable from a
// sandbox that outlived the old one (a terminal).
func (l Layout) ControlSocketLink() string { return filepath.Join(l.Runtime, "control.sock") }
func (l Layout) DaemonLog() string         { return filepath.Join(l.Runtime, "daemon.log") }
func (l Layout) ReceiptDir() string        { return filepath.Join(l.Runtime, "receipts") }
func (l Layout) RuntimeAgentSocket(name string) string {
	return filepath.Join(l.Runtime, "agent", name+".sock")
}

// RuntimeTerminalSocket is the real terminal socket (T3).
func (l Layout) RuntimeTerminalSocket(agent, session string) string {
	return filepath.Join(l.Runtime, "terminal", agent, session, "main.sock")
}

// DefaultCTXPath is the agent's CTX_PATH when .d/path is absent (sandbox paths).
func (l Layout) DefaultCTXPath() string {
	return SandboxRoot + "/tool:" + SandboxRoot + "/home/" + strconv.Itoa(l.UID) + "/tool"
}

// HostPath maps a sandbox path under /ctx to the host path under CTX_ROOT.
// ok is false for a path outside /ctx.
func (l Layout) HostPath(sandboxPath string) (string, bool) {
	p := filepath.Clean(sandboxPath)
	if p == SandboxRoot {
		return l.Root, true
	}
	rel, ok := pathin.Rel(SandboxRoot, p)
	if !ok {
		return "", false
	}
	return filepath.Join(l.Root, rel), true
}

// EnsureRoot creates CTX_ROOT's skeleton: agent/, bin/, tool/, home/<uid>/.
func (l Layout) EnsureRoot() error {
	for _, d := range []string{l.Root, l.AgentDir(), l.BinDir(), l.ToolDir(), l.UserHome(), l.UserToolDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("ctx root: %w", err)
		}
	}
	return nil
}

// ClusterMarker is the file a cluster node writes at its shared root
// (docs/cluster.md): its sessions' logs are segmented and owned through
// etcd, so a single daemon must not serve them.
func (l Layout) ClusterMarker() string { return filepath.Join(l.Root, "cluster.json") }

// ClusterPlaceholderLocks is the directory on a cluster's shared root of
// the per-workspace-directory lock files by which nodes share the
// placeholders of shared workspaces (workspace.Registry.Share). No view
// binds it.
func (l Layout) ClusterPlaceholderLocks() string { return filepath.Join(l.Root, "placeholders") }
