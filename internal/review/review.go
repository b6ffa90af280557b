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
// repository's hooks and fsmonitor off.
//
// Outside a git work tree the snapshot is the same kind of tree, in a
// private repository of the session (review/git: its own objects and a
// kept index, whose stat data spares hashing unchanged files at the next
// run), of the whole workspace — so a change by any tool, bash included,
// is seen — as long as the workspace is small enough to copy: at most
// MaxFiles files and MaxBytes bytes (its .gitignore files apply), with
// room to spare on the disk. A larger workspace gets a record that says
// why it has no snapshot.
//
// The review directory is the host's: a sandbox that sees the session's
// directory gets it read-only (internal/sandbox).
//
// A run's record is its last line in <session>/review/records.jsonl
// (appended at the run's start and end): the workspace, the repository's
// top and the workspace's place in it, and the trees before and after.
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

	"golang.org/x/sys/unix"
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
	// GitDir is the session's private repository of a workspace outside
	// git ("" in a git work tree).
	GitDir string `json:"git_dir,omitempty"`
	// Skipped says why a run outside git has no snapshot (too large).
	Skipped string `json:"skipped,omitempty"`
	// BeforeFP and AfterFP are the workspace's fingerprints when Before
	// and After were taken ("": none usable); Big says the walk passed a
	// bound, so the next run does not walk (fingerprint).
	BeforeFP string `json:"before_fp,omitempty"`
	AfterFP  string `json:"after_fp,omitempty"`
	Big      bool   `json:"big,omitempty"`
}

// Bounds of a snapshot outside git: a workspace larger than this is not
// copied (a git work tree's snapshot stores only what its repository
// lacks, and has no bound).
const (
	MaxFiles = 20000
	MaxBytes = 256 << 20
	// spare is the free space a snapshot outside git leaves on the
	// session's filesystem, beyond the bytes it copies.
	spare = 1 << 30
)

// store is where git reads and writes objects for a record: a private
// object store with the repository's as its alternate, or a private
// repository (gitDir) with the workspace as its work tree.
type store struct{ objects, repo, gitDir, workTree string }

