// Package mcpinstall resolves how an MCP server is installed on the host,
// for `ctx mcp add` without linking the runtime: a command to
// an absolute path, an npm command to node plus its real script and the
// read-only binds of its installation, and `npx PKG` refused unless PKG is
// installed. It also names where a server's --env values live.
package mcpinstall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/pathin"
)

// ErrDownload refuses a command that would download code at run time.
var ErrDownload = errors.New("refused: the command would download code when the server starts")

// Resolver turns `ctx mcp add NAME -- COMMAND ARGS…` into a declaration:
// COMMAND resolved to an absolute host path (through the caller's PATH, at
// add time, symlinks resolved), the interpreter of a script, and the
// read-only binds of the server's own installation. Fields are for tests.
type Resolver struct {
	LookPath func(string) (string, error)
	// NpmRoot returns the global node_modules directory (`npm root -g`).
	NpmRoot func() (string, error)
}

// DefaultResolver uses the process's PATH and npm.
func DefaultResolver() Resolver {
	return Resolver{LookPath: exec.LookPath, NpmRoot: func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "npm", "root", "-g").Output()
		if err != nil {
			return "", fmt.Errorf("npm root -g: %w", err)
		}
		return strings.TrimSpace(string(out)), nil
	}}
}

// Resolve builds the declaration of a stdio server.
func (r Resolver) Resolve(command string, args []string) (*mcpconf.Server, error) {
	if filepath.Base(command) == "npx" {
		return r.npx(args)
	}
	if fix, ok := downloaders(command, args); ok {
		return nil, fmt.Errorf("%s %s: %w. %s", command, strings.Join(args, " "), ErrDownload, fix)
	}
	path := command
	if !strings.Contains(command, "/") {
		p, err := r.LookPath(command)
		if err != nil {
			return nil, fmt.Errorf("%s: not found on PATH: %w", command, err)
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("%s (%s): not an executable regular file", command, real)
	}
	s := &mcpconf.Server{Command: real, Args: args}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil && isPython(abs) {
		// A virtualenv's interpreter (VENV/bin/python, a symlink to the
		// system's): Python finds its environment from the path it was run
		// by (VENV/pyvenv.cfg), so that path is kept, not resolved, and the
		// virtualenv — its site-packages — is bound.
		if venv := venvRoot(filepath.Join(dir, filepath.Base(abs))); venv != "" {
			s.Command = filepath.Join(dir, filepath.Base(abs))
			s.Binds = append(s.Binds, venv)
			s.Binds = append(s.Binds, nodeInstall(real)...) // the base interpreter's installation
		}
	}
	if interp := shebang(real); interp != "" && !isNode(interp) {
		// A script of a virtualenv (a console script, #!VENV/bin/python):
		// its interpreter and packages are the virtualenv's.
		f := strings.Fields(interp)
		if venv := venvRoot(f[0]); venv != "" && filepath.IsAbs(f[0]) {
			s.Binds = append(s.Binds, venv)
			if base, err := filepath.EvalSymlinks(f[0]); err == nil {
				s.Binds = append(s.Binds, nodeInstall(base)...)
			}
		}
	}
	if interp := shebang(real); interp != "" && isNode(interp) {
		// A node script (an npm bin such as node_modules/.bin/mcp-server-x):
		// run node on the script itself, with node's installation and the
		// package's node_modules bound.
		node, err := r.node(interp)
		if err != nil {
			return nil, err
		}
		s.Command = node
		s.Args = append([]string{real}, args...)
		s.Binds = append(s.Binds, nodeInstall(node)...)
		if pkg := packageDir(real); pkg != "" {
			s.Binds = append(s.Binds, pkg)
		}
	}
	if isNode(real) {
		// `node /path/dist/index.js` (the form existing configs hold): the
		// script imports its siblings and dependencies, so the package it
		// belongs to is bound, not only the one file.
		s.Binds = append(s.Binds, nodeInstall(real)...)
		if i := scriptArg(args); i >= 0 {
			script, err := filepath.Abs(args[i])
			if err != nil {
				return nil, err
			}
			rs, err := filepath.EvalSymlinks(script)
			if err != nil {
				return nil, fmt.Errorf("%s: the script %s: %w", command, args[i], err)
			}
			if st, err := os.Stat(rs); err != nil || !st.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: the script %s (%s) is not a regular file", command, args[i], rs)
			}
			// The sandbox's working directory is not the caller's: the
			// script is named by its real absolute path.
			s.Args = append(append(append([]string{}, args[:i]...), rs), args[i+1:]...)
			args = s.Args
			if pkg := packageDir(rs); pkg != "" {
				s.Binds = append(s.Binds, pkg)
			}
		}
	}
	for _, a := range args {
		// A file an argument names (a script, a config) is bound; a
		// directory is not — a server sees directories through the view.
		if filepath.IsAbs(a) && filepath.Clean(a) == a && !IsSystem(a) {
			if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() && mcpconf.CheckBind(a) == nil {
				s.Binds = append(s.Binds, a)
			}
		}
	}
	s.Binds = dedupe(s.Binds)
	return s, nil
}

