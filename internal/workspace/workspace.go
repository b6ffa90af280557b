// Package workspace validates the host directories a sandbox binds
// writable or read-only — a request's workspace and .d/mount sources, by
// the same rules — opens them safely, finds the protected paths inside
// them, holds the placeholders that keep absent ones from being created,
// and reports what a run changed that runs code on the host.
package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/pathin"
	"github.com/cortexfs/ctx/internal/safefs"
)

// ErrRefused is wrapped by every refusal of a directory (the agent actor
// maps it to bad_request).
var ErrRefused = errors.New("refused")

// Protected names: read-only wherever the walk finds them in a workspace
// (README "What the workspace may change"). .git (file or directory) is
// found to MaxDepth; the others are files or directories something on the
// host runs or loads by itself when a person works in the directory.
// .gitmodules is not listed: git refuses `update = !command` from it, and
// a submodule's own .git is protected like any other.
var Protected = []string{
	".git",
	".mcp.json", ".envrc", ".vscode", ".idea", ".claude", ".codex",
	// Editors and agents a person runs on the host in this directory load
	// these and start the MCP servers (commands) and plugins they name:
	// Zed's context_servers, Cursor's and Gemini CLI's mcpServers,
	// OpenCode's mcp entries and .opencode/plugin code.
	".zed", ".cursor", ".gemini", ".opencode", "opencode.json", "opencode.jsonc",
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
}

// protectedDirs are the names whose placeholder is a directory.
var protectedDirs = []string{".git", ".vscode", ".idea", ".claude", ".codex", ".zed", ".cursor", ".gemini", ".opencode"}

// Grants is the parsed .d/protect of an agent definition: explicit
// exceptions to the rules, each logged when it is used.
type Grants struct {
	Allow     []string        // "allow DIR": DIR may be a workspace or mount source although it is /, the home or an ancestor
	Writable  map[string]bool // "writable NAME": NAME is not protected at all
	Creatable map[string]bool // "creatable NAME": NAME stays read-only where it exists, but may be created where absent
	// Partial: "partial DIR": DIR may be bound writable although its
	// protected-path walk was cut short (Protect), paths past the bound
	// then unprotected.
	Partial []string
}

// ParseGrants parses .d/protect:
//
//	# comment
//	allow DIR        DIR (absolute, clean) may be a workspace or .d/mount source although it is /, the owner's home or an ancestor of it
//	writable NAME    NAME (one of Protected) is writable where it exists and creatable where absent
//	creatable NAME   NAME stays read-only where it exists; where absent it gets no placeholder (`creatable .git` lets `git init` run)
//	partial DIR      DIR (absolute, clean; its real path) is bound writable even when the walk for its protected paths is cut short by a bound
//
// Anything else makes the definition invalid (runs fail closed).
func ParseGrants(b []byte) (Grants, error) {
	g := Grants{Writable: map[string]bool{}, Creatable: map[string]bool{}}
	if len(b) == 0 {
		return g, nil
	}
	if b[len(b)-1] != '\n' || !utf8.Valid(b) || bytes.ContainsAny(b, "\r\x00") {
		return g, errors.New("must be LF-terminated UTF-8 lines")
	}
	for i, ln := range strings.Split(string(b[:len(b)-1]), "\n") {
		f := strings.Fields(ln)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 {
			return g, fmt.Errorf("line %d: want `allow DIR`, `partial DIR`, `writable NAME` or `creatable NAME`", i+1)
		}
		switch f[0] {
		case "allow", "partial":
			if !filepath.IsAbs(f[1]) || filepath.Clean(f[1]) != f[1] {
				return g, fmt.Errorf("line %d: %q is not a clean absolute path", i+1, f[1])
			}
			if f[0] == "allow" {
				g.Allow = append(g.Allow, f[1])
			} else {
				g.Partial = append(g.Partial, f[1])
			}
		case "writable", "creatable":
			if !slices.Contains(Protected, f[1]) {
				return g, fmt.Errorf("line %d: %q is not a protected name (%s)", i+1, f[1], strings.Join(Protected, " "))
			}
			if f[0] == "writable" {
				g.Writable[f[1]] = true
			} else {
				g.Creatable[f[1]] = true
			}
		default:
			return g, fmt.Errorf("line %d: unknown grant %q", i+1, f[0])
		}
	}
	return g, nil
}

// Options say how Open judges a directory.
type Options struct {
	Layout layout.Layout
	// Homes are the owner's home directories; nil: HomeDirs().
	Homes  []string
	Grants Grants
	// Write: the owner must be able to write it (a workspace, an rw mount).
	Write bool
	// Resolve follows symlinks in the path once, before the safe open: a
	// request's workspace as the client sent it (its cwd). Without it a
	// symlink anywhere in the path is refused.
	Resolve bool
	// What names the directory in messages ("workspace", "mount source").
	What string
	Log  *slog.Logger
}

// Dir is a directory opened safely and judged.
type Dir struct {
	File *os.File // O_PATH|O_DIRECTORY: what is mounted is what was checked
	Path string   // its real path, from the descriptor
	// Hide are CTX_ROOT and the runtime dir when the directory contains
	// them: their paths relative to it, to be covered by a tmpfs.
	Hide []string
	// HideIn is, for each of Hide, the directory found holding it: a
	// tmpfs mounted by path below a directory moved meanwhile would hide
	// nothing (bwrap.Anchor).
	HideIn []safefs.Identity
}

