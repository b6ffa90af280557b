package stdtool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/applypatch"
	"github.com/cortexfs/ctx/internal/atomicfile"
)

func init() {
	register(&Tool{
		Name:  "apply_patch",
		Usage: "apply_patch PATCH",
		Min:   1, Max: 1,
		Meta: Meta{Description: `Add, delete, update and move files with one patch, all or nothing (the Codex apply_patch format).
argv: apply_patch PATCH — PATCH is the whole patch as one argument:
*** Begin Patch
*** Add File: PATH   (then every line of the new file, each starting with +)
*** Delete File: PATH
*** Update File: PATH
*** Move to: NEWPATH   (optional, right after Update File)
@@ LINE   (optional: a line of the file, such as a function header, found first; "@@" alone is allowed)
then the chunk: ' ' context, '-' removed and '+' added lines (about 3 context lines around each change); "*** End of File" after a chunk anchors it at the file's end
*** End Patch
example: apply_patch "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-    print(\"Hi\")\n+    print(\"Hello\")\n*** End Patch"
Context and removed lines are matched exactly, else ignoring trailing, then surrounding whitespace. If any part does not apply (lines not found, a file to update or delete missing, a file to add or move onto already there) nothing is changed and the error names the file and chunk. Files keep their line endings (CRLF stays CRLF), mode and a missing final newline. Paths are relative to the working directory (absolute ones work too); a symlink that leads out of the workspace is refused.`},
		Run: runApplyPatch,
	})
}

// patchFile is a file a patch names, as read from disk.
type patchFile struct {
	real   string // the path written: symlinks resolved (CheckWritable)
	loaded bool
	exists bool
	data   []byte
	mode   fs.FileMode
	binary bool
	err    error
}

// patchFiles reads the files of a patch, each once (applypatch.Files).
type patchFiles struct {
	byName map[string]*patchFile // by the patch's (canonical) names
}

