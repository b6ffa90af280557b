// Package toolset installs ctx's standard toolset as tool
// objects: the one ctxtools binary linked under each tool's name in a tool
// directory (CTX_ROOT/tool), each with its <name>.d/tool.json.
package toolset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
	"os/exec"
	"sort"
	"syscall"
	"time"
)

// Binary is the multi-call binary's name beside ctx (make build, make install).
const Binary = "ctxtools"

// maxBinary bounds the binary read into memory.
const maxBinary = 256 << 20

// Report is what Install did.
type Report struct {
	Installed []string // written or already current
	Kept      []string // a tool of that name that ctx did not install: left alone
}

// Tool is one tool the binary holds, as `ctxtools --meta` describes it.
type Tool struct {
	Name string          `json:"name"`
	Meta json.RawMessage `json:"meta"` // the tool.json text
}

// providedBy marks a tool.json ctx wrote (stdtool.ProvidedBy; not imported
// so that ctx does not link the tools themselves).
const providedBy = "ctx"

// List asks binary which tools it holds (`ctxtools --meta`): the binary is
// the one source of the names and descriptions.
func List(binary string) ([]Tool, error) {
	cmd := exec.Command(binary, "--meta")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("toolset: %s --meta: %w", binary, err)
	}
	var ts []Tool
	if err := json.Unmarshal(out, &ts); err != nil {
		return nil, fmt.Errorf("toolset: %s --meta: %w", binary, err)
	}
	for _, t := range ts {
		if err := layout.CheckName("tool", t.Name); err != nil || !json.Valid(t.Meta) {
			return nil, fmt.Errorf("toolset: %s --meta: bad tool %q", binary, t.Name)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts, nil
}

// Install links binary (the host path of ctxtools) into dir under every
// tool's name and writes each tool.json. A name already taken by a tool ctx
// did not install (its tool.json lacks provided_by "ctx") is kept and
// reported, never replaced: a user's own `read` wins. Each tool object is
// replaced atomically (a link made beside it, then renamed over it); all of
// them share one inode, written and fsynced once.
func Install(binary, dir string) (Report, error) {
	var rep Report
	f, _, err := safefs.OpenRegular(binary)
	if err != nil {
		return rep, fmt.Errorf("toolset: %w (build it with `make build`; it is installed beside ctx)", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBinary+1))
	f.Close()
	if err != nil {
		return rep, fmt.Errorf("toolset: read %s: %w", binary, err)
	}
	if len(data) > maxBinary {
		return rep, fmt.Errorf("toolset: %s is over %d bytes", binary, maxBinary)
	}
	tools, err := List(binary)
	if err != nil {
		return rep, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rep, fmt.Errorf("toolset: %w", err)
	}
	// One installer at a time: `ctx init` and the daemon's own install may
	// run at once, and each replaces the same objects through the same
	// temporary names. The lock is an flock on a hidden file of the
	// directory, released when Install returns (or its process dies).
	unlock, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	defer unlock()
	// One hidden copy (dot names are not tool names: tsh never lists it,
	// the sandbox never shows it); every tool is a hard link of it.
	master := filepath.Join(dir, "."+Binary)
	if old, err := os.ReadFile(master); err != nil || !bytes.Equal(old, data) {
		if err := atomicfile.WriteFile(master, data, 0o755); err != nil {
			return rep, fmt.Errorf("toolset: %w", err)
		}
	}
	var errs []error
	for _, t := range tools {
		ok, err := installOne(master, dir, t)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			rep.Installed = append(rep.Installed, t.Name)
		default:
			rep.Kept = append(rep.Kept, t.Name)
		}
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// lockDir takes the install lock of dir, waiting for another installer.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("toolset: install lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("toolset: install lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// installOne installs t unless a foreign tool holds its name; it reports
// whether t is installed.
func installOne(master, dir string, t Tool) (bool, error) {
	obj := filepath.Join(dir, t.Name)
	metaDir := filepath.Join(dir, t.Name+".d")
	meta := filepath.Join(metaDir, "tool.json")
	if _, err := os.Lstat(obj); err == nil && !ours(meta) {
		return false, nil
	}
	mst, err := os.Stat(master)
	if err != nil {
		return false, fmt.Errorf("toolset: %w", err)
	}
	if st, err := os.Lstat(obj); err != nil || !os.SameFile(st, mst) {
		tmp := filepath.Join(dir, "."+t.Name+".link")
		_ = os.Remove(tmp)
		if err := os.Link(master, tmp); err != nil {
			return false, fmt.Errorf("toolset: link %s: %w", t.Name, err)
		}
		if err := os.Rename(tmp, obj); err != nil {
			_ = os.Remove(tmp)
			return false, fmt.Errorf("toolset: install %s: %w", t.Name, err)
		}
	}
	if err := os.MkdirAll(metaDir, 0o755); err != nil {
		return false, fmt.Errorf("toolset: %w", err)
	}
	want := append(bytes.TrimSpace(t.Meta), '\n')
	if old, err := os.ReadFile(meta); err == nil && bytes.Equal(old, want) {
		return true, nil
	}
	if err := atomicfile.WriteFile(meta, want, 0o644); err != nil {
		return false, fmt.Errorf("toolset: %w", err)
	}
	return true, nil
}

// ours reports whether the tool.json at meta says ctx installed it.
func ours(meta string) bool {
	b, err := safefs.ReadRegular(meta, 64<<10)
	if err != nil {
		return false
	}
	var m struct {
		ProvidedBy string `json:"provided_by"`
	}
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	return m.ProvidedBy == providedBy
}

// Standard is the standard toolset's names (the tools stdtool registers;
// a test keeps the two equal). Listed here so that what names them —
// the default policy of `ctx agent create --model` — does not link the
// tools themselves.
var Standard = []string{"apply_patch", "bash", "edit", "fetch", "glob", "grep", "ls", "read", "write"}

// DefaultPolicy is the `.d/policy` of a new model agent: the
// standard toolset, agent.update and the tools given with --tools, in the
// grammar of internal/policy/POLICY.md. A person narrows it by deleting
// lines or adding `deny tool NAME` (deny wins), widens it with `allow tool
// NAME` or `allow tool *`.
func DefaultPolicy(extra []string) string {
	var b bytes.Buffer
	b.WriteString("# Default policy of a coding agent (ctx agent create --model): the standard\n" +
		"# toolset and agent.update. Narrow it: delete a line, or add `deny tool NAME`\n" +
		"# (deny wins). Widen it: `allow tool NAME`, or `allow tool *` for every tool\n" +
		"# on the agent's CTX_PATH. One rule per line: allow|deny tool NAME|*.\n")
	seen := map[string]bool{}
	for _, n := range append(append(append([]string{}, Standard...), "agent.update"), extra...) {
		if !seen[n] {
			seen[n] = true
			fmt.Fprintf(&b, "allow tool %s\n", n)
		}
	}
	return b.String()
}