// Close closes the descriptor.
func (d *Dir) Close() error { return d.File.Close() }

// HomeDirs are the owner's home directories: $HOME and the password
// database's entry, each with symlinks resolved.
func HomeDirs() []string {
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(os.Getenv("HOME"))
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		add(u.HomeDir)
	}
	return out
}

// Open opens path safely and judges it: absolute, an existing
// directory (the owner can write it when o.Write), no symlink on the way
// (unless o.Resolve), not /, the owner's home or an ancestor of it (unless
// granted), not inside CTX_ROOT or the runtime dir; when it contains
// them, Dir.Hide says where. Errors wrap ErrRefused.
func Open(path string, o Options) (*Dir, error) {
	what := o.What
	if what == "" {
		what = "workspace"
	}
	refuse := func(format string, a ...any) error {
		return fmt.Errorf("%s %q: %s: %w", what, path, fmt.Sprintf(format, a...), ErrRefused)
	}
	if !filepath.IsAbs(path) {
		return nil, refuse("not an absolute path")
	}
	p := filepath.Clean(path)
	if o.Resolve {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, refuse("not an existing directory")
		}
		p = r
	}
	f, err := safefs.Open(p, unix.O_PATH|unix.O_DIRECTORY)
	switch {
	case errors.Is(err, safefs.ErrSymlink):
		return nil, refuse("a symlink on the way (give the real path)")
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, os.ErrNotExist):
		return nil, refuse("not an existing directory")
	case err != nil:
		return nil, refuse("%v", err)
	}
	d := &Dir{File: f}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	if d.Path, err = safefs.RealPath(f); err != nil {
		return nil, refuse("%v", err)
	}
	if o.Write && unix.Access("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.W_OK) != nil {
		return nil, refuse("not writable by the owner")
	}
	l := o.Layout
	// Inside the runtime's own trees: never (an agent would write its
	// session logs, controls and tools). One climb from the directory
	// answers for both.
	var chain []safefs.Identity
	for _, own := range []string{l.Root, l.Runtime} {
		if own == "" {
			continue
		}
		oid, err := safefs.StatID(own)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil && chain == nil {
			chain, err = safefs.Ancestors(f)
		}
		if err != nil {
			return nil, refuse("%v", err)
		}
		if slices.Contains(chain, oid) {
			return nil, refuse("inside %s, which only the runtime writes", own)
		}
	}
	// /, the owner's home or an ancestor of it: refused unless granted,
	// judged by identity.
	id, err := safefs.ID(f)
	if err != nil {
		return nil, refuse("%v", err)
	}
	homes := o.Homes
	if homes == nil {
		homes = HomeDirs()
	}
	var why string
	if rootID, err := safefs.StatID("/"); err == nil && rootID == id {
		why = "the root directory"
	}
	for _, h := range homes {
		if why != "" {
			break
		}
		hf, err := safefs.Open(h, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			continue
		}
		in, _ := safefs.Within(hf, id)
		hf.Close()
		if in {
			why = "the owner's home directory " + h + " or an ancestor of it"
		}
	}
	if why != "" {
		granted := ""
		for _, a := range o.Grants.Allow {
			if aid, err := safefs.StatID(a); err == nil && aid == id {
				granted = a
			}
		}
		if granted == "" {
			return nil, refuse("%s: its shell rc files, ~/.ssh and autostart files would be writable; "+
				"allow it explicitly with `allow %s` in the agent's .d/protect", why, d.Path)
		}
		if o.Log != nil {
			o.Log.Warn("protected directory allowed by .d/protect", "what", what, "path", d.Path, "grant", "allow "+granted, "why", why)
		}
	}
	// Containing the runtime's trees: hidden, at their real relative path,
	// confirmed by identity (a path that does not lead back is refused).
	for _, own := range []string{l.Root, l.Runtime} {
		if own == "" {
			continue
		}
		of, err := safefs.Open(resolved(own), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			continue // missing: nothing to hide
		}
		in, err := safefs.Within(of, id)
		if err != nil || !in {
			of.Close()
			continue
		}
		oid, _ := safefs.ID(of)
		real, err := safefs.RealPath(of)
		of.Close()
		rel, inside := pathin.Rel(d.Path, real)
		if err != nil || !inside {
			return nil, refuse("contains %s at a path that cannot be hidden", own)
		}
		// The directory holding it, then it in that directory: the
		// identity kept is of a directory that held it.
		holder, err := safefs.OpenBeneath(f, filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return nil, refuse("contains %s at a path that cannot be hidden: %v", own, err)
		}
		check, err := safefs.OpenBeneath(holder, filepath.Base(rel), unix.O_PATH|unix.O_DIRECTORY)
		hid, _ := safefs.ID(holder)
		holder.Close()
		if err != nil {
			return nil, refuse("contains %s at a path that cannot be hidden: %v", own, err)
		}
		cid, _ := safefs.ID(check)
		check.Close()
		if cid != oid {
			return nil, refuse("contains %s at a path that cannot be hidden", own)
		}
		d.Hide = append(d.Hide, rel)
		d.HideIn = append(d.HideIn, hid)
	}
	ok = true
	return d, nil
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
