// Package toolpath resolves a tool name through an ordered list of CTX_PATH
// directories and checks every filesystem layer of tool authority, returning
// an open descriptor of exactly the file it checked.
//
// The directories are real paths in the caller's mount view: the daemon passes
// host paths mapped from the agent's CTX_PATH, tsh inside the sandbox passes
// the sandbox paths. Resolution never consults the host PATH (spec: D5).
//
// Layers, in the order they are checked (each refusal is a *Refusal naming
// its layer):
//
//	name      the tool name is not a valid name (layout.CheckName)
//	path      no directory of CTX_PATH holds the name (exit 127 class)
//	nofollow  the entry is a symbolic link
//	regular   the entry is not a regular file
//	noexec    the file lives on a mount with noexec (statfs ST_NOEXEC)
//	mode      the Linux uid/gid/groups/mode bits deny execute to the identity
//
// The first directory holding an entry of that name wins; an entry that is
// refused is reported, never skipped in favour of a later directory, so what
// `tsh which` names is what `tsh call` would run.
package toolpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/layout"
)

// Layer names, as recorded in refusals and audit frames.
const (
	LayerName     = "name"
	LayerPath     = "path"
	LayerNoFollow = "nofollow"
	LayerRegular  = "regular"
	LayerNoExec   = "noexec"
	LayerMode     = "mode"
)

// Exit codes pinned by interfaces.md "Tools and tsh".
const (
	ExitNotFound   = exitcode.NotFound   // no such tool on CTX_PATH
	ExitNotAllowed = exitcode.NotAllowed // found but not allowed or not executable
)

// stNoExec is ST_NOEXEC in statfs(2) f_flags (equal to MS_NOEXEC on Linux).
const stNoExec = 0x0008

// Refusal is the error for every refused resolution: which layer refused and why.
type Refusal struct {
	Tool   string // the requested name
	Layer  string // one of the Layer* constants (or a caller's own layer, e.g. "agent-policy")
	Reason string // human-readable detail
	Path   string // the path that was refused, empty for LayerName/LayerPath
	Err    error  // underlying error, if any
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("tool %q: refused by %s: %s", r.Tool, r.Layer, r.Reason)
	if r.Path != "" {
		s += " (" + r.Path + ")"
	}
	return s
}

func (r *Refusal) Unwrap() error { return r.Err }

// ExitCode maps an error to the tsh exit status: 127 for a name that is not
// on CTX_PATH, 126 for any other refusal, 1 for anything else, 0 for nil.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var r *Refusal
	if errors.As(err, &r) {
		if r.Layer == LayerPath || r.Layer == LayerName {
			return ExitNotFound
		}
		return ExitNotAllowed
	}
	return 1
}

// LayerOf returns the refusing layer of err, or "" when err is not a refusal.
func LayerOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Layer
	}
	return ""
}

// Identity is the Linux identity a tool would run as (from .d/uid, .d/gid,
// .d/groups, or the current process).
type Identity struct {
	UID, GID int
	Groups   []int // supplementary groups
}

// CurrentIdentity is the identity of this process (effective ids).
func CurrentIdentity() (Identity, error) {
	groups, err := os.Getgroups()
	if err != nil {
		return Identity{}, fmt.Errorf("toolpath: getgroups: %w", err)
	}
	return Identity{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups}, nil
}

// SplitPath splits a colon-separated CTX_PATH into directories. Empty and
// relative entries are dropped: unlike a shell PATH, an empty entry never
// means the current directory.
func SplitPath(s string) []string {
	var dirs []string
	for _, d := range strings.Split(s, ":") {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		dirs = append(dirs, filepath.Clean(d))
	}
	return dirs
}

// Tool is a resolved, checked tool. File is an O_PATH descriptor (close-on-exec)
// of exactly the file that passed the checks: execute it, not Path.
type Tool struct {
	Name string   // the tool name
	Dir  string   // the CTX_PATH directory it was found in
	Path string   // Dir/Name
	File *os.File // O_PATH|O_NOFOLLOW|O_CLOEXEC descriptor of the checked file
	Stat unix.Stat_t
}

// Close closes the checked descriptor.
func (t *Tool) Close() error {
	if t == nil || t.File == nil {
		return nil
	}
	return t.File.Close()
}

// Unchanged reports whether the checked file is still what was checked:
// the same inode still linked at Path, with the same size, mtime and
// ctime. Between a check and a spawn lies an approval that can take a
// minute; a file replaced or rewritten meanwhile is not the file the
// person approved. The error says what changed.
func (t *Tool) Unchanged() error {
	var now, at unix.Stat_t
	if err := unix.Fstat(int(t.File.Fd()), &now); err != nil {
		return fmt.Errorf("tool %s: %w", t.Name, err)
	}
	switch {
	case now.Nlink == 0:
		return fmt.Errorf("tool %s: the checked file was removed or replaced", t.Name)
	case now.Size != t.Stat.Size || now.Mtim != t.Stat.Mtim || now.Ctim != t.Stat.Ctim:
		return fmt.Errorf("tool %s: the checked file was modified", t.Name)
	}
	if err := unix.Lstat(t.Path, &at); err != nil || at.Ino != now.Ino || at.Dev != now.Dev {
		return fmt.Errorf("tool %s: %s no longer names the checked file", t.Name, t.Path)
	}
	return nil
}

