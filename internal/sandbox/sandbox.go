// Package sandbox derives the bwrap view of an agent — what an executable
// agent step and a tool call see — from the definition, the session and the
// request (runtime.md B1–B4, X11). The terminal view builds on the same.
package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/workspace"
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
	// Placeholders, when set, holds the placeholders of absent protected
	// names (the daemon's one registry); without it none are made.
	Placeholders *workspace.Registry
	// Pin, when set, is the run whose sandboxes share this view's
	// placeholders until it ends (Registry.AcquireFor, EndRun), so its
	// steps and tool calls make none anew. "" for a sandbox that holds
	// its own for as long as it lives (a terminal's shell, an MCP server).
	Pin string
	// Log receives what the view notes (grants used, a walk cut short).
	Log *slog.Logger
	// Tsh marks a view that runs tsh (the terminal, a tsh command): it also
	// sees this session's directory (tools.json) and the agent's .d/policy
	// and .d/label, which tsh enforces itself. An agent step or a checked
	// tool the host runs directly needs neither (fewer mounts, faster start).
	Tsh bool
	// Tools says which tool files the view shows (zero: none): an agent
	// step acts only through tool_call frames.
	Tools ToolView
	// ByPath names every bind source of the spec Start builds by its host
	// path instead of a descriptor: for the terminal, whose bwrap ctxterm
	// starts (under systemd no descriptor of the daemon reaches it) and
	// opens each source itself without following a symlink
	// (bwrap.BindByFD). Absent protected names get their placeholders as
	// in any view with a registry.
	ByPath bool
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

// Spec builds the bwrap spec of the view running argv with env, every
// host directory bound by path: for the terminal, whose sandbox is started
// where descriptors cannot be passed. Protected paths found by the walk are
// bound read-only by path, but absent ones get no placeholder, and a path
// may change between the check and bwrap's mount. A view that
// cannot be built gives a spec with no argv, which fails to start.
func (v View) Spec(argv []string, env map[string]string) bwrap.Spec {
	s, h, err := v.build(argv, env, false)
	if err != nil {
		slog.Warn("sandbox view refused", "err", err)
		return bwrap.Spec{}
	}
	h.Started()
	h.Ended()
	return s
}

// Build builds the bwrap spec of the view running argv with env, with every
// host path that becomes a mount — workspace, protected paths and their
// placeholders, worktree gitdirs, .d/mount sources, the agent home and the
// session directory — opened safely and handed to bwrap by descriptor, so
// what was checked is what is mounted. The caller calls
// h.Started() once bwrap started (or failed to) and h.Ended() once the
// sandbox is gone. It walks the workspace: call it off the actor.
func (v View) Build(argv []string, env map[string]string) (bwrap.Spec, *Held, error) {
	return v.buildRetrying(argv, env, true)
}

// buildRetrying is build, walking again when a nested protected path is
// gone from where its walk saw it (a directory moved meanwhile).
func (v View) buildRetrying(argv []string, env map[string]string, byFD bool) (bwrap.Spec, *Held, error) {
	for try := 1; ; try++ {
		s, h, err := v.build(argv, env, byFD)
		if !errors.Is(err, bwrap.ErrMoved) || try == maxMovedTries {
			return s, h, err
		}
	}
}

// maxMovedTries bounds the walks of a view whose protected paths keep
// moving while it is made.
const maxMovedTries = 3

