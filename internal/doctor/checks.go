package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
)

// Sysctl files the namespace and TIOCSTI checks read.
const (
	AppArmorSysctl    = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
	MaxUserNSSysctl   = "/proc/sys/user/max_user_namespaces"
	UsernsCloneSysctl = "/proc/sys/kernel/unprivileged_userns_clone"
	TIOCSTISysctl     = "/proc/sys/dev/tty/legacy_tiocsti"
)

// ProbeArgs is the namespace probe: the namespaces every sandbox needs
// (user when unprivileged, PID, network) around a program that does nothing.
var ProbeArgs = []string{"--unshare-user-try", "--unshare-pid", "--unshare-net", "--die-with-parent",
	"--ro-bind", "/", "/", "true"}

const installBwrap = "install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap) or set CTX_BWRAP to the absolute path of a bwrap binary"

// BwrapResult is the bwrap check and the binary it found ("" when none).
type BwrapResult struct {
	Check
	Path string
}

// CheckBwrap: bwrap is CTX_BWRAP when set, else /usr/bin/bwrap — never
// looked up through PATH.
func CheckBwrap(configured string, find func(string) (string, error)) BwrapResult {
	p, err := find(configured)
	where := "/usr/bin/bwrap (default)"
	if configured != "" {
		where = configured + " (CTX_BWRAP)"
	}
	if err != nil {
		fix := installBwrap
		if configured != "" {
			fix = "point CTX_BWRAP at an existing bwrap binary, or unset it to use " + bwrap.DefaultPath + "; " + installBwrap
		}
		return BwrapResult{Check: Check{Name: "bwrap", Status: Fail,
			Message: fmt.Sprintf("no usable bwrap at %s: %v; agents and tools cannot start (they never run unsandboxed)", where, errors.Unwrap(err)),
			Fix:     fix}}
	}
	return BwrapResult{Check: Check{Name: "bwrap", Status: OK, Message: "found " + where}, Path: p}
}

// Sysctls are the kernel settings that can refuse user namespaces; a
// missing file is "" (the kernel has no such knob).
type Sysctls struct {
	AppArmorRestrict string // kernel.apparmor_restrict_unprivileged_userns
	MaxUserNS        string // user.max_user_namespaces
	UsernsClone      string // kernel.unprivileged_userns_clone (Debian's patch)
}