// Meta reads the tool's metadata (Dir/Name.d/tool.json).
func (t *Tool) Meta() (Meta, error) { return ReadMeta(t.Dir, t.Name) }

// Find returns the first directory of dirs holding an entry named name,
// without checking it. The error is a *Refusal (LayerName or LayerPath).
func Find(name string, dirs []string) (string, error) {
	if err := layout.CheckName("tool", name); err != nil {
		return "", &Refusal{Tool: name, Layer: LayerName, Reason: "invalid tool name", Err: err}
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue // spec: D5 — never resolve relative to the cwd
		}
		var st unix.Stat_t
		err := unix.Lstat(filepath.Join(d, name), &st)
		if err == nil {
			return d, nil
		}
		// ENOENT, ENOTDIR, EACCES: not visible in this directory; try the next.
	}
	return "", &Refusal{Tool: name, Layer: LayerPath, Reason: "not found on CTX_PATH"}
}

// Resolve finds name on dirs (first match wins), opens it without following
// symlinks and checks every layer for id. On success the caller owns
// Tool.File and must Close it.
func Resolve(name string, dirs []string, id Identity) (*Tool, error) {
	dir, err := Find(name, dirs) // spec: K3, K4, D5
	if err != nil {
		return nil, err
	}
	t, err := OpenChecked(filepath.Join(dir, name), id)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			r.Tool = name
		}
		return nil, err
	}
	t.Name, t.Dir = name, dir
	return t, nil
}

// OpenChecked opens path with O_PATH|O_NOFOLLOW and checks the nofollow,
// regular, noexec and mode layers on the open descriptor, so the checks
// and a later execveat(fd) see the same file.
func OpenChecked(path string, id Identity) (*Tool, error) {
	name := filepath.Base(path)
	refuse := func(layer, reason string, err error) (*Tool, error) {
		return nil, &Refusal{Tool: name, Layer: layer, Reason: reason, Path: path, Err: err}
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, &Refusal{Tool: name, Layer: LayerPath, Reason: "not found", Path: path, Err: err}
		}
		return refuse(LayerPath, "cannot open: "+err.Error(), err)
	}
	f := os.NewFile(uintptr(fd), path)
	t := &Tool{Name: name, Dir: filepath.Dir(path), Path: path, File: f}
	fail := func(layer, reason string, err error) (*Tool, error) {
		f.Close()
		return refuse(layer, reason, err)
	}
	if err := unix.Fstat(fd, &t.Stat); err != nil {
		return fail(LayerRegular, "fstat: "+err.Error(), err)
	}
	switch t.Stat.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return fail(LayerNoFollow, "is a symbolic link; tools must be regular files", nil) // spec: V3 nofollow
	default:
		return fail(LayerRegular, "not a regular file ("+fileType(t.Stat.Mode)+")", nil)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return fail(LayerNoExec, "fstatfs: "+err.Error(), err) // fail closed
	}
	if sfs.Flags&stNoExec != 0 {
		return fail(LayerNoExec, "its filesystem is mounted noexec", nil) // spec: V3 noexec placement
	}
	if !CanExec(&t.Stat, id) {
		return fail(LayerMode, fmt.Sprintf("mode %04o owner %d:%d does not grant execute to uid %d gid %d groups %v",
			t.Stat.Mode&0o7777, t.Stat.Uid, t.Stat.Gid, id.UID, id.GID, id.Groups), nil) // spec: V3 Linux bits
	}
	return t, nil
}

// CanExec reports whether the mode bits of st grant execute to id, as the
// kernel decides for a file without ACLs: uid 0 needs any execute bit;
// otherwise the owner, group (primary or supplementary) or other class applies
// — exactly one class, so an owner without x is refused even if others have it.
// POSIX ACLs and file capabilities are not consulted; the kernel still
// enforces them at exec.
func CanExec(st *unix.Stat_t, id Identity) bool {
	mode := st.Mode
	if id.UID == 0 {
		return mode&0o111 != 0
	}
	if uint32(id.UID) == st.Uid {
		return mode&0o100 != 0
	}
	if uint32(id.GID) == st.Gid {
		return mode&0o010 != 0
	}
	for _, g := range id.Groups {
		if uint32(g) == st.Gid {
			return mode&0o010 != 0
		}
	}
	return mode&0o001 != 0
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "unknown type"
}