// Visible under /ctx: bin/ and the tool directories (read-only), and the
// agent object itself for executable agents. The agent home is writable at
// /home/agent; the workspace at /workspace with its protected paths
// read-only.
func (v View) build(argv []string, env map[string]string, byFD bool) (spec bwrap.Spec, held *Held, err error) {
	l := v.Layout
	log := v.Log
	if log == nil {
		log = slog.Default()
	}
	h := &Held{}
	defer func() {
		if err != nil {
			h.Ended()
		}
	}()
	s := bwrap.Spec{
		System: true,
		Etc:    etcSnapshot(l),
		Dirs:   []string{layout.SandboxRoot, layout.SandboxHome},
		Env:    env,
		Chdir:  v.WorkDir(),
		Argv:   argv,
	}
	// mount binds f (opened safely) at dst, by descriptor or by its path.
	mount := func(list *[]bwrap.Mount, f *os.File, src, dst string, write bool) {
		h.files = append(h.files, f) // closed by Started
		if byFD {
			*list = append(*list, bwrap.Mount{FD: s.Pass(f), Src: src, Dst: dst, Write: write})
			return
		}
		*list = append(*list, bwrap.Mount{Src: src, Dst: dst, Write: write})
	}
	// The runtime's own tree, opened once: the home and session directories
	// are reached below it without a symlink (the agent writes its home).
	_ = os.MkdirAll(l.Root, 0o755)
	root, err := safefs.Open(resolved(l.Root), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return s, nil, fmt.Errorf("ctx root: %w", err)
	}
	defer root.Close()
	homeRel := relTo(l.Root, l.AgentHome(v.Def.Name))
	if err := mkdirBeneath(root, homeRel); err != nil {
		return s, nil, fmt.Errorf("agent home: %w", err)
	}
	hf, err := safefs.OpenBeneath(root, homeRel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return s, nil, fmt.Errorf("agent home: %w", err)
	}
	mount(&s.Mounts, hf, l.AgentHome(v.Def.Name), layout.SandboxHome, true)
	if v.Tools == AllowedTools || v.Tools == CallTools {
		// spec: V3 — the view is the authority: what policy denies is not there.
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: l.BinDir(), Dst: layout.SandboxRoot + "/bin", Try: true})
		tmpfs, mounts, remount := toolMounts(l, v.Def, v.Tools == CallTools)
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
	g := v.Def.Protect
	if len(g.Writable)+len(g.Creatable) > 0 {
		log.Info("protected names narrowed by .d/protect", "agent", v.Def.Name, "writable", keys(g.Writable), "creatable", keys(g.Creatable))
	}
	if v.Workspace != "" {
		// spec: B1 — the workspace writable at /workspace, every .git in it
		// (and the other protected paths) read-only.
		// The workspace is judged again at every start, by the
		// rules the request was (a request's path is already the real one).
		d, err := workspace.Open(v.Workspace, workspace.Options{Layout: l, Grants: g, Write: true, Resolve: !byFD, Log: log})
		if err != nil {
			return s, nil, err
		}
		p := workspace.Protect(d, g)
		mount(&s.Mounts, d.File, d.Path, layout.SandboxWorkspace, !p.ReadOnly)
		n := len(s.Anchors)
		if err := v.protect(&s, h, d, layout.SandboxWorkspace, p, byFD, mount, log); err != nil {
			return s, nil, err
		}
		h.keepTidy(d, layout.SandboxWorkspace, s.Anchors[n:])
	}
	for _, m := range v.Def.Mounts {
		// .d/mount sources follow the workspace's rules.
		d, err := workspace.Open(m.Src, workspace.Options{Layout: l, Grants: g, Write: m.Write, Resolve: !byFD, What: "mount source", Log: log})
		if err != nil {
			return s, nil, err
		}
		if m.Write {
			p := workspace.Protect(d, g)
			mount(&s.Mounts, d.File, d.Path, m.Dst, !p.ReadOnly)
			n := len(s.Anchors)
			if err := v.protect(&s, h, d, m.Dst, p, byFD, mount, log); err != nil {
				return s, nil, err
			}
			h.keepTidy(d, m.Dst, s.Anchors[n:])
		} else {
			mount(&s.Mounts, d.File, d.Path, m.Dst, false)
			if err := Hide(&s, d, m.Dst); err != nil {
				return s, nil, err
			}
		}
	}
	if pol := v.Def.Net(); pol.Enabled() {
		// spec: V3 — `net` is never the host's network: the sandbox keeps its
		// own namespace and reaches out through the daemon's proxy, which
		// refuses this host and its networks unless `net local` names them.
		s.Egress = &pol
		env := maps.Clone(s.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, pol.Env())
		s.Env = env
	}
	// spec: V3 — the view is the authority: where policy denies
	// agent.update, the control socket is absent, not merely refused
	// (README "Self-iteration").
	if d := DecideUpdate(l, v.Def); !d.Allowed {
		log.Debug("control socket not in the view: agent.update is denied", "agent", v.Def.Name, "layer", d.Layer, "reason", d.Reason)
	} else if _, err := os.Stat(filepath.Dir(l.ControlSocket())); err == nil {
		// The directory holding only the socket, so a restarted daemon's new
		// socket is reachable from a sandbox that outlived the old one.
		s.Mounts = append(s.Mounts, bwrap.Mount{Src: filepath.Dir(l.ControlSocket()), Dst: filepath.Dir(layout.SandboxControlSocket), Try: true})
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
		// review/ holds the runs' workspace snapshots, which undo writes
		// back and git reads on the host; blobs/ the images the owner
		// attached: the host's and the owner's alone. Each is made here,
		// before any process of the view could make it, and bound
		// read-only — not tried: a session whose directories cannot be
		// bound (a link planted there) starts no view.
		owned, rerr := sessionOwned(root, relTo(l.Root, dir))
		if rerr != nil {
			return s, nil, rerr
		}
		if !byFD {
			s.MountsAfter = append(s.MountsAfter,
				bwrap.Mount{Src: dir, Dst: at, Write: true, Try: true},
				bwrap.Mount{Src: filepath.Join(dir, "events.jsonl"), Dst: at + "/events.jsonl", Try: true},
				bwrap.Mount{Src: filepath.Join(dir, "messages.jsonl"), Dst: at + "/messages.jsonl", Try: true},
				bwrap.Mount{Src: filepath.Join(dir, "terminal"), Dst: at + "/terminal", Try: true},
				bwrap.Mount{Src: filepath.Join(dir, "mcp-tools.json"), Dst: at + "/mcp-tools.json", Try: true},
				// segments/: a cluster session's log (docs/cluster.md),
				// made by the owner's activation before any sandbox.
				bwrap.Mount{Src: filepath.Join(dir, "segments"), Dst: at + "/segments", Try: true},
			)
			for i, f := range owned {
				f.Close()
				s.MountsAfter = append(s.MountsAfter, bwrap.Mount{Src: filepath.Join(dir, ownedDirs[i]), Dst: at + "/" + ownedDirs[i]})
			}
		} else if sd, err := safefs.OpenBeneath(root, relTo(l.Root, dir), unix.O_PATH|unix.O_DIRECTORY); err == nil {
			mount(&s.MountsAfter, sd, dir, at, true)
			// mcp-tools.json: the host's MCP listing, read-only like the log.
			// segments/: a cluster session's log, read-only like events.jsonl.
			for _, f := range []string{"events.jsonl", "messages.jsonl", "terminal", "mcp-tools.json", "segments"} {
				if ff, err := safefs.OpenBeneath(sd, f, unix.O_PATH); err == nil {
					mount(&s.MountsAfter, ff, filepath.Join(dir, f), at+"/"+f, false)
				}
			}
			for i, f := range owned {
				mount(&s.MountsAfter, f, filepath.Join(dir, ownedDirs[i]), at+"/"+ownedDirs[i], false)
			}
		} else {
			for _, f := range owned {
				f.Close()
			}
		}
	}
	return s, h, nil
}

