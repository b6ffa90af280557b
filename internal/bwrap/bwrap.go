// Package bwrap builds the bubblewrap argv shared by every sandboxed start:
// executable-agent steps, tool calls and terminals. It only builds argv (and
// the memory file the environment reaches bwrap through); it starts
// nothing, so it is tested by the argv it returns.
package bwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/netpolicy"
	"github.com/cortexfs/ctx/internal/safefs"
)

// DefaultPath is where bwrap is looked up. It is never looked up through an
// agent's (or the daemon's) PATH: the daemon may be configured with
// CTX_BWRAP, read once at daemon start, never from an agent environment.
const DefaultPath = "/usr/bin/bwrap"

// ErrUnavailable is wrapped when bwrap is missing or cannot build a sandbox.
var ErrUnavailable = errors.New("sandbox unavailable")

// Find returns the configured bwrap binary: configured (from the daemon's own
// configuration) if set, else DefaultPath. It checks the file is a regular
// executable. It never consults PATH.
func Find(configured string) (string, error) {
	p := configured
	if p == "" {
		p = DefaultPath
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("bwrap %q: not an absolute path: %w", p, ErrUnavailable)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("bwrap: %v (install bubblewrap, e.g. apt-get install bubblewrap): %w", err, ErrUnavailable)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("bwrap %s: not an executable file: %w", p, ErrUnavailable)
	}
	return p, nil
}

// Mount is one bind in the sandbox.
type Mount struct {
	Src, Dst string
	Write    bool // read-write bind; otherwise read-only
	Try      bool // skip silently when Src is missing
	// FD, when not 0, binds this descriptor (a number in bwrap's process,
	// from Spec.Pass) instead of Src: --bind-fd/--ro-bind-fd, so what the
	// host checked is what is mounted. Src is then only a label.
	FD int
}

// FDMount binds descriptor FD read-only at Dst.
type FDMount struct {
	FD  int
	Dst string
}

// Spec describes one sandbox. The zero value is the strictest sandbox:
// nothing visible but what is listed, no network, its own PID namespace.
type Spec struct {
	// System binds the host's /usr (and the /bin, /lib*, /sbin links or
	// dirs) and a minimal /etc read-only, so ordinary programs run.
	System bool
	// Etc, when set with System, is a host directory holding a snapshot of
	// the minimal /etc (see sandbox.EnsureEtc), bound read-only at /etc in
	// one mount instead of one mount per file (each costs ~0.15 ms).
	Etc string
	// Mounts in order; later mounts stack over earlier ones (a read-only
	// .git over a writable workspace).
	Mounts []Mount
	// FDMounts bind already-open descriptors (numbers in bwrap's process)
	// read-only, after Mounts: the checked tool file itself, so nothing can
	// be swapped in between the check and the exec.
	FDMounts []FDMount
	// Tmpfs directories created empty and writable.
	Tmpfs []string
	// Dirs created (empty) inside the sandbox, e.g. mount points' parents.
	Dirs []string
	// TmpfsAfter and MountsAfter are stacked last, over everything above
	// (hiding other sessions, re-binding the session log read-only).
	TmpfsAfter  []string
	MountsAfter []Mount
	// Env is the whole environment of the sandboxed program: bwrap clears
	// its own and sets exactly these. spec: X11, B3
	// The values never go on bwrap's argv, which every local user reads
	// (ps, /proc/PID/cmdline — the sandbox's own /proc/1/cmdline too):
	// they reach bwrap through descriptor EnvFD (see PassEnv), read as
	// more arguments (--args). A spec with Env and no EnvFD is refused.
	Env map[string]string
	// EnvFD is the descriptor (from PassEnv) holding Env's --setenv
	// arguments, NUL-separated.
	EnvFD int
	// Chdir is the working directory inside the sandbox.
	Chdir string
	// Network keeps the host network; otherwise --unshare-net. Agent
	// sandboxes never set it: `net` is Egress.
	Network bool
	// Egress, when set, is what a `net` sandbox may reach: it keeps a
	// network namespace of its own (--unshare-net, whatever Network says)
	// and the starter (internal/proc) connects it through the daemon's
	// proxy (internal/egress) before it runs.
	Egress *netpolicy.Policy
	// Anchors are protected mounts whose destination was found by a walk
	// of the host directory they are in: the starter (internal/proc)
	// checks, once the view's mounts are made and before anything inside
	// runs, that each is where the walk found it (Anchor). spec: B1
	Anchors []Anchor
	// MapUser runs the program as UID/GID inside a new user namespace.
	MapUser  bool
	UID, GID int
	// InfoFD and BlockFD are descriptor numbers in bwrap's process (0: unused).
	InfoFD, BlockFD int
	// Argv is the program and its arguments, as seen inside the sandbox.
	Argv []string
	// Files are the descriptors bwrap's process inherits, numbered from 3
	// in order (Pass appends one and returns its number). The starter
	// (internal/proc) hands them to bwrap as its extra files.
	Files []*os.File
	// SeccompFD, when not 0, is the descriptor (from Pass) holding the
	// seccomp BPF program bwrap installs before it runs Argv (--seccomp).
	SeccompFD int
	// OutliveParent drops --die-with-parent: for a sandbox that must
	// survive its starter. The zero value keeps it.
	OutliveParent bool
	// SharedSession drops --new-session: the program stays in its
	// starter's session and keeps its controlling terminal. Only the
	// terminal's shell needs it (its host, ctxterm, holds the PTY outside
	// the sandbox); what the shell runs gets a new session from tsh, and
	// TIOCSTI is refused by seccomp. The zero value keeps
	// --new-session.
	SharedSession bool
	// AsPID1 runs the program as PID 1 of the sandbox's PID namespace
	// (--as-pid-1, no bwrap reaper): kill(-1) from inside never reaches it
	// and signals from inside reach it only where it installed a handler.
	// The program must reap orphans itself (tsh does when it is PID 1).
	AsPID1 bool
	// RemountRO are remounted read-only after every mount (--remount-ro):
	// a tmpfs that only holds read-only binds (the allowed tools) must not
	// let the sandbox add files beside them.
	RemountRO []string
}

