package terminal

import (
	"errors"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/termres"
	"github.com/cortexfs/ctx/internal/workspace"
)

// Program is what the terminal runs inside its sandbox (T1): the view's
// shell.
const Program = sandbox.Shell

// Env is the terminal's whole environment: exactly the B3 allowlist. No
// CTX_RUN and no CTX_CONTROL_SOCKET: the launch root is registered with the
// resource id as its run (interfaces.md "Control socket"), so agent.update
// works from the terminal only when given --run explicitly. spec: B3 B4
func Env(v sandbox.View) map[string]string {
	return v.ShellEnv("xterm-256color")
}

// View is the sandbox view of a terminal's shell: the agent's view
// (sandbox.View: /ctx with only the allowed tools, /home/agent, the
// session) with workspace bound writable at /workspace (.git read-only),
// tsh started there. Neither the socket nor events.jsonl is in the view:
// ctxterm serves and records them from the host. Its binds name their
// sources by path: ctxterm opens them (ByPath). Absent protected names
// get their placeholders from the registry. spec: B1 B2 T1
func View(l layout.Layout, def *agentdef.Def, session, id, workspace string, placeholders *workspace.Registry) sandbox.View {
	return sandbox.View{Layout: l, Def: def, Session: session, Scope: layout.ScopePrivate, Run: id, Tsh: true,
		Tools: sandbox.AllowedTools, Workspace: workspace, Cwd: layout.SandboxWorkspace, Placeholders: placeholders, ByPath: true}
}

// finish adds to a built view's spec what a terminal's bwrap has beyond
// it. The shell keeps its session and controlling terminal (no
// --new-session: tsh moves what it runs to a new session) and runs as PID 1
// of the sandbox (kill(-1) from inside never reaches it), and bwrap dies
// with ctxterm, its parent. spec: B1 B2 T1
func finish(s *bwrap.Spec) {
	s.Chdir = layout.SandboxWorkspace // spec: B1, D6
	s.SharedSession = true            // The shell needs its controlling terminal
	s.AsPID1 = true                   // Kill(-1)/kill(0) from a tool miss the shell
}

// LaunchEnv is the terminal sandbox's environment as K=V, sorted: what
// the launcher sets as ctxterm's environment (the built-in launcher the
// process's, the systemd launcher the unit's, through an owner-only
// EnvironmentFile), which ctxterm --sandboxed passes on to bwrap through a
// descriptor. spec: B3
func LaunchEnv(s bwrap.Spec) []string {
	out := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Hold is how a started terminal waits, before anything of its sandbox
// runs, until the daemon has registered its launch root (U2): ctxterm
// reads one byte from descriptor FD (the built-in launcher's pipe) or from
// the FIFO at path FIFO (the systemd launcher, which cannot hand a unit a
// descriptor). An EOF, a timeout or an error ends ctxterm before it starts
// anything (fails closed).
//
// View, when set, is the FIFO through which the daemon releases the shell
// once it has checked the view bwrap made (ctxterm --view-hold): until
// then bwrap holds the shell on its block descriptor. spec: B1
type Hold struct {
	FD   int
	FIFO string
	View string
}

// Command is a terminal's argv: ctxterm on the host — it holds the PTY
// master, serves the socket and writes the resource's events.jsonl — running
// bwrap (bwrapPath with s), which runs tsh. Only the shell and what it runs
// are inside the sandbox. spec: T1 T2 T5
func Command(l layout.Layout, agent, session, bwrapPath string, s bwrap.Spec, h Hold) ([]string, error) {
	if h.FD > 0 && h.FIFO != "" {
		return nil, errors.New("terminal: a hold descriptor and a hold FIFO")
	}
	// The environment is never on the command line (a unit's ExecStart,
	// ps): the launcher gives it to ctxterm as ctxterm's own environment
	// (LaunchEnv), and ctxterm hands it to bwrap through a descriptor.
	// spec: B3
	s.Env, s.EnvFD = nil, 0
	args, err := s.Args()
	if err != nil {
		return nil, err
	}
	argv := []string{filepath.Join(l.BinDir(), "ctxterm"),
		"--listen", l.RuntimeTerminalSocket(agent, session),
		"--events", filepath.Join(l.TerminalDir(agent, session), termres.EventsFile),
		"--sandboxed"}
	switch {
	case h.FD > 0:
		argv = append(argv, "--hold-fd", strconv.Itoa(h.FD))
	case h.FIFO != "":
		argv = append(argv, "--hold", h.FIFO)
	}
	if h.View != "" {
		argv = append(argv, "--view-hold", h.View)
	}
	argv = append(argv, "--", bwrapPath)
	return append(argv, args...), nil
}
