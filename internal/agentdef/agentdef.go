// Package agentdef reads, validates, creates and edits agent definitions:
// the agent object agent/<name> and its control files agent/<name>.d/*
// (spec: V1, X1, A1, K2, W1; interfaces.md "Locations").
package agentdef

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/ident"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
	"github.com/cortexfs/ctx/internal/netpolicy"
	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/workspace"
	"golang.org/x/sys/unix"
)

// Executable-agent ABIs: ABI is sdk-envelope-v1 (X1), the default of
// --exec; ABIACP is an Agent Client Protocol agent that
// ctx runs as its ACP client over stdin/stdout.
const (
	ABI    = "sdk-envelope-v1"
	ABIACP = "acp-v1"
)

// ABIs lists the valid .d/abi values.
var ABIs = []string{ABI, ABIACP}

// ErrInvalid is wrapped by every validation failure of a definition.
var ErrInvalid = errors.New("invalid agent definition")

// ErrNoSuchAgent means the agent object does not exist.
var ErrNoSuchAgent = errors.New("no such agent")

// Kind of agent.
const (
	KindExec  = "exec"
	KindModel = "model"
)

// Controls is the list of control files a definition may carry.
var Controls = []string{"abi", "acp.json", "approval", "tools", "model", "window", "policy", "label", "root", "cwd",
	"env", "path", "mount", "protect", "uid", "gid", "groups", "limits", "system.md", "prompt.template.md"}

// MaxControl bounds one control file.
const MaxControl = 64 << 10

// KV is one env entry.
type KV struct{ Key, Value string }

// Def is a loaded definition: a snapshot, re-read for every run.
type Def struct {
	Name string
	Kind string
	// ABI is .d/abi of an executable agent (ABI or ABIACP); "" for a model agent.
	ABI string
	// ACP is .d/acp.json of an acp-v1 agent (nil: run the agent object
	// with no arguments).
	ACP      *ACPLaunch
	Object   string // host path of agent/<name>
	Control  string // host path of agent/<name>.d
	Approval string // auto | ask
	Env      []KV
	Tools    []string // extra direct-native names (K2)
	CTXPath  string   // the agent's CTX_PATH (sandbox paths)
	Models   []string
	Window   []byte // raw; validated by the window package
	Label    string
	Cwd      string
	Root     string
	// Identity of tools for the Linux mode-bit layer (V3): .d/uid, .d/gid,
	// .d/groups; the daemon's own identity where absent.
	UID, GID int
	Groups   []int
	// Mounts and Network from .d/mount (see ParseMount): Network is the
	// `net` line, NetLocal the `net local HOST:PORT` lines.
	Mounts   []MountEntry
	Network  bool
	NetLocal []netip.AddrPort
	// Limits of every run, from .d/limits (limits.Default where absent;
	// "Limits per run").
	Limits limits.Limits
	// Protect is .d/protect: explicit, logged exceptions to the protected
	// paths and directories.
	Protect workspace.Grants
}

// Net is what the agent's sandboxes may reach (.d/mount `net`, `net local`).
func (d *Def) Net() netpolicy.Policy {
	return netpolicy.Policy{Public: d.Network, Local: d.NetLocal}
}

// Load reads and validates a definition: agent/<name> and agent/<name>.d/,
// the definition layer. Errors wrap ErrNoSuchAgent or ErrInvalid. spec: L1
func Load(l layout.Layout, name string) (*Def, error) {
	if err := layout.CheckName("agent", name); err != nil {
		return nil, err
	}
	d := &Def{Name: name, Object: l.AgentObject(name), Control: l.AgentControl(name), Approval: "auto", CTXPath: l.DefaultCTXPath()}
	st, err := os.Lstat(d.Object)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent %q: %w", name, ErrNoSuchAgent)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("agent %q: %s is not a regular file (symlinks are refused): %w", name, d.Object, ErrInvalid)
	}
	d.UID, d.GID, d.Groups = creds()
	d.Limits = limits.Default
	// Control files are re-read for every run (U6): the directory is
	// listed once and only the names it holds are opened, below its
	// descriptor — not one open, mostly failing, per control name.
	ctl, err := openControls(d.Control)
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", name, err)
	}
	defer ctl.close()
	for _, c := range controls {
		if c.name == "" {
			err = c.parse(d, nil)
		} else {
			b, rerr := ctl.read(c.name)
			switch {
			case errors.Is(rerr, fs.ErrNotExist):
				continue
			case rerr != nil:
				return nil, fmt.Errorf("agent %q: %w", name, rerr)
			}
			err = c.parse(d, b)
		}
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", name, err)
		}
	}
	b, err := ctl.read("protect")
	if d.Protect, err = parseProtect(b, err); err != nil {
		return nil, fmt.Errorf("agent %q: %w", name, err)
	}
	if d.Root != "" && d.Root != "/" {
		// A narrower root is not built yet; ignoring it would widen the view,
		// so the definition fails closed.
		return nil, fmt.Errorf("agent %q: .d/root %q: only / is supported: %w", name, d.Root, ErrInvalid)
	}
	if d.Cwd != "" && !filepath.IsAbs(d.Cwd) {
		return nil, fmt.Errorf("agent %q: .d/cwd %q: not absolute: %w", name, d.Cwd, ErrInvalid)
	}
	return d, nil
}