// protect binds read-only every protected path the walk found below the
// directory d (bound at dst), with a placeholder for each absent top-level
// name, and hides the runtime's trees inside it (README "What the workspace
// may change"). A directory whose walk was cut short is bound read-only
// whole (the caller did), so it needs no more than the hiding.
func (v View) protect(s *bwrap.Spec, h *Held, d *workspace.Dir, dst string, found workspace.Protection, byFD bool,
	mount func(*[]bwrap.Mount, *os.File, string, string, bool), log *slog.Logger) error {
	// d.File itself is already held (mounted); Held closes it.
	ls := &listed{d: d}
	if err := hide(s, d, dst, ls); err != nil {
		return err
	}
	switch {
	case found.ReadOnly:
		// Fail closed: what the walk did not reach may hold a repository
		// whose config and hooks host git runs (README "What the
		// workspace may change").
		log.Warn("protected-path walk stopped early; bound read-only", "agent", v.Def.Name, "dir", d.Path, "at", dst, "why", found.Truncated)
		h.warnings = append(h.warnings, found.Warning(d, dst, v.Def.Name))
		return nil
	case found.Granted != "":
		log.Warn("protected-path walk stopped early; writable by .d/protect, deeper paths not protected",
			"agent", v.Def.Name, "dir", d.Path, "at", dst, "why", found.Truncated, "grant", found.Granted)
	}
	// Pins: every directory on the way to a nested repository (or to a
	// hidden runtime tree) is bound over itself, writable as it was, so
	// that no sandbox of the workspace can rename or remove it — it is a
	// mount point in each view (EBUSY). Moved, such a directory would take
	// a repository below the walk's depth (one rename, no race), or away
	// from a protection bwrap mounts by path (the anchors catch that one).
	// More than workspace.MaxPins cut the walk short (Protect): only a
	// `partial` grant gets here with them, and keeps the shallowest.
	pins := workspace.PinDirs(found.Entries, d.Hide)
	if len(pins) > workspace.MaxPins {
		pins = pins[:workspace.MaxPins]
	}
	for _, rel := range pins {
		f, err := safefs.OpenBeneath(d.File, rel, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("protected path below %s: %w", filepath.Join(d.Path, rel), bwrap.ErrMoved)
		}
		at := filepath.Join(dst, rel)
		mount(&s.Mounts, f, filepath.Join(d.Path, rel), at, true)
		dir, under, err := ls.find(rel)
		id, ierr := safefs.ID(f)
		if err != nil || ierr != nil {
			return fmt.Errorf("protected path below %s: %w", filepath.Join(d.Path, rel), bwrap.ErrMoved)
		}
		s.Anchors = append(s.Anchors, bwrap.Anchor{Dst: at, Dir: dir, Mounted: id, Under: under, Pin: true})
	}
	for _, e := range found.Entries {
		at := filepath.Join(dst, e.Rel)
		src := filepath.Join(d.Path, e.Rel)
		top := !strings.Contains(e.Rel, "/") || path.Base(e.Rel) == "hooks"
		switch {
		case e.Kind == workspace.KindSymlink:
			// Never followed, never bound: a symlinked .git is only reported.
			continue
		case v.Placeholders != nil && top:
			isDir := workspace.IsDirName(path.Base(e.Rel))
			f, ph, release, err := v.Placeholders.AcquireFor(v.Pin, d.File, e.Rel, isDir) // the run keeps it for its next sandboxes
			if err != nil {
				return fmt.Errorf("protected path %s: %w", src, err)
			}
			h.releases = append(h.releases, release)
			if !ph {
				mount(&s.Mounts, f, src, at, false)
				if err := anchor(s, e, at, f, ls); err != nil {
					return fmt.Errorf("protected path %s: %w", src, err)
				}
				break
			}
			// The placeholder is only the host's mount point: the sandbox
			// sees an absent source over it — nothing below a directory
			// name (ENOENT), an empty unwritable file at a file name — never
			// the placeholder's mode-000 entry (EACCES kills agents that
			// read their config at start).
			f.Close()
			af, apath, err := h.absentSource(v.Layout.Runtime, path.Base(e.Rel))
			if err != nil {
				return fmt.Errorf("protected path %s: %w", src, err)
			}
			mount(&s.Mounts, af, apath, at, false)
			if err := anchor(s, e, at, af, ls); err != nil {
				return fmt.Errorf("protected path %s: %w", src, err)
			}
		case e.Kind == workspace.KindAbsent:
			continue // no placeholder without a registry
		default:
			f, err := safefs.OpenBeneath(d.File, e.Rel, unix.O_PATH)
			if err != nil {
				if nested(e) {
					// Gone from where the walk found it: removed, or its
					// directory moved — then it is somewhere the walk did
					// not look. spec: B1
					return fmt.Errorf("protected path %s: %w", src, bwrap.ErrMoved)
				}
				continue // gone since the walk: a name at the top cannot move out of its view
			}
			mount(&s.Mounts, f, src, at, false)
			if err := anchor(s, e, at, f, ls); err != nil {
				return fmt.Errorf("protected path %s: %w", src, err)
			}
		}
		if e.Rel == ".git" && e.Kind == workspace.KindFile {
			// spec: D8 — a worktree's .git is a file naming its gitdir
			// (and that gitdir's commondir): both read-only as well.
			for _, m := range worktreeGitDirs(v.Layout, d.Path) {
				f, err := safefs.Open(m.Src, unix.O_PATH|unix.O_DIRECTORY)
				if err != nil {
					continue
				}
				if dst != layout.SandboxWorkspace && strings.HasPrefix(m.Dst, layout.SandboxWorkspace+"/") {
					m.Dst = filepath.Join(dst, strings.TrimPrefix(m.Dst, layout.SandboxWorkspace+"/"))
				}
				mount(&s.Mounts, f, m.Src, m.Dst, false)
			}
		}
	}
	return nil
}