func (r Record) store() store { return store{r.Objects, r.RepoObjects, r.GitDir, r.Workspace} }

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
	switch {
	case st.gitDir != "":
		cmd.Env = append(cmd.Env, "GIT_DIR="+st.gitDir, "GIT_WORK_TREE="+st.workTree)
	case st.objects != "":
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
	if _, err := exec.LookPath("git"); err != nil {
		return r, ErrNoRepo
	}
	plain := !inWorkTree(workspace)
	// The session's last run in this workspace left a tree and the
	// fingerprint of the files it was taken from: if the workspace
	// still has that fingerprint, its tree is this run's Before.
	last, lerr := Load(sessionDir, "")
	same := lerr == nil && last.Workspace == workspace && (last.GitDir != "") == plain && last.Skipped == ""
	var size int64
	if !same || !last.Big {
		r.BeforeFP, _, size, r.Big = fingerprint(workspace)
	} else {
		r.Big = true
	}
	if same && r.BeforeFP != "" && last.After != "" && last.AfterFP == r.BeforeFP {
		r.Top, r.Prefix, r.RepoObjects, r.GitDir, r.Objects = last.Top, last.Prefix, last.RepoObjects, last.GitDir, last.Objects
		r.Before = last.After
		return r, nil
	}
	if plain {
		return startPlain(ctx, sessionDir, r, size)
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

// inWorkTree says whether dir or a directory above it holds a
// repository git would find: a .git file (a linked work tree's) or a
// .git directory with a HEAD (a few lstat calls; git itself decides the
// rest). An empty .git directory is passed over, as git's discovery
// does: it is what another run in the same workspace holds there while
// it lasts (internal/workspace's placeholder for the protected .git),
// and taking it for a repository would leave a run that overlaps one
// without its snapshot.
func inWorkTree(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if st, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			if !st.IsDir() {
				return true
			}
			if _, err := os.Lstat(filepath.Join(d, ".git", "HEAD")); err == nil {
				return true
			}
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// startPlain snapshots a workspace outside git into the session's
// private repository, when the workspace is small enough; otherwise the
// record says why there is none.
func startPlain(ctx context.Context, sessionDir string, r Record, size int64) (Record, error) {
	r.Top, r.GitDir = r.Workspace, filepath.Join(Dir(sessionDir), "git")
	r.Objects = filepath.Join(r.GitDir, "objects")
	if _, err := os.Stat(filepath.Join(r.GitDir, "HEAD")); err != nil {
		if err := os.MkdirAll(Dir(sessionDir), 0o700); err != nil {
			return r, err
		}
		// No template: no sample hooks; the config is git's defaults.
		if _, err := git(ctx, Dir(sessionDir), "", store{}, "init", "-q", "--bare", "--template=", r.GitDir); err != nil {
			return r, err
		}
	}
	if why := r.tooLarge(ctx, r.Big, size); why != "" {
		r.Skipped = why
		return r, nil
	}
	var err error
	r.Before, err = r.snapshot(ctx)
	return r, err
}

// tooLarge says why a workspace outside git is not copied, or "": the
// files a snapshot would take (its .gitignore files apply) are counted
// and their sizes summed, up to the bounds.
func (r Record) tooLarge(ctx context.Context, over bool, size int64) string {
	if !over {
		return r.roomFor(size)
	}
	// Over the bounds counting everything: count what git would take
	// (a node_modules its .gitignore excludes is not copied).
	out, err := git(ctx, r.Workspace, "", r.store(), "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return "the workspace could not be listed: " + err.Error()
	}
	n := 0
	size = 0
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" {
			continue
		}
		if n++; n > MaxFiles {
			return fmt.Sprintf("outside git, a workspace of more than %d files is not copied for undo", MaxFiles)
		}
		if st, err := os.Lstat(filepath.Join(r.Workspace, p)); err == nil && st.Mode().IsRegular() {
			if size += st.Size(); size > MaxBytes {
				return fmt.Sprintf("outside git, a workspace of more than %d MiB is not copied for undo", MaxBytes>>20)
			}
		}
	}
	return r.roomFor(size)
}

// roomFor says why size bytes are not copied to the session's
// filesystem, or "".
func (r Record) roomFor(size int64) string {
	var fs unix.Statfs_t
	if err := unix.Statfs(r.GitDir, &fs); err == nil && int64(fs.Bavail)*int64(fs.Bsize) < size+spare {
		return fmt.Sprintf("too little free space to copy the workspace's %d bytes for undo", size)
	}
	return ""
}

// snapshot returns the tree of the workspace's files now.
func (r Record) snapshot(ctx context.Context) (string, error) {
	if r.Skipped != "" {
		return "", errors.New(r.Skipped)
	}
	gitDir, tmpDir := filepath.Dir(r.RepoObjects), ""
	if r.GitDir != "" {
		// The private repository keeps its index: the copy is made
		// beside it and renamed over it once the tree is written.
		gitDir, tmpDir = r.GitDir, r.GitDir
	}
	// A private index, seeded with a copy of the user's (its stat data
	// spares hashing the files that did not change).
	idx, err := os.CreateTemp(tmpDir, "ctx-review-index-*")
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
	if r.GitDir != "" {
		_ = os.Rename(idx.Name(), orig)
	}
	return strings.TrimSpace(string(out)), nil
}

// End records the workspace as the run left it.
func (r *Record) End(ctx context.Context) error {
	if r.Skipped != "" {
		return nil
	}
	// The fingerprint first: a change after it is in the tree but not
	// in the fingerprint, so the next run takes its own snapshot.
	if !r.Big {
		r.AfterFP, _, _, _ = fingerprint(r.Workspace)
	}
	if r.AfterFP != "" && r.AfterFP == r.BeforeFP {
		r.After = r.Before // nothing changed: no git process
		return nil
	}
	t, err := r.snapshot(ctx)
	if err == nil {
		r.After = t
	}
	return err
}

// Dir is where a session keeps its records.
func Dir(sessionDir string) string { return filepath.Join(sessionDir, "review") }

// recordsName is the session's records: one JSON line per save, appended.
// A run saves at its start and again at its end; its record is its last
// line. Appending allocates no inode and lists no directory: a file per
// run, replaced by rename, made every send create and delete files (on a
// journal-less ext4 each creation scans past every inode freed in the
// last seconds), and finding the last record listed and stat'ed every
// record of the session at every run's start.
const recordsName = "records.jsonl"

// Save appends r to the session's records. Not fsynced: a record is a
// convenience beside the log, not part of it — a crash may lose the last
// run's undo, never a frame — and two fsyncs at each end of every send
// cost more than the rest of the review. A line a crash left torn is
// ended first, so it never swallows the next record.
func Save(sessionDir string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	p := filepath.Join(Dir(sessionDir), recordsName)
	const flags = os.O_RDWR | os.O_APPEND | os.O_CREATE | unix.O_NOFOLLOW
	f, err := os.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(Dir(sessionDir), 0o700); err == nil {
			f, err = os.OpenFile(p, flags, 0o600)
		}
	}
	if err != nil {
		return err
	}
	line := append(b, '\n')
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("review records: not a regular file")
	}
	if err != nil {
		f.Close()
		return err
	}
	if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(line) // one write: appended whole
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Load reads the record of run, or of the session's last run with one
// (the last saved) when run is "". Records of an older daemon
// (review/<run>.json, one file each) are read where the session's records
// have none.
func Load(sessionDir, run string) (Record, error) {
	r, ok, err := loadRecords(sessionDir, run)
	if err != nil {
		return r, err
	}
	if !ok {
		r, err = loadFile(sessionDir, run)
		if err != nil {
			return r, err
		}
	}
	// The stores are this session's, wherever the record says they were
	// (a renamed session's records name its old directory).
	r.Objects = filepath.Join(Dir(sessionDir), "objects")
	if r.GitDir != "" {
		r.GitDir = filepath.Join(Dir(sessionDir), "git")
		r.Objects = filepath.Join(r.GitDir, "objects")
	}
	return r, nil
}

