package sandbox

import (
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/toolpath"
	"golang.org/x/sys/unix"
)

// ToolView says which tool files a view shows. The view is the authority:
// what policy denies is absent, not only refused by the
// checks in front of it. The zero value shows none.
type ToolView int

const (
	// NoTools shows no tool file at all: an agent step acts only through
	// tool_call, checked and run by the host.
	NoTools ToolView = iota
	// AllowedTools shows, in each mounted tool directory on the agent's
	// CTX_PATH, only the tools the agent's policy and each tool's policy
	// allow (each with its <name>.d/), over an empty read-only tmpfs: a
	// terminal's shell, which lives as long as it likes.
	AllowedTools
	// CallTools shows what AllowedTools shows, each tool directory as one
	// read-only bind of its tool tree (tooltree.go) instead of a tmpfs and
	// two binds per tool: for a sandbox that lives one call (a tool call,
	// a tsh op), since a tree no view used for a day may be removed.
	CallTools
)

// ToolDir is a tool directory a view can show: its CTX_PATH entry (the path
// inside the sandbox) and its host directory.
type ToolDir struct{ Sandbox, Host string }

// ToolDirs lists the directories of ctxPath that a view mounts: only
// CTX_ROOT/tool and home/<uid>/tool (the mount-visibility layer of V3; any
// other entry is not shown), each once, in CTX_PATH order.
func ToolDirs(l layout.Layout, ctxPath string) []ToolDir {
	var out []ToolDir
	seen := map[string]bool{}
	for _, d := range toolpath.SplitPath(ctxPath) {
		h, ok := l.HostPath(d)
		if !ok || seen[h] || (h != l.ToolDir() && h != l.UserToolDir()) {
			continue
		}
		seen[h] = true
		out = append(out, ToolDir{Sandbox: filepath.Clean(d), Host: h})
	}
	return out
}

// DecideTool is the policy verdict (V3: agent policy, then tool policy)
// for def calling the tool name found in the host directory dir. The host
// checks of a tool call and the view's tool mounts both ask it, so what a
// view shows is exactly what a call may run. An unreadable or invalid
// policy file refuses (fails closed).
func DecideTool(def *agentdef.Def, dir, name string) policy.Decision {
	return policy.DecideFiles(filepath.Join(def.Control, "policy"), filepath.Join(dir, name+".d", "policy"), name, def.Label)
}

// UpdateTool is the tool whose policy governs the control socket: the
// agent.update tool the daemon installs (ctlsock.ToolName; named here so
// that the view does not depend on the socket's server).
const UpdateTool = "agent.update"

// DecideUpdate is the policy verdict for def speaking to the control
// socket: the same verdict as a call of the agent.update tool (DecideTool),
// with that tool's own policy taken from the first tool directory of the
// view that holds it as a regular file (as a call would resolve it), else
// from CTX_ROOT/tool, where the daemon installs it. The view mounts the
// socket only when this allows, and the socket's server asks it again
// for every update: the socket is a way to do what agent.update does, so
// it may do no more (README "Self-iteration").
func DecideUpdate(l layout.Layout, def *agentdef.Def) policy.Decision {
	dir := l.ToolDir()
	for _, d := range ToolDirs(l, def.CTXPath) {
		if st, err := os.Lstat(filepath.Join(d.Host, UpdateTool)); err == nil && st.Mode().IsRegular() {
			dir = d.Host
			break
		}
	}
	return DecideTool(def, dir, UpdateTool)
}

// toolMounts builds the tool part of a view showing the allowed tools:
// a tmpfs over each tool directory, one read-only bind per allowed tool
// and one per its <name>.d/, and the tmpfs remounted read-only after all
// mounts (remount). Only a regular file (never a symlink, which bwrap
// would follow) and a real directory are bound. Each bind costs bwrap one
// mount (docs/performance.md), so with trees (CallTools) a directory is
// one read-only bind of its tool tree instead, made or reused here; a
// directory whose tree cannot be made (another filesystem's rules, too
// many entries) is shown bind by bind all the same.
func toolMounts(l layout.Layout, def *agentdef.Def, trees bool) (tmpfs []string, mounts []bwrap.Mount, remount []string) {
	// The agent's policy is read once for the view, not once per tool.
	ap, aerr := policy.Load(policy.AgentPolicy, filepath.Join(def.Control, "policy"))
	for _, d := range ToolDirs(l, def.CTXPath) {
		names, qk, qerr, err := listTools(d.Host, def.Label, ap, aerr)
		if err != nil {
			// Absent: an empty directory in the view.
			tmpfs, remount = append(tmpfs, d.Sandbox), append(remount, d.Sandbox)
			continue
		}
		if trees {
			if tree, err := toolTree(d.Host, names, qk, qerr); err == nil {
				mounts = append(mounts, bwrap.Mount{Src: tree, Dst: d.Sandbox})
				continue
			}
		}
		tmpfs, remount = append(tmpfs, d.Sandbox), append(remount, d.Sandbox)
		for _, name := range names {
			src := filepath.Join(d.Host, name)
			mounts = append(mounts, bwrap.Mount{Src: src, Dst: d.Sandbox + "/" + name})
			if st, err := os.Lstat(src + ".d"); err == nil && st.IsDir() {
				mounts = append(mounts, bwrap.Mount{Src: src + ".d", Dst: d.Sandbox + "/" + name + ".d"})
			}
		}
	}
	return tmpfs, mounts, remount
}

// listTools gives, of the tool directory host, the names of its regular
// files the agent (label, its policy loaded as ap, aerr) may use —
// DecideTool's verdict for each — and the quick key of their tree
// (quickKey). The directory's listing (each tool's policy, the lstat of
// the tool and of its .d/) is read once and kept while nothing in it
// changes (tooldir.go); the verdicts are taken again for every view.
func listTools(host, label string, ap *policy.Policy, aerr error) (names []string, qk string, qerr, err error) {
	tools, err := readToolDir(host)
	if err != nil {
		return nil, "", nil, err
	}
	key := newQuickKey(host)
	for i := range tools {
		t := &tools[i]
		if !policy.DecideLoaded(ap, aerr, t.tp, t.terr, t.name, label).Allowed { // Denied tools are absent
			continue
		}
		names = append(names, t.name)
		if qerr != nil {
			continue
		}
		if qerr = key.add(t.name, &t.st, t.sterr); qerr == nil {
			qerr = key.add(t.name+".d", &t.dst, t.derr)
		}
	}
	return names, key.sum(), qerr, nil
}

// fstatat is lstat of rel below dirfd, retried on EINTR.
func fstatat(dirfd int, rel string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, rel, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}