// EnvArgs is Env as bwrap arguments, NUL-separated, sorted by key:
// "--setenv\x00K\x00V\x00" for each variable. A key with '=' or NUL,
// or a value with NUL, is refused.
func (s Spec) EnvArgs() ([]byte, error) {
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("bwrap: bad environment key %q", k)
		}
		if strings.Contains(s.Env[k], "\x00") {
			return nil, fmt.Errorf("bwrap: environment value of %s holds a NUL byte", k)
		}
		b = append(b, "--setenv\x00"+k+"\x00"+s.Env[k]+"\x00"...)
	}
	return b, nil
}

// PassEnv puts EnvArgs in an anonymous memory file, passes it (Pass) and
// sets EnvFD; bwrap reads it as arguments. The caller closes the returned
// file once bwrap started (nil when Env is empty). The values are then in
// no command line, only in the sandboxed program's environment, which
// /proc shows its owner alone. spec: X11, B3
func (s *Spec) PassEnv() (*os.File, error) {
	if len(s.Env) == 0 {
		return nil, nil
	}
	data, err := s.EnvArgs()
	if err != nil {
		return nil, err
	}
	f, err := MemFile("bwrap-env", data)
	if err != nil {
		return nil, fmt.Errorf("bwrap: environment: %w", err)
	}
	s.EnvFD = s.Pass(f)
	return f, nil
}

// MemFile is an anonymous memory file (memfd) holding data, read from
// its start.
func MemFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return f, nil
}

// Pass adds f to the descriptors bwrap inherits and returns its number
// there (3, 4, …), for Mount.FD, FDMount.FD or SeccompFD.
func (s *Spec) Pass(f *os.File) int {
	s.Files = append(s.Files, f)
	return 2 + len(s.Files)
}

// systemEtc is the part of /etc an ordinary program needs: the loader cache,
// name service files, time zone, certificates, terminfo and Debian's
// alternatives links. Nothing secret (no shadow, no ssh keys).
var systemEtc = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/resolv.conf",
	"/etc/localtime", "/etc/ssl", "/etc/ca-certificates", "/etc/terminfo",
	"/etc/bash.bashrc", "/etc/profile", "/etc/inputrc", "/etc/os-release", "/etc/mime.types",
}

// SystemEtc lists the /etc entries a sandbox sees.
func SystemEtc() []string { return append([]string(nil), systemEtc...) }