// ReadSysctls reads the three knobs with read.
func ReadSysctls(read func(string) ([]byte, error)) Sysctls {
	get := func(p string) string {
		b, err := read(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return Sysctls{AppArmorRestrict: get(AppArmorSysctl), MaxUserNS: get(MaxUserNSSysctl), UsernsClone: get(UsernsCloneSysctl)}
}

// Namespaces judges the probe: bwrap's exit code and stderr, and the
// sysctls that explain a refusal. spec: B1 (the sandbox or nothing)
func Namespaces(bw string, stderr string, code int, runErr error, sc Sysctls) Check {
	c := Check{Name: "namespaces"}
	if runErr == nil && code == 0 {
		c.Status, c.Message = OK, "bwrap can create user, PID and network namespaces"
		if sc.AppArmorRestrict == "1" {
			c.Message += " (kernel.apparmor_restrict_unprivileged_userns=1, but an AppArmor profile lets bwrap through)"
		}
		return c
	}
	c.Status = Fail
	text := strings.TrimSpace(stderr)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	if runErr != nil {
		c.Message = fmt.Sprintf("the bwrap probe did not run: %v", runErr)
		c.Fix = "check that bubblewrap works: " + bw + " " + strings.Join(ProbeArgs, " ")
		return c
	}
	if !refused(text) {
		c.Message = fmt.Sprintf("the bwrap probe failed (exit %d): %s", code, text)
		c.Fix = "check that bubblewrap works: " + bw + " " + strings.Join(ProbeArgs, " ")
		return c
	}
	c.Message = "user namespaces are refused, so no sandbox can start: " + text
	switch {
	case sc.AppArmorRestrict == "1":
		c.Message += " (Ubuntu's AppArmor restriction: kernel.apparmor_restrict_unprivileged_userns=1)"
		c.Fix = "allow bwrap an AppArmor profile: write /etc/apparmor.d/bwrap with " +
			"`abi <abi/4.0>, include <tunables/global> profile bwrap " + bw + " flags=(unconfined) { userns, }` " +
			"and run `sudo apparmor_parser -r /etc/apparmor.d/bwrap`; or lift the restriction for every program: " +
			"`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (persist it in /etc/sysctl.d/60-userns.conf)"
	case sc.UsernsClone == "0":
		c.Message += " (kernel.unprivileged_userns_clone=0)"
		c.Fix = "`sudo sysctl -w kernel.unprivileged_userns_clone=1` (persist it in /etc/sysctl.d/60-userns.conf)"
	case sc.MaxUserNS == "0":
		c.Message += " (user.max_user_namespaces=0)"
		c.Fix = "`sudo sysctl -w user.max_user_namespaces=15000` (persist it in /etc/sysctl.d/60-userns.conf)"
	default:
		c.Fix = "allow unprivileged user namespaces: on Ubuntu `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` " +
			"or an AppArmor profile for bwrap; on Debian `sudo sysctl -w kernel.unprivileged_userns_clone=1`; elsewhere " +
			"`sudo sysctl -w user.max_user_namespaces=15000`; inside a container, allow user namespaces in its seccomp/runtime settings"
	}
	return c
}

// refused recognises bwrap's messages for a refused namespace.
func refused(s string) bool {
	for _, m := range []string{"No permissions to create new namespace", "setting up uid map", "Permission denied",
		"Operation not permitted", "Creating new namespace failed", "unprivileged_userns_clone"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func (e *Env) namespaces(ctx context.Context, bw BwrapResult) Check {
	if bw.Path == "" {
		return Check{Name: "namespaces", Status: Fail, Message: "not probed: no usable bwrap", Fix: "fix the bwrap check first"}
	}
	stderr, code, err := e.Probe(ctx, bw.Path, ProbeArgs)
	return Namespaces(bw.Path, stderr, code, err, ReadSysctls(e.ReadFile))
}

// CheckRuntimeDir: CTX_RUNTIME_DIR holds the sockets; it must be a real
// directory owned by the user, mode 0700 (spec: A4). A missing one is fine:
// the daemon creates it 0700.
func CheckRuntimeDir(dir string, uid int, stat func(string) (Info, error)) Check {
	c := Check{Name: "runtime_dir", Status: OK}
	in, err := stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Message = dir + " does not exist yet (the daemon creates it 0700)"
		return c
	case err != nil:
		c.Status, c.Message, c.Fix = Fail, fmt.Sprintf("%s: %v", dir, err), "set CTX_RUNTIME_DIR to a directory you own, mode 0700"
		return c
	case in.Mode&fs.ModeSymlink != 0:
		c.Status, c.Message = Fail, dir+" is a symbolic link (sockets must live in a directory the user owns)"
		c.Fix = "rm " + dir + " (the daemon creates it 0700), or set CTX_RUNTIME_DIR to a directory you own"
		return c
	case !in.Mode.IsDir():
		c.Status, c.Message, c.Fix = Fail, dir+" is not a directory", "remove "+dir+" or set CTX_RUNTIME_DIR elsewhere"
		return c
	case in.UID != uid:
		c.Status, c.Message = Fail, fmt.Sprintf("%s is owned by uid %d, not by you (uid %d): its owner could hijack the sockets", dir, in.UID, uid)
		c.Fix = "set CTX_RUNTIME_DIR to a directory you own (mode 0700), or remove " + dir + " as its owner"
		return c
	}
	perm := in.Mode.Perm()
	switch {
	case perm&0o002 != 0:
		c.Status, c.Message = Fail, fmt.Sprintf("%s is world-writable (mode %04o): anyone could replace the daemon's sockets", dir, perm)
	case perm&0o077 != 0:
		c.Status, c.Message = Fail, fmt.Sprintf("%s has mode %04o: it must be 0700 (only you may reach the sockets)", dir, perm)
	default:
		c.Message = fmt.Sprintf("%s: yours, mode 0700", dir)
		return c
	}
	c.Fix = "chmod 0700 " + dir
	return c
}

// CheckRoot: CTX_ROOT holds definitions and tools; it must be yours and
// writable by nobody else (a writable tool/ or agent/ would let another
// user plant tools and agents).
func CheckRoot(l layout.Layout, stat func(string) (Info, error)) Check {
	c := Check{Name: "ctx_root", Status: OK}
	in, err := stat(l.Root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Status, c.Message, c.Fix = Fail, l.Root+" does not exist", "ctx init"
		return c
	case err != nil:
		c.Status, c.Message, c.Fix = Fail, fmt.Sprintf("%s: %v", l.Root, err), "set CTX_ROOT to a directory you own"
		return c
	case in.Mode&fs.ModeSymlink != 0:
		// A symlinked root is followed everywhere; judge its target.
		if in, err = statFollow(stat, l.Root); err != nil {
			c.Status, c.Message, c.Fix = Fail, fmt.Sprintf("%s: %v", l.Root, err), "set CTX_ROOT to a directory you own"
			return c
		}
	}
	if !in.Mode.IsDir() {
		c.Status, c.Message, c.Fix = Fail, l.Root+" is not a directory", "set CTX_ROOT to a directory (ctx init creates it)"
		return c
	}
	if in.UID != l.UID && in.UID != 0 {
		c.Status, c.Message = Fail, fmt.Sprintf("%s is owned by uid %d, not by you (uid %d) or root", l.Root, in.UID, l.UID)
		c.Fix = "set CTX_ROOT to a directory you own, or chown -R " + fmt.Sprint(l.UID) + " " + l.Root
		return c
	}
	for _, d := range []string{l.Root, l.AgentDir(), l.ToolDir(), l.BinDir(), l.UserHome()} {
		din, err := stat(d)
		if errors.Is(err, fs.ErrNotExist) {
			if d == l.Root {
				continue
			}
			c.Status, c.Message, c.Fix = Fail, d+" is missing", "ctx init"
			return c
		}
		if err != nil {
			c.Status, c.Message, c.Fix = Fail, fmt.Sprintf("%s: %v", d, err), "ctx init"
			return c
		}
		if din.Mode.Perm()&0o022 != 0 && din.Mode&fs.ModeSticky == 0 {
			c.Status = Fail
			c.Message = fmt.Sprintf("%s is writable by group or others (mode %04o): another user could plant agents or tools", d, din.Mode.Perm())
			c.Fix = "chmod go-w " + d
			return c
		}
	}
	c.Message = fmt.Sprintf("%s: definitions, homes and tools, writable only by their owner", l.Root)
	return c
}

func statFollow(stat func(string) (Info, error), p string) (Info, error) {
	return stat(p + "/.")
}

// Daemon: the daemon answers ping, and its version. An unreachable daemon
// only fails when clients may not start one (CTX_NO_AUTOSTART=1).
func Daemon(socket, version string, err error, self string, noAutostart bool) Check {
	c := Check{Name: "daemon", Status: OK}
	if err != nil {
		c.Status = Warn
		c.Message = fmt.Sprintf("no daemon answers on %s (%v); clients start one on first use", socket, err)
		c.Fix = "ctx daemon, or systemctl --user enable --now ctx.socket (see ctx install-units)"
		if noAutostart {
			c.Status = Fail
			c.Message = fmt.Sprintf("no daemon answers on %s (%v), and CTX_NO_AUTOSTART=1 stops clients from starting one", socket, err)
		}
		return c
	}
	c.Message = fmt.Sprintf("ctx daemon %s answers on %s", version, socket)
	if version != self {
		c.Status = Warn
		c.Message = fmt.Sprintf("ctx daemon %s answers on %s, but this ctx is %s", version, socket, self)
		c.Fix = "restart the daemon so it runs this build (systemctl --user restart ctx.service, or stop and rerun ctx daemon)"
	}
	return c
}

func (e *Env) daemon(ctx context.Context) Check {
	v, err := e.Ping(ctx)
	return Daemon(e.Layout.SystemSocket(), v, err, e.Version, e.Getenv("CTX_NO_AUTOSTART") == "1")
}

// Launcher: which launcher the daemon picks for terminals (CTX_LAUNCHER,
// else systemd when a user manager answers, else the built-in one).
func Launcher(want string, managerErr error) Check {
	c := Check{Name: "launcher", Status: OK}
	switch want {
	case "builtin":
		c.Message = "terminals use the built-in launcher (CTX_LAUNCHER=builtin)"
	case "systemd":
		if managerErr != nil {
			c.Status = Fail
			c.Message = fmt.Sprintf("CTX_LAUNCHER=systemd, but no systemd user manager answers (%v): the daemon will not start", managerErr)
			c.Fix = "start a user manager (loginctl enable-linger $USER, then log in again) or unset CTX_LAUNCHER"
			return c
		}
		c.Message = "systemd user manager answers; terminals run as transient user units (CTX_LAUNCHER=systemd)"
	case "", "auto":
		if managerErr != nil {
			c.Message = fmt.Sprintf("no systemd user manager answers (%v); terminals use the built-in launcher", managerErr)
			return c
		}
		c.Message = "systemd user manager answers; terminals run as transient user units"
	default:
		c.Status = Fail
		c.Message = fmt.Sprintf("CTX_LAUNCHER=%q: the daemon will refuse to start", want)
		c.Fix = "set CTX_LAUNCHER to auto, systemd or builtin (or unset it)"
	}
	return c
}

func (e *Env) launcher(ctx context.Context) Check {
	want := e.Getenv("CTX_LAUNCHER")
	var err error
	if want != "builtin" {
		err = e.SystemdPing(ctx)
	}
	return Launcher(want, err)
}

// CheckTIOCSTI: with dev.tty.legacy_tiocsti=1 a process can push input
// into its controlling terminal. Sandboxes get --new-session and
// --cap-drop ALL either way, so this is a warning about the host.
func CheckTIOCSTI(b []byte, err error) Check {
	c := Check{Name: "tiocsti", Status: Warn}
	const protects = "the sandbox's --new-session and --cap-drop ALL keep agents from injecting input"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Message = "this kernel has no dev.tty.legacy_tiocsti (before 6.2): TIOCSTI is always allowed on the host; " + protects
		c.Fix = "a kernel ≥ 6.2 with dev.tty.legacy_tiocsti=0 also protects other programs"
	case err != nil:
		c.Message = fmt.Sprintf("cannot read %s: %v; %s", TIOCSTISysctl, err, protects)
	case strings.TrimSpace(string(b)) == "0":
		c.Status, c.Message = OK, "dev.tty.legacy_tiocsti=0: no process can inject terminal input"
	default:
		c.Message = "dev.tty.legacy_tiocsti=" + strings.TrimSpace(string(b)) + ": the host allows TIOCSTI; " + protects
		c.Fix = "sudo sysctl -w dev.tty.legacy_tiocsti=0 (persist it in /etc/sysctl.d/60-tiocsti.conf)"
	}
	return c
}

// CheckCgroup: how the daemon confines each run (docs/limits.md
// run") and the default limits. Rlimits only is a warning: they are per
// process, not per run, and leave nothing to sweep after a crash.
func CheckCgroup(mode cgroup.Mode, where, why string) Check {
	c := Check{Name: "cgroup", Status: OK}
	defaults := "default limits per run: " + limits.Default.String() + " (agent/NAME.d/limits)"
	if mode != cgroup.ModeRlimit {
		c.Message = "one cgroup per run: " + where + "; " + defaults
		return c
	}
	c.Status = Warn
	c.Message = where + "; " + defaults
	if why != "" {
		c.Message += " — no cgroup: " + why
	}
	c.Fix = "run the daemon as a systemd user service on a cgroup v2 host (systemctl --user, loginctl enable-linger $USER), " +
		"or delegate it a writable cgroup (Delegate=yes, or a cgroup v1 pids and memory hierarchy it may write)"
	return c
}