// Hide covers the runtime's trees inside d (bound at dst) with a tmpfs
// each: a workspace such as $HOME can contain CTX_ROOT or the runtime
// dir, and the agent could write events.jsonl, its own .d/ controls and
// tools, and read home/<uid>/secrets/. One below a subdirectory of d is
// anchored where Open found it (bwrap.Anchor). spec: B1
func Hide(s *bwrap.Spec, d *workspace.Dir, dst string) error {
	return hide(s, d, dst, &listed{d: d})
}

func hide(s *bwrap.Spec, d *workspace.Dir, dst string, ls *listed) error {
	for i, rel := range d.Hide {
		at := filepath.Join(dst, rel)
		s.TmpfsAfter = append(s.TmpfsAfter, at)
		if !strings.Contains(rel, "/") || i >= len(d.HideIn) {
			continue
		}
		_, under, err := ls.find(rel)
		if err != nil {
			return fmt.Errorf("hidden %s: %w", filepath.Join(d.Path, rel), bwrap.ErrMoved)
		}
		s.Anchors = append(s.Anchors, bwrap.Anchor{Dst: at, Dir: d.HideIn[i], Under: under, Tmpfs: true})
	}
	return nil
}

// listed reads, once each, the listings of the directories below d that
// hold anchored names: the inode number a listing gives a name is what a
// mount there covers (Anchor.Under), the same in the view's listing of
// the same directory whatever the filesystem — stat would show the mount.
type listed struct {
	d    *workspace.Dir
	dirs map[string]listing
}