// ReadProtect reads the grants of .d/protect in the control directory
// ctl (none when absent). Errors wrap ErrInvalid.
func ReadProtect(ctl string) (workspace.Grants, error) {
	return parseProtect(ReadControl(filepath.Join(ctl, "protect")))
}

func parseProtect(b []byte, err error) (workspace.Grants, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return workspace.ParseGrants(nil)
	}
	if err != nil {
		return workspace.Grants{}, err
	}
	g, err := workspace.ParseGrants(b)
	if err != nil {
		return g, fmt.Errorf(".d/protect: %v: %w", err, ErrInvalid)
	}
	return g, nil
}

// ReadControl reads one control file safely: never through a symlink,
// never blocking on a FIFO, regular files only, at most MaxControl bytes;
// each refusal wraps ErrInvalid, a missing file fs.ErrNotExist. The one
// reader of control files (window's setter used its own); Load reads a
// definition's files the same way below one descriptor (controlDir).
func ReadControl(path string) ([]byte, error) {
	return readControlAt(unix.AT_FDCWD, path, path)
}

// readControlAt is ReadControl of rel below the directory descriptor dirfd
// (path names it in errors). O_NOFOLLOW: a symlink is refused, never
// followed; O_NONBLOCK: a FIFO cannot block the open (it is then refused
// as not a regular file); at most MaxControl+1 bytes are read.
func readControlAt(dirfd int, rel, path string) ([]byte, error) {
	b, err := safefs.ReadRegularAt(dirfd, rel, path, MaxControl+1)
	if err != nil {
		return nil, controlErr(path, err)
	}
	if len(b) > MaxControl {
		return nil, fmt.Errorf("%s: larger than %d bytes: %w", path, MaxControl, ErrInvalid)
	}
	return b, nil
}

// controlErr says why the control file at path was refused.
func controlErr(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s: a symlink (control files are never followed): %w", path, ErrInvalid)
	case errors.Is(err, safefs.ErrNotRegular):
		return fmt.Errorf("%s: not a regular file: %w", path, ErrInvalid)
	}
	return err
}

// creds is the process's effective uid, gid and groups, read once: a
// daemon's never change, and Load runs at every run's start.
func creds() (uid, gid int, groups []int) {
	c := procCreds()
	return c.uid, c.gid, slices.Clone(c.groups)
}

var procCreds = sync.OnceValue(func() (c struct {
	uid, gid int
	groups   []int
}) {
	c.groups, _ = os.Getgroups()
	c.uid, c.gid = os.Geteuid(), os.Getegid()
	return c
})

// controlDir is a definition's control directory as Load reads it: the
// names it held when listed, each read below its descriptor as
// ReadControl reads a path. No directory: every file is absent. The
// descriptor is a plain one, not an *os.File: a run's start reads it, and
// an *os.File of a directory costs five syscalls more (the poller's
// registration, and blocking mode set back for Fd).
type controlDir struct {
	fd    int // -1: no directory
	path  string
	names map[string]bool
}

