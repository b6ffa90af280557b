// Package sandbox derives the bwrap view of an agent — what an executable
// agent step and a tool call see — from the definition, the session and the
// request (runtime.md B1–B4, X11). The terminal view builds on the same.
package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
)

// View is the request-dependent part of a sandbox.
type View struct {
	Layout    layout.Layout
	Def       *agentdef.Def
	Session   string
	Scope     string
	Run       string
	Workspace string // host directory bound at /workspace, or ""
	Cwd       string // working directory inside the view ("" = default)
	// Tsh marks a view that runs tsh (the terminal, a tsh command): it also
	// sees this session's directory (tools.json) and the agent's .d/policy
	// and .d/label, which tsh enforces itself. An agent step or a checked
	// tool the host runs directly needs neither (fewer mounts, faster start).
	Tsh bool
	// Tools says which tool files the view shows (zero: none).
	Tools ToolView
}

// Subject is CTX_AGENT_SUBJECT: <uid>:<agent>:<session>.
func (v View) Subject() string {
	return strconv.Itoa(v.Layout.UID) + ":" + v.Def.Name + ":" + v.Session
}

// WorkDir is the working directory inside the view: the request's cwd, else
// .d/cwd, else /workspace when a workspace is bound, else /home/agent.
func (v View) WorkDir() string {
	switch {
	case v.Cwd != "":
		return v.Cwd
	case v.Def.Cwd != "":
		return v.Def.Cwd
	case v.Workspace != "":
		return layout.SandboxWorkspace
	}
	return layout.SandboxHome
}

// BaseEnv is the runtime-held environment every sandboxed process of the
// view gets (B3 names; CTX_* are runtime-held, X11).
func (v View) BaseEnv() map[string]string {
	uid := strconv.Itoa(v.Layout.UID)
	return map[string]string{
		"CTX_ROOT":          layout.SandboxRoot,
		"CTX_HOME":          layout.SandboxRoot + "/home/" + uid,
		"CTX_AGENT":         v.Def.Name,
		"CTX_AGENT_SUBJECT": v.Subject(),
		"CTX_PATH":          v.Def.CTXPath,
		"HOME":              layout.SandboxHome,
	}
}

// ToolEnv is the environment of a tool process: exactly the B3 allowlist
// plus the run id and control socket the agent.update tool needs.
func (v View) ToolEnv() map[string]string {
	env := v.BaseEnv()
	env["USER"] = "agent"
	env["LOGNAME"] = "agent"
	env["SHELL"] = layout.SandboxRoot + "/bin/tsh"
	env["TERM"] = "dumb"
	env["LANG"] = "C.UTF-8"
	env["CTX_RUN"] = v.Run
	env["CTX_CONTROL_SOCKET"] = layout.SandboxControlSocket
	return env
}

// AgentEnv is an executable agent's environment: .d/env, then the
// runtime-held variables (which .d/env cannot override), nothing of the
// daemon's own environment (X11, B4).
func (v View) AgentEnv(step int) map[string]string {
	env := map[string]string{}
	for _, kv := range v.Def.Env {
		env[kv.Key] = kv.Value
	}
	for k, val := range v.BaseEnv() {
		env[k] = val
	}
	env["CTX_SESSION"] = v.Session
	env["CTX_RUN"] = v.Run
	env["CTX_STEP"] = strconv.Itoa(step)
	return env
}

// Spec builds the bwrap spec of the view running argv with env.
// Visible under /ctx: bin/, the allowed tools when v.Tools says so
// (read-only), and the agent object itself for executable agents. The agent home is writable at
// /home/agent; the workspace at /workspace with its .git read-only.
func (v View) Spec(argv []string, env map[string]string) bwrap.Spec {
	l := v.Layout
	home := l.AgentHome(v.Def.Name)
	_ = os.MkdirAll(home, 0o700)
	s := bwrap.Spec{
		System: true,
		Etc:    etcSnapshot(l),
		Dirs:   []string{layout.SandboxRoot, layout.SandboxHome},
		Mounts: []bwrap.Mount{
			{Src: l.BinDir(), Dst: layout.SandboxRoot + "/bin", Try: true},
			{Src: home, Dst: layout.SandboxHome, Write: true},
		},
		Env:   env,
		Chdir: v.WorkDir(),
		Argv:  argv,
	}
	if v.Tools == AllowedTools { // issue 11 item 4: the view is the authority
		tmpfs, mounts, remount := toolMounts(l, v.Def)
		s.Tmpfs = append(s.Tmpfs, tmpfs...)
		s.Mounts = append(s.Mounts, mounts...)
		s.RemountRO = append(s.RemountRO, remount...)
	}
	if v.Def.Kind == agentdef.KindExec {
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: v.Def.Object, Dst: v.AgentPath()})
	}
	// spec: V3 — tsh inside the view (the persistent terminal has no host
	// check) must see the agent policy and label: the .d directory exists
	// in the view, holding these two files read-only when they exist.
	if v.Tsh {
		ctl := v.AgentPath() + ".d"
		s.Dirs = append(s.Dirs, ctl)
		for _, f := range []string{"policy", "label"} {
			s.Mounts = append(s.Mounts, bwrap.Mount{Src: filepath.Join(v.Def.Control, f), Dst: ctl + "/" + f, Try: true})
		}
	}
	if v.Workspace != "" {
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: v.Workspace, Dst: layout.SandboxWorkspace, Write: true})
		// A workspace such as $HOME can contain CTX_ROOT (~/.local/share/cortexfs)
		// or the runtime dir: hide them, or the agent could write events.jsonl,
		// its own .d/ controls and tools, and read home/<uid>/secrets/.
		for _, hidden := range []string{l.Root, l.Runtime} {
			if rel, err := filepath.Rel(v.Workspace, hidden); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				s.TmpfsAfter = append(s.TmpfsAfter, filepath.Join(layout.SandboxWorkspace, rel))
			}
		}
		if st, err := os.Lstat(filepath.Join(v.Workspace, ".git")); err == nil {
			// spec: B1 — .git is re-mounted read-only inside the writable workspace.
			s.Mounts = append(s.Mounts, bwrap.Mount{Src: filepath.Join(v.Workspace, ".git"), Dst: layout.SandboxWorkspace + "/.git"})
			if st.Mode().IsRegular() {
				// spec: D8 — a worktree's .git is a file naming its gitdir
				// (and that gitdir's commondir): both read-only as well.
				s.Mounts = append(s.Mounts, worktreeGitDirs(l, v.Workspace)...)
			}
		}
	}
	for _, m := range v.Def.Mounts {
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: m.Src, Dst: m.Dst, Write: m.Write})
	}
	s.Network = v.Def.Network
	if _, err := os.Stat(l.ControlSocket()); err == nil {
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: l.ControlSocket(), Dst: layout.SandboxControlSocket, Try: true})
	}
	// The session: other sessions of the agent (which live in its home) are
	// hidden; this one is visible at the CTX_AGENT_SUBJECT path so tsh can
	// keep tools.json there, with the durable log read-only (X7: only the
	// host writes frames).
	if v.Session != "" {
		// Other sessions are hidden from every process of the view.
		s.TmpfsAfter = append(s.TmpfsAfter, layout.SandboxHome+"/session")
	}
	if v.Session != "" && v.Tsh {
		scope := v.Scope
		if scope == "" {
			scope = layout.ScopePrivate
		}
		dir := l.SessionDir(v.Def.Name, scope, v.Session)
		at := v.SessionPath()
		s.MountsAfter = append(s.MountsAfter,
			bwrap.Mount{Src: dir, Dst: at, Write: true, Try: true},
			bwrap.Mount{Src: filepath.Join(dir, "events.jsonl"), Dst: at + "/events.jsonl", Try: true},
			bwrap.Mount{Src: filepath.Join(dir, "messages.jsonl"), Dst: at + "/messages.jsonl", Try: true},
			bwrap.Mount{Src: filepath.Join(dir, "terminal"), Dst: at + "/terminal", Try: true},
		)
	}
	return s
}

