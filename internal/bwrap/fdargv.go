package bwrap

// The grammar of the argv the runtime hands bwrap, for the one program
// that rewrites it on the host: ctxterm (the terminal's sandbox is started
// where the daemon cannot pass descriptors, so ctxterm opens the bind
// sources itself and hands bwrap its environment by descriptor). Security
// logic lives here, tested, not in a main package. spec: B3

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/pathin"
	"github.com/cortexfs/ctx/internal/safefs"
)

// optionArity is the number of arguments of the option at argv[i]; an
// option the runtime never emits, or one cut short, is an error (closed).
func optionArity(argv []string, i int) (int, error) {
	n, ok := arity[argv[i]]
	if !ok || i+n >= len(argv) {
		return 0, fmt.Errorf("bwrap argv: unexpected %q", argv[i])
	}
	return n, nil
}

// Options splits argv (argv[0] is bwrap) into its options, each with its
// arguments, and the command after "--". It refuses what BindByFD would.
func Options(argv []string) (opts [][]string, command []string, err error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("bwrap argv: empty")
	}
	i := 1
	for ; i < len(argv) && argv[i] != "--"; i++ {
		n, err := optionArity(argv, i)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, argv[i:i+n+1])
		i += n
	}
	if i < len(argv) {
		command = argv[i+1:]
	}
	return opts, command, nil
}

// PassEnvByFD puts env into a memory file handed to bwrap as its next
// descriptor, read as --setenv arguments (--args N right after the
// --clearenv the runtime's argv always has; fails closed without one).
func PassEnvByFD(argv []string, files []*os.File, env []string) ([]string, []*os.File, error) {
	s := Spec{Env: map[string]string{}}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			s.Env[k] = v
		}
	}
	data, err := s.EnvArgs()
	if err != nil {
		return nil, files, err
	}
	i := slices.Index(argv, "--clearenv")
	if i < 0 || slices.Index(argv, "--") < i {
		return nil, files, errors.New("bwrap argv: no --clearenv")
	}
	f, err := MemFile("ctxterm-env", data)
	if err != nil {
		return nil, files, err
	}
	files = append(files, f)
	out := append(append(slices.Clip(argv[:i+1]), "--args", strconv.Itoa(2+len(files))), argv[i+1:]...)
	return out, files, nil
}

// agentReachable says whether a bind at dst in the sandbox has a source
// the agent may have shaped: the workspace and what is bound inside it,
// its home and session, the tool view. Writable binds always are.
func agentReachable(dst string) bool {
	for _, p := range []string{layout.SandboxWorkspace, layout.SandboxHome, layout.SandboxRoot} {
		if pathin.Inside(dst, p) {
			return true
		}
	}
	return false
}

// arity is the number of arguments of each bwrap option the runtime
// emits; BindByFD refuses an argv with any other option (fails closed).
var arity = map[string]int{
	"--die-with-parent": 0, "--new-session": 0, "--unshare-pid": 0, "--unshare-ipc": 0, "--unshare-uts": 0,
	"--unshare-cgroup-try": 0, "--unshare-net": 0, "--unshare-user": 0, "--clearenv": 0, "--as-pid-1": 0,
	"--cap-drop": 1, "--uid": 1, "--gid": 1, "--proc": 1, "--dev": 1, "--tmpfs": 1, "--dir": 1, "--chdir": 1,
	"--remount-ro": 1, "--info-fd": 1, "--block-fd": 1, "--seccomp": 1,
	"--symlink": 2, "--bind": 2, "--ro-bind": 2, "--bind-try": 2, "--ro-bind-try": 2,
	"--bind-fd": 2, "--ro-bind-fd": 2,
}

// BindByFD rewrites bwrap's path binds (argv[0] is bwrap) into descriptor
// binds: each source is opened by ctxterm, on the host, with no symlink
// followed in any component (internal/safefs), so a symlink planted in the
// workspace between the daemon's check and the mount — a .git swapped for
// a link to a host directory — cannot become a bind source (the terminal's sandbox is started where the daemon cannot pass
// descriptors). Read-only binds outside the agent's reach (the system's
// /usr and /etc) stay path binds. A missing -try source is dropped; any
// other failure, and an option it does not know, fail the start.
func BindByFD(argv []string, files []*os.File) ([]string, []*os.File, error) {
	out := []string{argv[0]}
	i := 1
	for ; i < len(argv) && argv[i] != "--"; i++ {
		opt := argv[i]
		n, err := optionArity(argv, i)
		if err != nil {
			return nil, files, err
		}
		switch opt {
		case "--bind", "--ro-bind", "--bind-try", "--ro-bind-try":
			src, dst := argv[i+1], argv[i+2]
			if !strings.HasPrefix(opt, "--bind") && !agentReachable(dst) {
				// A read-only system bind (/usr, /etc …): root's files the
				// agent cannot change; Debian's own symlinks stay usable.
				out = append(out, argv[i:i+n+1]...)
				i += n
				continue
			}
			f, err := safefs.Open(src, unix.O_PATH)
			if err != nil {
				if strings.HasSuffix(opt, "-try") && errors.Is(err, fs.ErrNotExist) {
					i += n
					continue
				}
				return nil, files, fmt.Errorf("bind source %s: %w", src, err)
			}
			files = append(files, f)
			fdOpt := "--ro-bind-fd"
			if strings.HasPrefix(opt, "--bind") {
				fdOpt = "--bind-fd"
			}
			out = append(out, fdOpt, strconv.Itoa(2+len(files)), dst)
		default:
			out = append(out, argv[i:i+n+1]...)
		}
		i += n
	}
	return append(out, argv[i:]...), files, nil
}