// loadRecords finds run's last line in the records (any run's for ""),
// reading from the end; ok is false when there is none. A line that does
// not parse (torn by a crash) is skipped.
func loadRecords(sessionDir, run string) (r Record, ok bool, err error) {
	// O_NONBLOCK: a FIFO in its place is refused below, never waited on.
	f, err := os.OpenFile(filepath.Join(Dir(sessionDir), recordsName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, false, err
	}
	if !st.Mode().IsRegular() {
		return r, false, fmt.Errorf("review records: not a regular file")
	}
	// The last record is most often all that is read: the first chunk is
	// small (a record is a few hundred bytes), each next one four times
	// the last, up to 64 KiB.
	chunk := int64(4 << 10)
	var tail []byte // the bytes after the last newline seen, read so far
	for off := st.Size(); off > 0; chunk = min(chunk*4, 64<<10) {
		n := chunk
		if off < n {
			n = off
		}
		off -= n
		buf := make([]byte, n, n+int64(len(tail)))
		if _, err := f.ReadAt(buf, off); err != nil {
			return r, false, fmt.Errorf("review records: %w", err)
		}
		buf = append(buf, tail...)
		// Complete lines are those after a newline in buf (or from 0
		// when the file starts here).
		for {
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 && off > 0 {
				break // the line goes on before this chunk
			}
			line := buf[i+1:]
			buf = buf[:max(i, 0)]
			var c Record
			if len(line) > 0 && json.Unmarshal(line, &c) == nil && (run == "" || c.Run == run) {
				return c, true, nil
			}
			if i < 0 {
				break
			}
		}
		tail = buf
	}
	return r, false, nil
}

// loadFile reads an older daemon's record file of run (the newest by
// its time for "").
func loadFile(sessionDir, run string) (Record, error) {
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
	if r.Skipped != "" {
		return fmt.Errorf("run %s has no snapshot: %s", r.Run, r.Skipped)
	}
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