// npx accepts `npx [-y] PKG ARGS…` only when PKG is installed globally,
// and runs its installed bin instead; otherwise it refuses, naming the
// install command.
func (r Resolver) npx(args []string) (*mcpconf.Server, error) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i == len(args) {
		return nil, fmt.Errorf("npx without a package: %w", ErrDownload)
	}
	pkg, rest := args[i], args[i+1:]
	name := pkg
	if at := strings.LastIndex(pkg, "@"); at > 0 {
		name = pkg[:at] // @scope/pkg@1.2 → @scope/pkg
	}
	refuse := func(why string) (*mcpconf.Server, error) {
		bin := "mcp-server-x"
		if b := filepath.Base(name); b != "" {
			bin = b
		}
		return nil, fmt.Errorf("npx %s: %s: %w. Install it first:\n  npm install -g %s\nthen add its installed command instead of npx, e.g.:\n  ctx mcp add NAME -- %s",
			pkg, why, ErrDownload, pkg, strings.Join(append([]string{bin}, rest...), " "))
	}
	if r.NpmRoot == nil {
		return refuse("npm is not available to find it")
	}
	root, err := r.NpmRoot()
	if err != nil {
		return refuse(err.Error())
	}
	dir := filepath.Join(root, name)
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return refuse("it is not installed")
	}
	var pj struct {
		Name string          `json:"name"`
		Bin  json.RawMessage `json:"bin"`
	}
	if json.Unmarshal(data, &pj) != nil {
		return refuse("its package.json cannot be read")
	}
	var bin string
	var one string
	var many map[string]string
	switch {
	case json.Unmarshal(pj.Bin, &one) == nil && one != "":
		bin = one
	case json.Unmarshal(pj.Bin, &many) == nil && len(many) == 1:
		for _, v := range many {
			bin = v
		}
	case len(many) > 1:
		base := filepath.Base(name)
		bin = many[base]
	}
	if bin == "" {
		return refuse("it names no single command to run")
	}
	return r.Resolve(filepath.Join(dir, bin), rest)
}

// node resolves a script's node interpreter to its real path.
func (r Resolver) node(interp string) (string, error) {
	p := interp
	if f := strings.Fields(interp); len(f) >= 2 && filepath.Base(f[0]) == "env" {
		p = f[len(f)-1]
	}
	if !filepath.IsAbs(p) {
		lp, err := r.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("the script needs %s, which is not on PATH: %w", p, err)
		}
		p = lp
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("node: %w", err)
	}
	return real, nil
}

// scriptArg is the index of node's script among its arguments: the first
// that is not an option (an option taking a value, such as -r MODULE,
// skips that value), or -1 (node -e CODE, or none).
func scriptArg(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-e" || a == "--eval" || a == "-p" || a == "--print" || a == "--":
			return -1
		case a == "-r" || a == "--require" || a == "--import" || a == "--loader" || a == "--experimental-loader":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return i
		}
	}
	return -1
}

// isPython reports whether path names a Python interpreter (python,
// python3, python3.12).
func isPython(path string) bool {
	b := filepath.Base(path)
	return b == "python" || strings.HasPrefix(b, "python3")
}

