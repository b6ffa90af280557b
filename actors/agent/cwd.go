package agent

import (
	"fmt"
	"github.com/cortexfs/ctx/internal/pathin"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// checkCwd refuses a cwd that cannot exist in the request's view before
// anything is recorded: bwrap would fail to chdir after
// the user message was committed, and the error would blame bubblewrap.
// Without a workspace only /home/agent (the agent's home) is there; under
// /workspace the directory must exist in the workspace. A cwd elsewhere
// with a workspace (a .d/mount destination, /tmp) is left to the sandbox.
func checkCwd(l layout.Layout, agent string, r *ipc.Request) error {
	if r.Cwd == "" {
		return nil
	}
	cwd := filepath.Clean(r.Cwd)
	var host string
	switch {
	case under(cwd, layout.SandboxWorkspace):
		if r.Workspace == "" {
			return fmt.Errorf("cwd %q: under %s, but the request binds no workspace (send one, or a cwd under %s): %w",
				r.Cwd, layout.SandboxWorkspace, layout.SandboxHome, ipc.ErrBadRequest)
		}
		host = filepath.Join(r.Workspace, strings.TrimPrefix(cwd, layout.SandboxWorkspace))
	case under(cwd, layout.SandboxHome):
		host = filepath.Join(l.AgentHome(agent), strings.TrimPrefix(cwd, layout.SandboxHome))
	case r.Workspace == "":
		return fmt.Errorf("cwd %q: without a workspace only %s is in the view (send a workspace, or a cwd under %s): %w",
			r.Cwd, layout.SandboxHome, layout.SandboxHome, ipc.ErrBadRequest)
	default:
		return nil
	}
	if st, err := os.Stat(host); err != nil || !st.IsDir() {
		return fmt.Errorf("cwd %q: no such directory in the view: %w", r.Cwd, ipc.ErrBadRequest)
	}
	return nil
}

// under reports whether p is dir or below it (both clean and absolute).
func under(p, dir string) bool { return pathin.Inside(p, dir) }