// Args returns bwrap's argv (without the bwrap path itself).
func (s Spec) Args() ([]string, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("bwrap: empty argv")
	}
	var a []string
	if !s.OutliveParent {
		a = append(a, "--die-with-parent") // the sandbox dies with its supervisor
	}
	if !s.SharedSession {
		a = append(a, "--new-session") // no TIOCSTI into a controlling terminal (B4)
	}
	a = append(a,
		"--unshare-pid", // its own PID namespace: a group kill misses no setsid grandchild
		"--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--cap-drop", "ALL", // as root, --new-session alone still lets TIOCSTI through
	)
	if !s.Network || s.Egress != nil {
		// spec: V3 — the host's network (its loopback services, its
		// abstract unix sockets) is never the sandbox's.
		a = append(a, "--unshare-net")
	}
	if s.MapUser {
		a = append(a, "--unshare-user", "--uid", strconv.Itoa(s.UID), "--gid", strconv.Itoa(s.GID))
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	if s.System {
		for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
			a = append(a, systemDir(d)...)
		}
		if s.Etc != "" {
			a = append(a, "--ro-bind", s.Etc, "/etc")
		} else {
			for _, e := range systemEtc {
				a = append(a, "--ro-bind-try", e, e)
			}
		}
	}
	for _, d := range s.Dirs {
		a = append(a, "--dir", d)
	}
	for _, t := range s.Tmpfs {
		a = append(a, "--tmpfs", t)
	}
	for _, m := range s.Mounts {
		var err error
		if a, err = m.args(a); err != nil {
			return nil, err
		}
	}
	for _, m := range s.FDMounts {
		if m.FD < 3 || !filepath.IsAbs(m.Dst) {
			return nil, fmt.Errorf("bwrap: bad fd mount %+v", m)
		}
		a = append(a, "--ro-bind-fd", strconv.Itoa(m.FD), m.Dst)
	}
	for _, t := range s.TmpfsAfter {
		a = append(a, "--tmpfs", t)
	}
	for _, m := range s.MountsAfter {
		var err error
		if a, err = m.args(a); err != nil {
			return nil, err
		}
	}
	for _, d := range s.RemountRO {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("bwrap: bad --remount-ro %q", d)
		}
		a = append(a, "--remount-ro", d)
	}
	if s.AsPID1 {
		a = append(a, "--as-pid-1")
	}
	a = append(a, "--clearenv")
	if _, err := s.EnvArgs(); err != nil {
		return nil, err
	}
	switch {
	case s.EnvFD > 0:
		a = append(a, "--args", strconv.Itoa(s.EnvFD))
	case len(s.Env) > 0:
		return nil, errors.New("bwrap: an environment goes through a descriptor (Spec.PassEnv), never on the command line")
	}
	if s.Chdir != "" {
		a = append(a, "--chdir", s.Chdir)
	}
	if s.InfoFD > 0 {
		a = append(a, "--info-fd", strconv.Itoa(s.InfoFD))
	}
	if s.BlockFD > 0 {
		a = append(a, "--block-fd", strconv.Itoa(s.BlockFD))
	}
	if s.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(s.SeccompFD))
	}
	a = append(a, "--")
	return append(a, s.Argv...), nil
}

// An Anchor is one protected mount below a writable directory of the
// view. bwrap mounts by destination path, and the host directories on
// that path can be moved between the walk that found a protected path and
// the mount (another sandbox of the workspace renaming a directory that
// holds a repository away and back): the protection would then sit on a
// directory bwrap made, and the repository, under its new name, would be
// writable. So in the finished view Dst must be read-only, show Mounted
// (what was bound there), and be an entry of the very directory the walk
// listed it in (Dir) — a directory has one name, so its protection then
// covers it however it is reached.
//
// A Tmpfs anchor is a tmpfs mounted at Dst to hide what lies there (the
// runtime's own tree inside a workspace): Dst must be a mount of its own
// (another device than Dir) of type tmpfs, in Dir; Mounted is not used.
//
// Under, when set, is what the name covers — the file the walk found
// there: the entry of Dir's listing (its inode number, which a mount does
// not change) must be it, so the mount sits on that very entry and not on
// one bwrap made in its place (a bind of a directory onto itself shows
// the same either way). A Pin is a directory bound writable over itself
// so that no sandbox can move it (a mount point cannot be renamed): it is
// not read-only.
type Anchor struct {
	Dst                 string // absolute, in the sandbox
	Dir, Mounted, Under safefs.Identity
	Tmpfs, Pin          bool
}

// ErrMoved: a protected path was not where the walk that found it saw it
// when the view was made — a directory on its path moved meanwhile.
var ErrMoved = errors.New("a directory holding protected paths moved while the sandbox started")

// ErrNoView: bwrap ended before it made the view of a sandbox whose view
// is checked (Spec.Anchors): nothing of it ran, and the error says what
// bwrap said. A directory moved on the host while bwrap made the view (a
// source gone when bwrap looked) ends it so too; the caller, who knows the
// host's paths, tells that case from a bwrap that cannot work.
var ErrNoView = errors.New("bwrap ended before it made the sandbox's view")

// args appends the bwrap options of one mount.
func (m Mount) args(a []string) ([]string, error) {
	if m.Dst == "" || !filepath.IsAbs(m.Dst) || (m.FD == 0 && m.Src == "") || (m.FD != 0 && (m.FD < 3 || m.Try)) {
		return nil, fmt.Errorf("bwrap: bad mount %+v", m)
	}
	if m.FD != 0 {
		op := "--ro-bind-fd"
		if m.Write {
			op = "--bind-fd"
		}
		return append(a, op, strconv.Itoa(m.FD), m.Dst), nil
	}
	op := "--ro-bind"
	if m.Write {
		op = "--bind"
	}
	if m.Try {
		op += "-try"
	}
	return append(a, op, m.Src, m.Dst), nil
}

// systemDir binds a host system directory read-only, or recreates it as the
// same symlink where the host has merged /usr (Debian: /bin -> usr/bin).
func systemDir(d string) []string {
	st, err := os.Lstat(d)
	if err != nil {
		return nil
	}
	if st.Mode()&os.ModeSymlink != 0 {
		if target, err := os.Readlink(d); err == nil {
			return []string{"--symlink", target, d}
		}
		return nil
	}
	return []string{"--ro-bind", d, d}
}