func openControls(path string) (*controlDir, error) {
	c := &controlDir{fd: -1, path: path}
	// O_DIRECTORY: anything else in its place is refused at once (a
	// FIFO never blocks the open).
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case errors.Is(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("%s: not a directory: %w", path, ErrInvalid)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	c.fd, c.names = fd, make(map[string]bool, 16)
	if err := safefs.ReadDirents(fd, make([]byte, 8<<10), func(name []byte, _ byte) error {
		c.names[string(name)] = true
		return nil
	}); err != nil {
		c.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// read is ReadControl of the directory's file name (fs.ErrNotExist when
// the listing did not hold it).
func (c *controlDir) read(name string) ([]byte, error) {
	path := filepath.Join(c.path, name)
	if !c.names[name] {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return readControlAt(c.fd, name, path)
}

func (c *controlDir) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// OneLine validates a one-line control file: exactly one LF-terminated line,
// no CR, no NUL, valid UTF-8. It returns the line without its LF.
func OneLine(b []byte) (string, error) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return "", errors.New("must be exactly one LF-terminated line")
	}
	s := string(b[:len(b)-1])
	if s == "" || strings.ContainsAny(s, "\n\r\x00") || !utf8.ValidString(s) {
		return "", errors.New("must be exactly one non-empty LF-terminated line")
	}
	return s, nil
}

// Lines parses a one-value-per-line file (tools, groups, model). Every line
// must be LF-terminated and pass check; blank lines are refused; duplicates too.
func Lines(b []byte, check func(string) error) ([]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[len(b)-1] != '\n' {
		return nil, errors.New("last line is not LF-terminated")
	}
	var out []string
	seen := map[string]bool{}
	for i, ln := range bytes.Split(b[:len(b)-1], []byte("\n")) {
		s := string(ln)
		if err := check(s); err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		if seen[s] {
			return nil, fmt.Errorf("line %d: duplicate %q", i+1, s)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}

// Env keys are `^[A-Z_][A-Z0-9_]*$`, checked by byte class (ident: no
// regexp compiled at every client's start).
var (
	envKeyFirst = ident.NewClass("A-Z_")
	envKeyRest  = ident.NewClass("A-Z0-9_")
)

// ParseEnv parses .d/env: KEY=VALUE lines, KEY matching [A-Z_][A-Z0-9_]* and
// not starting with CTX_; the value is literal (no expansion, no quotes).
func ParseEnv(b []byte) ([]KV, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[len(b)-1] != '\n' {
		return nil, errors.New("last line is not LF-terminated")
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 || bytes.IndexByte(b, '\r') >= 0 {
		return nil, errors.New("must be UTF-8 text without NUL or CR")
	}
	var out []KV
	seen := map[string]bool{}
	for i, ln := range strings.Split(string(b[:len(b)-1]), "\n") {
		k, v, ok := strings.Cut(ln, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: want KEY=VALUE", i+1)
		case !ident.Valid(k, envKeyFirst, envKeyRest, -1):
			return nil, fmt.Errorf("line %d: key %q must match [A-Z_][A-Z0-9_]*", i+1, k)
		case strings.HasPrefix(k, "CTX_"):
			return nil, fmt.Errorf("line %d: key %q: CTX_ variables are runtime-held", i+1, k)
		case seen[k]:
			return nil, fmt.Errorf("line %d: duplicate key %q", i+1, k)
		}
		seen[k] = true
		out = append(out, KV{k, v})
	}
	return out, nil
}

// A model is `^[a-z0-9][a-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._:/-]*$`: a
// provider, a slash, the provider's model name.
var (
	providerFirst = ident.NewClass("a-z0-9")
	providerRest  = ident.NewClass("a-z0-9-")
	modelFirst    = ident.NewClass("A-Za-z0-9")
	modelRest     = ident.NewClass("A-Za-z0-9._:/-")
)

func checkModel(s string) error {
	provider, model, ok := strings.Cut(s, "/")
	if !ok || !ident.Valid(provider, providerFirst, providerRest, -1) || !ident.Valid(model, modelFirst, modelRest, -1) {
		return fmt.Errorf("model %q: want provider/model", s)
	}
	return nil
}

// CheckCTXPath validates a CTX_PATH value: absolute, clean directories separated by colons.
func CheckCTXPath(v string) error {
	for _, d := range strings.Split(v, ":") {
		if d == "" || !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return fmt.Errorf("CTX_PATH entry %q: not a clean absolute directory", d)
		}
	}
	return nil
}

// OpenWorkspace judges a workspace for agent, the one rule set for the
// agent socket and the terminal: an absolute existing
// directory the owner can write, its own path resolved, then opened without
// a symlink; not /, the owner's home or an ancestor of it unless the
// agent's .d/protect allows it; not inside CTX_ROOT or the runtime dir
// (workspace.Open). An invalid .d/protect grants nothing. The caller
// closes the Dir and uses its Path (the real path) from then on.
func OpenWorkspace(l layout.Layout, agent, path string, log *slog.Logger) (*workspace.Dir, error) {
	g, err := ReadProtect(l.AgentControl(agent))
	if err != nil {
		g, _ = workspace.ParseGrants(nil) // the run fails on the invalid file anyway
	}
	return workspace.Open(path, workspace.Options{Layout: l, Grants: g, Write: true, Resolve: true, Log: log})
}