// venvRoot is the virtualenv an interpreter path lies in (VENV/bin/NAME
// with VENV/pyvenv.cfg), when it may be bound; else "".
func venvRoot(interp string) string {
	bin := filepath.Dir(interp)
	if filepath.Base(bin) != "bin" {
		return ""
	}
	root, err := filepath.EvalSymlinks(filepath.Dir(bin))
	if err != nil || IsSystem(root+"/") || mcpconf.CheckBind(root) != nil {
		return ""
	}
	if st, err := os.Stat(filepath.Join(root, "pyvenv.cfg")); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return root
}

func isNode(interp string) bool {
	f := strings.Fields(interp)
	if len(f) == 0 {
		return false
	}
	last := filepath.Base(f[len(f)-1])
	return last == "node" || last == "nodejs"
}

// shebang returns the interpreter line of a script, or "".
func shebang(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("#!")) {
		return ""
	}
	line, _, _ := bytes.Cut(buf[2:], []byte("\n"))
	return strings.TrimSpace(string(line))
}

// nodeInstall is an interpreter's installation (node's, or the Python a
// virtualenv was made from) when it is not a system package: the prefix
// above its bin/ directory (lib/node_modules or lib/python3.X and all).
func nodeInstall(node string) []string {
	if IsSystem(node) {
		return nil
	}
	prefix := filepath.Dir(filepath.Dir(node))
	if mcpconf.CheckBind(prefix) != nil {
		return []string{node}
	}
	return []string{prefix}
}

// packageDir is what a node script of an npm package needs bound: the
// outermost node_modules directory above it (the package and every
// dependency npm hoisted beside it), else the directory holding the
// nearest package.json.
func packageDir(script string) string {
	outer := ""
	for d := filepath.Dir(script); d != "/" && d != "."; d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			outer = d
		}
	}
	if outer != "" && !IsSystem(outer+"/") && mcpconf.CheckBind(outer) == nil {
		return outer
	}
	for d := filepath.Dir(script); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "package.json")); err == nil {
			if IsSystem(d+"/") || mcpconf.CheckBind(d) != nil {
				return ""
			}
			return d
		}
	}
	return ""
}

// dedupe drops repeated binds and those inside another bind (already
// visible through it).
func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if seen[s] {
			continue
		}
		seen[s] = true
		covered := false
		for _, o := range in {
			if o != s && pathin.Inside(s, o) {
				covered = true
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}

// EnvFile is where the values of a server's --env live:
// home/<uid>/secrets/mcp/<name>.env, owner-only.
func EnvFile(l layout.Layout, name string) string {
	return filepath.Join(l.UserHome(), "secrets", "mcp", name+".env")
}

// systemDirs are visible in every sandbox already (bwrap.Spec.System).
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/"}

// IsSystem reports whether p lies in a directory every sandbox shows
// already: it needs no bind of its own.
func IsSystem(p string) bool {
	for _, d := range systemDirs {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}

// downloaders recognises the other runners that fetch a package when the
// server starts (uvx, uv tool run, pipx run, bunx, pnpm dlx, yarn dlx)
// and says what to run instead.
func downloaders(command string, args []string) (string, bool) {
	pkg := "PKG"
	first := func(a []string) {
		for _, x := range a {
			if !strings.HasPrefix(x, "-") {
				pkg = x
				return
			}
		}
	}
	base := filepath.Base(command)
	switch {
	case base == "uvx", base == "uv" && len(args) >= 2 && args[0] == "tool" && args[1] == "run":
		if base == "uv" {
			args = args[2:]
		}
		first(args)
		return fmt.Sprintf("Install it first:\n  uv tool install %s\nthen add its installed command (in ~/.local/bin), e.g.:\n  ctx mcp add NAME -- %s", pkg, pkg), true
	case base == "pipx" && len(args) >= 1 && args[0] == "run":
		first(args[1:])
		return fmt.Sprintf("Install it first:\n  pipx install %s\nthen add its installed command, e.g.:\n  ctx mcp add NAME -- %s", pkg, pkg), true
	case base == "bunx", (base == "pnpm" || base == "yarn") && len(args) >= 1 && args[0] == "dlx":
		if base != "bunx" {
			args = args[1:]
		}
		first(args)
		return fmt.Sprintf("Install it first:\n  npm install -g %s\nthen add its installed command instead, e.g.:\n  ctx mcp add NAME -- mcp-server-x", pkg), true
	}
	return "", false
}
