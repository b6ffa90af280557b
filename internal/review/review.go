// Package review records what a run found in its workspace and what it
// left, so that a person can see what the run changed — by any tool, bash
// included — and undo it: `ctx agent diff`, `ctx agent undo`, /diff and
// /undo in chat.
//
// Where the workspace is in a git work tree, a snapshot is a git tree
// object of the workspace's files as they are (tracked, and untracked ones
// .gitignore does not exclude), written through a private index file into
// a private object store in the session (GIT_OBJECT_DIRECTORY, with the
// repository's own store as an alternate, so only contents the repository
// lacks are stored): nothing of the repository is written — not its
// index, branches, refs, stash nor objects. git runs on the host with the
// repository's hooks and fsmonitor off. Outside a git work tree nothing is
// recorded yet.
//
// A run's record is <session>/review/<run>.json: the workspace, the
// repository's top and the workspace's place in it, and the trees before
// and after.
package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortexfs/ctx/internal/atomicfile"
)

// Record is one run's snapshots.
type Record struct {
	Run       string `json:"run"`
	Workspace string `json:"workspace"`
	Top       string `json:"top"`    // the work tree's top
	Prefix    string `json:"prefix"` // the workspace below Top ("" = Top itself), slash-separated
	Before    string `json:"before"` // tree object ids
	After     string `json:"after,omitempty"`
	// Objects is the private object store; RepoObjects the repository's,
	// its alternate.
	Objects     string `json:"objects"`
	RepoObjects string `json:"repo_objects"`
}

// store is where git reads and writes objects for a record.
type store struct{ objects, repo string }

func (r Record) store() store { return store{r.Objects, r.RepoObjects} }

// ErrNoRepo means the workspace is in no git work tree: nothing is recorded.
var ErrNoRepo = errors.New("not in a git work tree")

// ErrNone means the session has no recorded run.
var ErrNone = errors.New("no run of this session has a snapshot")

// git runs git in dir with the repository's own programs off: no hook,
// no fsmonitor, no optional lock (a snapshot must not take the user's
// index lock), and, for a snapshot, a private index.
func git(ctx context.Context, dir, index string, st store, args ...string) ([]byte, error) {
	full := append([]string{"-C", dir, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
		"-c", "core.untrackedCache=false", "-c", "diff.external=", "--no-pager"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	// Only the repository's own config applies (the agent cannot write
	// it: .git is protected in its view): not the user's global or the
	// system's, whose filters an agent's .gitattributes could otherwise
	// pick to run on the host over content it wrote.
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0", "GIT_EXTERNAL_DIFF=",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if index != "" {
		cmd.Env = append(cmd.Env, "GIT_INDEX_FILE="+index)
	}
	if st.objects != "" {
		cmd.Env = append(cmd.Env, "GIT_OBJECT_DIRECTORY="+st.objects, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+st.repo)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// Start snapshots the workspace at a run's start: its record, with the
// private object store under sessionDir.
func Start(ctx context.Context, sessionDir, run, workspace string) (Record, error) {
	r := Record{Run: run, Workspace: workspace, Objects: filepath.Join(Dir(sessionDir), "objects")}
	if !inWorkTree(workspace) {
		return r, ErrNoRepo // no git process for a workspace outside git: a send's start stays cheap
	}
	if _, err := exec.LookPath("git"); err != nil {
		return r, ErrNoRepo
	}
	out, err := git(ctx, workspace, "", store{}, "rev-parse", "--show-toplevel", "--show-prefix", "--git-path", "objects")
	if err != nil {
		return r, ErrNoRepo
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) < 3 {
		return r, ErrNoRepo
	}
	r.Top, r.Prefix, r.RepoObjects = lines[0], strings.TrimSuffix(lines[1], "/"), lines[2]
	if !filepath.IsAbs(r.RepoObjects) {
		r.RepoObjects = filepath.Join(workspace, r.RepoObjects)
	}
	if err := os.MkdirAll(r.Objects, 0o700); err != nil {
		return r, err
	}
	r.Before, err = r.snapshot(ctx)
	return r, err
}

// inWorkTree says whether dir or a directory above it holds a .git (a
// few lstat calls; git itself decides the rest).
func inWorkTree(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// snapshot returns the tree of the workspace's files now.
func (r Record) snapshot(ctx context.Context) (string, error) {
	gitDir := filepath.Dir(r.RepoObjects)
	// A private index, seeded with a copy of the user's (its stat data
	// spares hashing the files that did not change).
	idx, err := os.CreateTemp("", "ctx-review-index-*")
	if err != nil {
		return "", err
	}
	idx.Close()
	defer os.Remove(idx.Name())
	orig := filepath.Join(gitDir, "index")
	if b, err := os.ReadFile(orig); err == nil {
		_ = os.WriteFile(idx.Name(), b, 0o600)
		// The copy keeps the index's time: git re-hashes the entries
		// not older than it ("racily clean"); a newer copy would make
		// it trust a same-size file changed within that second.
		if st, err := os.Stat(orig); err == nil {
			_ = os.Chtimes(idx.Name(), st.ModTime(), st.ModTime())
		}
	} else {
		os.Remove(idx.Name()) // git makes a fresh one
	}
	if _, err := git(ctx, r.Workspace, idx.Name(), r.store(), "add", "-A", "--", "."); err != nil {
		return "", err
	}
	out, err := git(ctx, r.Workspace, idx.Name(), r.store(), "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// End records the workspace as the run left it.
func (r *Record) End(ctx context.Context) error {
	t, err := r.snapshot(ctx)
	if err == nil {
		r.After = t
	}
	return err
}

// Dir is where a session keeps its records.
func Dir(sessionDir string) string { return filepath.Join(sessionDir, "review") }

// Save writes r (atomically).
func Save(sessionDir string, r Record) error {
	if err := os.MkdirAll(Dir(sessionDir), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	return atomicfile.WriteFile(filepath.Join(Dir(sessionDir), r.Run+".json"), append(b, '\n'), 0o600)
}

// Load reads the record of run, or of the session's last run with one
// (by the record's time) when run is "".
func Load(sessionDir, run string) (Record, error) {
	var r Record
	name := run
	if name == "" {
		all, err := os.ReadDir(Dir(sessionDir))
		var ents []os.DirEntry
		for _, e := range all {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
				ents = append(ents, e) // not objects/
			}
		}
		if err != nil || len(ents) == 0 {
			return r, ErrNone
		}
		sort.Slice(ents, func(i, j int) bool {
			a, _ := ents[i].Info()
			b, _ := ents[j].Info()
			return a.ModTime().Before(b.ModTime())
		})
		name = strings.TrimSuffix(ents[len(ents)-1].Name(), ".json")
	}
	b, err := os.ReadFile(filepath.Join(Dir(sessionDir), filepath.Base(name)+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return r, fmt.Errorf("run %s: %w", name, ErrNone)
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("review record %s: %w", name, err)
	}
	return r, nil
}

// Diff writes what the run changed: a unified diff of the workspace from
// before to after (to now, for a run with no after).
func Diff(ctx context.Context, r Record, w io.Writer) error {
	after := r.After
	if after == "" {
		t, err := r.snapshot(ctx)
		if err != nil {
			return err
		}
		after = t
	}
	out, err := git(ctx, r.Top, "", r.store(), "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", r.Before, after, "--", pathspec(r))
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

func pathspec(r Record) string {
	if r.Prefix == "" {
		return "."
	}
	return r.Prefix
}