// etcSnapshot returns the /etc snapshot's current generation, or "".
func etcSnapshot(l layout.Layout) string {
	if t, err := os.Readlink(EtcDir(l)); err == nil {
		return filepath.Join(l.Runtime, t)
	}
	return ""
}

// SessionPath is the session directory as the sandbox sees it (the path
// tsh derives from CTX_AGENT_SUBJECT).
func (v View) SessionPath() string {
	return layout.SandboxRoot + "/home/" + strconv.Itoa(v.Layout.UID) + "/agent/" + v.Def.Name + "/session/" + v.Session
}

// Identity is the capability identity of the view's launch roots (U2, U3).
func (v View) Identity() launchroot.Identity {
	return launchroot.Identity{UID: v.Layout.UID, Agent: v.Def.Name, Session: v.Session, Run: v.Run}
}

// AgentPath is where the agent object appears inside the view.
func (v View) AgentPath() string { return layout.SandboxRoot + "/agent/" + v.Def.Name }

// worktreeGitDirs binds read-only the git directories a worktree's ".git"
// file points to ("gitdir: DIR", then DIR/commondir), each at the path the
// sandbox resolves it to: its own host path, or under /workspace when it
// lies inside the workspace (which is bound writable).
//
// The workspace is writable by the agent, so ".git" may be agent data: a
// directory outside the workspace is bound only when it is a real worktree
// admin directory (<common>/worktrees/<name> whose "gitdir" file names this
// workspace's .git), its common dir is exactly <common>, and neither lies
// under CTX_ROOT. Files are read without following symlinks or blocking.
func worktreeGitDirs(l layout.Layout, workspace string) []bwrap.Mount {
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil
	}
	gitFile := filepath.Join(ws, ".git")
	b, err := readSmall(gitFile)
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	dir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return nil
	}
	dir = strings.TrimSpace(dir)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ws, dir)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil
	}
	inside := func(d, parent string) bool {
		rel, err := filepath.Rel(parent, d)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	root, err := filepath.EvalSymlinks(l.Root)
	if err != nil {
		root = l.Root
	}
	dirs := []string{dir}
	if !inside(dir, ws) {
		back, err := readSmall(filepath.Join(dir, "gitdir"))
		if err != nil || filepath.Base(filepath.Dir(dir)) != "worktrees" ||
			filepath.Clean(strings.TrimSpace(string(back))) != gitFile || inside(dir, root) {
			return nil
		}
		dirs = append(dirs, filepath.Dir(filepath.Dir(dir))) // the only common dir accepted
	} else if c, err := readSmall(filepath.Join(dir, "commondir")); err == nil {
		common := strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(dir, common)
		}
		if common, err = filepath.EvalSymlinks(common); err == nil && inside(common, ws) {
			dirs = append(dirs, common)
		}
	}
	var out []bwrap.Mount
	for _, d := range dirs {
		dst := d
		if inside(d, ws) {
			rel, _ := filepath.Rel(ws, d)
			dst = filepath.Join(layout.SandboxWorkspace, rel)
		} else if inside(d, root) {
			continue
		}
		out = append(out, bwrap.Mount{Src: d, Dst: dst, Try: true})
	}
	return out
}

// readSmall reads at most 4 KiB of a regular file without following a
// symlink in its last component and without blocking on a FIFO.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, os.ErrInvalid
	}
	return io.ReadAll(io.LimitReader(f, 4<<10))
}