// ReadFile implements applypatch.Files.
func (pf *patchFiles) ReadFile(name string) ([]byte, error) {
	f := pf.byName[name]
	if f == nil {
		return nil, fmt.Errorf("%s: path not resolved", name) // every name is
	}
	if !f.loaded {
		f.load(name)
	}
	switch {
	case f.err != nil:
		return nil, f.err
	case !f.exists:
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return f.data, nil
}

func (f *patchFile) load(name string) {
	f.loaded = true
	if _, err := os.Stat(f.real); errors.Is(err, fs.ErrNotExist) {
		return
	}
	data, st, err := loadFile(f.real, name, "patch")
	if err != nil {
		f.err = err
		return
	}
	f.exists, f.data, f.mode, f.binary = true, data, st.Mode().Perm(), IsBinary(head(data))
}

func runApplyPatch(ctx context.Context, a *Args, out *Output) error {
	p, err := applypatch.Parse(a.Pos[0])
	if err != nil {
		return Failf("invalid patch: %v\nNo file was changed.", err)
	}
	// Resolve every path; spellings of one file share the first one's name.
	pf := &patchFiles{byName: map[string]*patchFile{}}
	byReal := map[string]string{}
	resolve := func(name string) (string, error) {
		if f := pf.byName[name]; f != nil {
			return name, nil
		}
		abs, err := Abs(name)
		if err != nil {
			return "", err
		}
		real, err := CheckWritable(abs)
		if err != nil {
			return "", err
		}
		if first, ok := byReal[real]; ok {
			return first, nil
		}
		byReal[real] = name
		pf.byName[name] = &patchFile{real: real}
		return name, nil
	}
	for i := range p.Hunks {
		h := &p.Hunks[i]
		fail := func(err error) error {
			return Failf("%s %s (patch line %d): %v\nNo file was changed.", h.Kind, h.Path, h.Line, err)
		}
		if h.Kind == applypatch.Delete || h.MoveTo != "" {
			// a symlink itself is neither deleted nor moved: say so
			if abs, err := Abs(h.Path); err == nil {
				if st, err := os.Lstat(abs); err == nil && st.Mode()&fs.ModeSymlink != 0 {
					return fail(errors.New("it is a symlink; apply_patch does not delete or move symlinks (change the file it points to, or use bash)"))
				}
			}
		}
		name, err := resolve(h.Path)
		if err != nil {
			return fail(err)
		}
		h.Path = name
		if h.MoveTo != "" {
			if h.MoveTo, err = resolve(h.MoveTo); err != nil {
				return fail(fmt.Errorf("move to: %w", err))
			}
		}
		if h.Kind == applypatch.Update {
			if _, err := pf.ReadFile(h.Path); err == nil && pf.byName[h.Path].binary {
				return fail(errors.New("it is a binary file; apply_patch changes text files only"))
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	changes, err := applypatch.Apply(p, pf)
	if err != nil {
		return Failf("%v\nNo file was changed.", err)
	}
	if err := commitChanges(pf, changes); err != nil {
		return err
	}
	out.Printf("Success. Updated the following files:\n")
	for _, h := range p.Hunks {
		added, removed := h.Stats()
		switch {
		case h.Kind == applypatch.Add:
			out.Printf("A %s (+%d)\n", h.Path, added)
		case h.Kind == applypatch.Delete:
			out.Printf("D %s\n", h.Path)
		case h.MoveTo != "" && h.MoveTo != h.Path && len(h.Chunks) == 0:
			out.Printf("R %s -> %s\n", h.Path, h.MoveTo)
		case h.MoveTo != "" && h.MoveTo != h.Path:
			out.Printf("R %s -> %s (+%d -%d)\n", h.Path, h.MoveTo, added, removed)
		default:
			out.Printf("M %s (+%d -%d)\n", h.Path, added, removed)
		}
	}
	return nil
}

// commitRename and commitRemove make a commit's changes; tests replace
// them to fail one half-way.
var (
	commitRename = os.Rename
	commitRemove = os.Remove
)

// step is one file of a commit: its temp file, then its rename or removal.
type step struct {
	c       applypatch.Change
	f       *patchFile
	mode    fs.FileMode // of the new file
	tmp     string      // the new bytes, beside the file; "" for a deletion
	done    bool        // renamed in (or removed)
	created []string    // directories made for it
}

// commitChanges writes every change or none: all new contents go to temp
// files beside their files first (nothing changed yet if one fails), then
// each is renamed in (or its file removed); if one of those fails, the
// files already changed get their old bytes back.
func commitChanges(pf *patchFiles, changes []applypatch.Change) error {
	var steps []*step
	for _, c := range changes {
		if !c.Changed() {
			continue
		}
		s := &step{c: c, f: pf.byName[c.Path], mode: newFileMode}
		if c.Existed {
			s.mode = s.f.mode
		}
		if from := pf.byName[c.MovedFrom]; c.MovedFrom != "" && from != nil && from.exists {
			s.mode = from.mode
		}
		steps = append(steps, s)
	}
	cleanup := func() {
		for i := len(steps) - 1; i >= 0; i-- {
			s := steps[i]
			if s.tmp != "" && !s.done {
				os.Remove(s.tmp)
			}
			for j := len(s.created) - 1; j >= 0; j-- {
				os.Remove(s.created[j]) // only when still empty
			}
		}
	}
	for _, s := range steps {
		if !s.c.Exists {
			continue
		}
		created, err := mkdirs(filepath.Dir(s.f.real))
		s.created = created
		if err == nil {
			s.tmp, err = writeTemp(s.f.real, s.c.New, s.mode)
		}
		if err != nil {
			cleanup()
			return withNothingChanged(pathErr("write", s.c.Path, err))
		}
	}
	for i, s := range steps {
		var err error
		if s.c.Exists {
			err = commitRename(s.tmp, s.f.real)
		} else {
			err = commitRemove(s.f.real)
		}
		if err == nil {
			s.done = true
			continue
		}
		what := "write"
		if !s.c.Exists {
			what = "delete"
		}
		failed := restore(steps[:i])
		cleanup()
		msg := fmt.Sprintf("cannot %s %s: %v.", what, s.c.Path, cause(err))
		if len(failed) == 0 {
			return Failf("%s The files already changed were restored: no file was changed.", msg)
		}
		return Failf("%s Restoring the files already changed failed for: %s; check them.", msg, strings.Join(failed, "; "))
	}
	dirs := map[string]bool{}
	for _, s := range steps {
		dirs[filepath.Dir(s.f.real)] = true
		for _, d := range s.created {
			dirs[filepath.Dir(d)] = true
		}
	}
	for d := range dirs {
		atomicfile.SyncDir(d) // best effort: the renames are done
	}
	return nil
}

// restore puts the old state back for the steps done; it returns what it
// could not restore.
func restore(steps []*step) []string {
	var failed []string
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if !s.done {
			continue
		}
		var err error
		if s.c.Existed {
			var tmp string
			if _, err = mkdirs(filepath.Dir(s.f.real)); err == nil {
				tmp, err = writeTemp(s.f.real, s.c.Old, s.f.mode)
			}
			if err == nil {
				if err = os.Rename(tmp, s.f.real); err != nil {
					os.Remove(tmp)
				}
			}
		} else {
			err = os.Remove(s.f.real)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", s.c.Path, err))
		}
	}
	return failed
}

// cause is the errno of a path error, or err.
func cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// withNothingChanged adds that nothing changed to a failure.
func withNothingChanged(err error) error {
	var f *Failure
	if errors.As(err, &f) {
		return Failf("%s\nNo file was changed.", f.Msg)
	}
	return fmt.Errorf("%w (no file was changed)", err)
}

// mkdirs makes dir and its missing parents and returns the ones it made,
// outermost first.
func mkdirs(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		_, err := os.Lstat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, err
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// writeTemp writes data with mode to a new temp file beside path, synced.
func writeTemp(path string, data []byte, mode fs.FileMode) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".patch-*")
	if err != nil {
		return "", err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}