type listing struct {
	id   safefs.Identity
	inos map[string]uint64
}

// find is the directory holding rel (its identity) and rel's entry in
// its listing.
func (l *listed) find(rel string) (dir, under safefs.Identity, err error) {
	parent := path.Dir(rel)
	li, ok := l.dirs[parent]
	if !ok {
		f, err := safefs.OpenBeneath(l.d.File, parent, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return dir, under, err
		}
		defer f.Close()
		id, err := safefs.ID(f)
		if err != nil {
			return dir, under, err
		}
		li = listing{id: id, inos: map[string]uint64{}}
		if err := safefs.ReadDirentsIno(int(f.Fd()), make([]byte, 8<<10), func(name []byte, ino uint64, _ byte) error {
			li.inos[string(name)] = ino
			return nil
		}); err != nil {
			return dir, under, err
		}
		if l.dirs == nil {
			l.dirs = map[string]listing{}
		}
		l.dirs[parent] = li
	}
	ino, ok := li.inos[path.Base(rel)]
	if !ok {
		return dir, under, unix.ENOENT
	}
	return li.id, safefs.Identity{Dev: li.id.Dev, Ino: ino}, nil
}

// nested reports whether e lies below a subdirectory of the walked
// directory: the directories on its path can be moved, the top cannot (it
// is the mount's own root).
func nested(e workspace.Entry) bool { return strings.Contains(e.Rel, "/") }

// anchor adds a nested protected path's bwrap.Anchor: the view starts
// only if the mount of f at dst sits in the directory the walk found e in,
// over the entry its listing (listed) gives e's name. A name at the top
// needs none — its directory is the mount's root, and renaming the name
// itself is refused (EBUSY) in every view that mounts it. A directory
// that is not the walk's any more fails the build now (walked again)
// rather than the start later. spec: B1
func anchor(s *bwrap.Spec, e workspace.Entry, dst string, f *os.File, ls *listed) error {
	if !nested(e) {
		return nil
	}
	id, err := safefs.ID(f)
	if err != nil {
		return err
	}
	dir, under, err := ls.find(e.Rel)
	if err != nil {
		return fmt.Errorf("%w (%v)", bwrap.ErrMoved, err)
	}
	if dir != e.Dir {
		return bwrap.ErrMoved
	}
	s.Anchors = append(s.Anchors, bwrap.Anchor{Dst: dst, Dir: e.Dir, Mounted: id, Under: under})
	return nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// relTo is p relative to base (both under the same root).
func relTo(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		return p
	}
	return r
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// mkdirBeneath creates rel's missing directories below dir (mode 0700),
// never following a symlink.
// ownedDirs are the directories of a session that only the host and its
// owner write (review snapshots, attached images).
var ownedDirs = []string{"review", "blobs"}

// sessionOwned makes the session directory rel's ownedDirs (0700)
// beneath root and opens them, in that order, with no symbolic link on
// the way; none when the session directory does not exist (nothing of it
// is bound either).
func sessionOwned(root *os.File, rel string) ([]*os.File, error) {
	sd, err := safefs.OpenBeneath(root, rel, unix.O_PATH|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	defer sd.Close()
	var out []*os.File
	for _, name := range ownedDirs {
		f, err := func() (*os.File, error) {
			if err := mkdirBeneath(sd, name); err != nil {
				return nil, err
			}
			return safefs.OpenBeneath(sd, name, unix.O_PATH|unix.O_DIRECTORY)
		}()
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("session %s directory: %w", name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func mkdirBeneath(dir *os.File, rel string) error {
	names, err := safefs.Components(rel)
	if err != nil {
		return err
	}
	cur := dir
	for i, n := range names {
		err := unix.Mkdirat(int(cur.Fd()), n, 0o700)
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("mkdir %s: %w", strings.Join(names[:i+1], "/"), err)
		}
		next, err := safefs.OpenBeneath(cur, n, unix.O_PATH|unix.O_DIRECTORY)
		if cur != dir {
			cur.Close()
		}
		if err != nil {
			return err
		}
		cur = next
	}
	if cur != dir {
		cur.Close()
	}
	return nil
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
