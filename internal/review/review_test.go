package review

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return string(out)
}

// TestSnapshotDiffUndo: a run's changes — an edit, a new file, a deleted
// file, an untracked file changed, a mode change — are shown by Diff and
// put back byte for byte by Undo; the user's index, refs and stash are
// untouched; an undo after a later change to one of the files refuses and
// changes nothing. The workspace is a subdirectory of the repository.
func TestSnapshotDiffUndo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	repo := t.TempDir()
	gitT(t, repo, "init", "-q")
	ws := filepath.Join(repo, "app")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	files := map[string]string{"src/calc.sh": "add() { echo $(( $1 - $2 )); }\n", "README": "hello\n", "gone.txt": "bye\n", "run.sh": "#!/bin/sh\n"}
	for n, c := range files {
		os.WriteFile(filepath.Join(ws, n), []byte(c), 0o644)
	}
	os.WriteFile(filepath.Join(repo, "outside.txt"), []byte("not the workspace's\n"), 0o644)
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-qm", "init")
	os.WriteFile(filepath.Join(ws, "notes.untracked"), []byte("draft\n"), 0o644)
	index0, _ := os.ReadFile(filepath.Join(repo, ".git", "index"))
	refs0 := gitT(t, repo, "show-ref")

	dir := t.TempDir()
	objects0 := gitT(t, repo, "count-objects", "-v")
	r, err := Start(ctx, dir, "run-1", ws)
	if err != nil || r.Prefix != "app" || r.Before == "" {
		t.Fatalf("snapshot: %+v %v", r, err)
	}
	// The run: an edit, a new file, a deletion, an untracked file changed, a chmod.
	os.WriteFile(filepath.Join(ws, "src/calc.sh"), []byte("add() { echo $(( $1 + $2 )); }\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "src/new.go"), []byte("package src\n"), 0o644)
	os.Remove(filepath.Join(ws, "gone.txt"))
	os.WriteFile(filepath.Join(ws, "notes.untracked"), []byte("overwritten\n"), 0o644)
	os.Chmod(filepath.Join(ws, "run.sh"), 0o755)
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, r); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir, "")
	if err != nil || got != r {
		t.Fatalf("load: %+v %v", got, err)
	}
	var d bytes.Buffer
	if err := Diff(ctx, r, &d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-add() { echo $(( $1 - $2 )); }", "+add() { echo $(( $1 + $2 )); }", "+package src", "-bye", "+overwritten", "new mode 100755"} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, d.String())
		}
	}
	if strings.Contains(d.String(), "outside.txt") {
		t.Error("the diff shows a file outside the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(repo, ".git", "index")); !bytes.Equal(b, index0) {
		t.Error("the user's index changed")
	}
	if gitT(t, repo, "show-ref") != refs0 || gitT(t, repo, "stash", "list") != "" {
		t.Error("refs or the stash changed")
	}
	if gitT(t, repo, "count-objects", "-v") != objects0 {
		t.Error("the snapshots wrote objects into the repository")
	}

	// A later change to one of the run's files: refused, nothing touched.
	os.WriteFile(filepath.Join(ws, "src/new.go"), []byte("package src // mine\n"), 0o644)
	if _, err := Undo(ctx, r); !errors.Is(err, ErrChangedSince) || !strings.Contains(err.Error(), "src/new.go") {
		t.Fatalf("undo after a later change: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src/calc.sh")); !strings.Contains(string(b), "+ $2") {
		t.Fatal("a refused undo changed a file")
	}
	os.WriteFile(filepath.Join(ws, "src/new.go"), []byte("package src\n"), 0o644)
	cs, err := Undo(ctx, r)
	if err != nil || len(cs) != 5 {
		t.Fatalf("undo: %v %v", cs, err)
	}
	for n, c := range files {
		if b, err := os.ReadFile(filepath.Join(ws, n)); err != nil || string(b) != c {
			t.Errorf("%s after undo: %q %v", n, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.untracked")); string(b) != "draft\n" {
		t.Errorf("untracked file after undo: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "src/new.go")); !os.IsNotExist(err) {
		t.Error("the run's new file is still there")
	}
	if st, _ := os.Stat(filepath.Join(ws, "run.sh")); st.Mode().Perm() != 0o644 {
		t.Errorf("mode after undo %v", st.Mode())
	}
}

// TestSnapshotOutsideGit: a workspace in no git work tree is copied into
// the session's private repository: two runs' changes (an edit, a new
// file, a deletion, a chmod, a link) are diffed and undone byte for byte,
// the second run's snapshot re-using the first's index; no .git appears
// in the workspace; .gitignore applies; a workspace over the bounds gets
// a record saying why, and diff and undo say it.
func TestSnapshotOutsideGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	ws, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	files := map[string]string{"src/a.txt": "one\n", "gone.txt": "bye\n", "run.sh": "#!/bin/sh\n", ".gitignore": "*.log\n"}
	for n, c := range files {
		os.WriteFile(filepath.Join(ws, n), []byte(c), 0o644)
	}
	for run, change := range []func(){
		func() {
			os.WriteFile(filepath.Join(ws, "src/a.txt"), []byte("two\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "new.bin"), []byte("new\x00bytes"), 0o644)
			os.Remove(filepath.Join(ws, "gone.txt"))
			os.Chmod(filepath.Join(ws, "run.sh"), 0o755)
			os.Symlink("/etc/passwd", filepath.Join(ws, "link"))
			os.WriteFile(filepath.Join(ws, "build.log"), []byte("ignored\n"), 0o644)
		},
		func() { os.WriteFile(filepath.Join(ws, "src/a.txt"), []byte("three\n"), 0o644) },
	} {
		id := "run-" + string(rune('1'+run))
		r, err := Start(ctx, dir, id, ws)
		if err != nil || r.Before == "" || r.GitDir == "" || r.Skipped != "" {
			t.Fatalf("%s: snapshot: %+v %v", id, r, err)
		}
		change()
		if err := r.End(ctx); err != nil {
			t.Fatal(err)
		}
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := Diff(ctx, r, &out); err != nil {
			t.Fatal(err)
		}
		d := out.String()
		want := []string{"-one", "+two", "deleted file mode", "new.bin", "new mode 100755", "+/etc/passwd"}
		if run == 1 {
			want = []string{"-two", "+three"}
		}
		for _, w := range want {
			if !strings.Contains(d, w) {
				t.Errorf("%s: diff lacks %q:\n%s", id, w, d)
			}
		}
		if strings.Contains(d, "build.log") {
			t.Errorf("%s: an ignored file is in the diff:\n%s", id, d)
		}
		if run == 1 {
			// Undo the second run: a.txt is "two" again, the first run's work kept.
			if _, err := Undo(ctx, r); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "src/a.txt")); string(b) != "two\n" {
				t.Fatalf("undo of run 2: %q", b)
			}
		}
	}
	r1, err := Load(dir, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Undo(ctx, r1); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		if b, err := os.ReadFile(filepath.Join(ws, n)); err != nil || string(b) != c {
			t.Errorf("%s after undo: %q %v", n, b, err)
		}
	}
	if st, _ := os.Stat(filepath.Join(ws, "run.sh")); st.Mode().Perm() != 0o644 {
		t.Errorf("run.sh mode after undo: %v", st.Mode())
	}
	for _, n := range []string{"new.bin", "link", ".git"} {
		if _, err := os.Lstat(filepath.Join(ws, n)); !os.IsNotExist(err) {
			t.Errorf("%s exists after undo: %v", n, err)
		}
	}

	big := t.TempDir()
	for i := 0; i <= MaxFiles; i++ {
		os.WriteFile(filepath.Join(big, strconv.Itoa(i)), nil, 0o644)
	}
	r, err := Start(ctx, t.TempDir(), "run-1", big)
	if err != nil || r.Before != "" || !strings.Contains(r.Skipped, "more than 20000 files") {
		t.Fatalf("a workspace over the bound: %+v %v", r, err)
	}
	if err := Diff(ctx, r, io.Discard); err == nil || !strings.Contains(err.Error(), "has no snapshot: outside git") {
		t.Errorf("diff of a skipped run: %v", err)
	}
	if _, err := Undo(ctx, r); err == nil || !strings.Contains(err.Error(), "has no snapshot") {
		t.Errorf("undo of a skipped run: %v", err)
	}
}

// TestSnapshotRunsNoFilterAndUndoFollowsNoLink: a .gitattributes the run
// wrote cannot make the host's snapshot run a filter from the user's
// global config; a directory the run replaced by a link out of the
// workspace is put back as a directory, nothing written through the link.
func TestSnapshotRunsNoFilterAndUndoFollowsNoLink(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	home, outside := t.TempDir(), t.TempDir()
	mark := filepath.Join(outside, "filter-ran")
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[filter \"evil\"]\n\tclean = touch "+mark+"; cat\n"), 0o644)
	t.Setenv("HOME", home)
	ws := t.TempDir()
	gitT(t, ws, "init", "-q")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.WriteFile(filepath.Join(ws, "src", "a.txt"), []byte("a\n"), 0o644)
	gitT(t, ws, "add", "-A")
	gitT(t, ws, "commit", "-qm", "init")
	r, err := Start(ctx, t.TempDir(), "run-1", ws)
	if err != nil {
		t.Fatal(err)
	}
	// The run: attributes asking for the filter, src swapped for a link out.
	os.WriteFile(filepath.Join(ws, ".gitattributes"), []byte("* filter=evil\n"), 0o644)
	os.RemoveAll(filepath.Join(ws, "src"))
	os.Symlink(outside, filepath.Join(ws, "src"))
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the snapshot ran a filter of the user's global config")
	}
	if _, err := Undo(ctx, r); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(filepath.Join(ws, "src")); err != nil || !st.IsDir() {
		t.Fatalf("src after undo: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src", "a.txt")); string(b) != "a\n" {
		t.Fatalf("src/a.txt after undo: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("undo wrote through the link: %v", ents)
	}
}

// TestLoadUsesTheSessionsStores: a record's stores are read from the
// session it is loaded from — after a rename, or whatever a record says.
func TestLoadUsesTheSessionsStores(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []Record{
		{Run: "run-1", Objects: "/elsewhere/objects", RepoObjects: "/repo/.git/objects"},
		{Run: "run-2", GitDir: "/old/session/review/git", Objects: "/old/session/review/git/objects"},
	} {
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	r1, err1 := Load(dir, "run-1")
	r2, err2 := Load(dir, "run-2")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if r1.Objects != filepath.Join(dir, "review", "objects") || r1.GitDir != "" || r1.RepoObjects != "/repo/.git/objects" {
		t.Errorf("run-1: %+v", r1)
	}
	if r2.GitDir != filepath.Join(dir, "review", "git") || r2.Objects != filepath.Join(dir, "review", "git", "objects") {
		t.Errorf("run-2: %+v", r2)
	}
}

// TestUnchangedWorkspaceRunsNoGit: a run that changed nothing costs no
// git process at its end, and the next run reuses that tree at its
// start; a change (its times older than racy, so only the fingerprint
// can see it) is snapshotted. In a git work tree and outside one.
func TestUnchangedWorkspaceRunsNoGit(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho \"$*\" >> "+log+"\nexec "+real+" \"$@\"\n"), 0o755)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	calls := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
	ctx := context.Background()
	for _, inGit := range []bool{false, true} {
		ws, dir := t.TempDir(), t.TempDir()
		if inGit {
			gitT(t, ws, "init", "-q")
		}
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
		time.Sleep(racy + 100*time.Millisecond)
		r1, err := Start(ctx, dir, "run-1", ws)
		if err != nil || r1.BeforeFP == "" {
			t.Fatalf("git %v: %+v %v", inGit, r1, err)
		}
		n := calls()
		if err := r1.End(ctx); err != nil || r1.After != r1.Before || calls() != n {
			t.Fatalf("git %v: an unchanged run's end: %+v %v, %d git calls", inGit, r1, err, calls()-n)
		}
		Save(dir, r1)
		r2, err := Start(ctx, dir, "run-2", ws)
		if err != nil || r2.Before != r1.After || calls() != n {
			t.Fatalf("git %v: the next run's start: %+v %v, %d git calls", inGit, r2, err, calls()-n)
		}
		// Same size, times set back past racy: only ctime and the
		// fingerprint tell.
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("two\n"), 0o644)
		old := time.Now().Add(-time.Hour)
		os.Chtimes(filepath.Join(ws, "a.txt"), old, old)
		time.Sleep(racy + 100*time.Millisecond)
		if err := r2.End(ctx); err != nil || r2.After == r2.Before || calls() == n {
			t.Fatalf("git %v: a changed run's end: %+v %v", inGit, r2, err)
		}
		var out bytes.Buffer
		if err := Diff(ctx, r2, &out); err != nil || !strings.Contains(out.String(), "+two") {
			t.Fatalf("git %v: diff %v %s", inGit, err, out.String())
		}
	}
}

// BenchmarkRunReview: a run's review (start, end, its record) in a
// workspace of 50 files outside git, when the run changed a file and
// when it changed nothing after a run that changed nothing, against the floor of any snapshot: one git
// process (`git --version`), interleaved.
func BenchmarkRunReview(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git")
	}
	ctx := context.Background()
	ws, dir := b.TempDir(), b.TempDir()
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(ws, strconv.Itoa(i)), []byte("x"), 0o644)
	}
	time.Sleep(racy + 50*time.Millisecond)
	run := func(id string, change func()) time.Duration {
		t0 := time.Now()
		r, err := Start(ctx, dir, id, ws)
		if err != nil {
			b.Fatal(err)
		}
		change()
		if err := r.End(ctx); err != nil {
			b.Fatal(err)
		}
		if err := Save(dir, r); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	run("warm", func() {})
	var same, changed, git time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		changed += run("changed-"+strconv.Itoa(i), func() { os.WriteFile(filepath.Join(ws, "0"), []byte(strconv.Itoa(i)), 0o644) })
		time.Sleep(racy)                         // the change settles: the next run can trust its times
		run("after-"+strconv.Itoa(i), func() {}) // snapshots at its start (the changed run's end could not be trusted)
		same += run("same-"+strconv.Itoa(i), func() {})
		t0 := time.Now()
		if err := exec.Command("git", "--version").Run(); err != nil {
			b.Fatal(err)
		}
		git += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(same.Microseconds())/n/1000, "unchanged-ms")
	b.ReportMetric(float64(changed.Microseconds())/n/1000, "changed-ms")
	b.ReportMetric(float64(git.Microseconds())/n/1000, "git-ms")
	b.ReportMetric(float64(same)/float64(git), "unchanged/git")
	b.ReportMetric(float64(changed)/float64(git), "changed/git")
}

// TestFingerprintLeavesOutWhatGitSkips: the placeholders another run in
// the same workspace holds (a FIFO of mode 000, an empty directory of
// mode 01500, both made a moment ago) change neither the fingerprint nor
// its use — the tree is reused with no git process — while a new file, a
// symlink, or a file in a new directory do change it.
func TestFingerprintLeavesOutWhatGitSkips(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "b.txt"), []byte("two\n"), 0o644)
	time.Sleep(racy + 50*time.Millisecond)
	before, n, _, _ := fingerprint(ws)
	if before == "" || n != 3 {
		t.Fatalf("fingerprint %q of %d entries", before, n)
	}
	// What a run's sandbox holds in the workspace while it lasts.
	if err := unix.Mkfifo(filepath.Join(ws, ".envrc"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(ws, ".envrc"), filepath.Join(ws, "sub", ".profile")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(ws, ".vscode"), 0o1500)
	os.Chmod(filepath.Join(ws, ".vscode"), 0o1500)
	if got, _, _, _ := fingerprint(ws); got != before {
		t.Fatalf("placeholders changed the fingerprint: %q, was %q", got, before)
	}
	os.Remove(filepath.Join(ws, ".envrc"))
	os.Remove(filepath.Join(ws, "sub", ".profile"))
	os.Remove(filepath.Join(ws, ".vscode"))
	for name, change := range map[string]func(){
		"a new file": func() { os.WriteFile(filepath.Join(ws, "c.txt"), nil, 0o644) },
		"a symlink":  func() { os.Symlink("a.txt", filepath.Join(ws, "l")) },
		"a file in a new dir": func() {
			os.MkdirAll(filepath.Join(ws, "d"), 0o755)
			os.WriteFile(filepath.Join(ws, "d", "x"), nil, 0o644)
		},
		"a file moved to another": func() { os.Rename(filepath.Join(ws, "sub", "b.txt"), filepath.Join(ws, "b.txt")) },
	} {
		change()
		old := time.Now().Add(-time.Hour) // times set back: only the paths can tell
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				os.Chtimes(p, old, old)
			}
			return nil
		})
		time.Sleep(racy + 50*time.Millisecond)
		got, _, _, _ := fingerprint(ws)
		if got == "" || got == before {
			t.Errorf("%s: fingerprint %q, before %q", name, got, before)
		}
		before = got
	}
}

// TestStartPassesOverAPlaceholderGit: a workspace outside git in which
// another run holds the placeholder of the protected .git (an empty
// directory of mode 01500) is still snapshotted, into the session's
// private repository, with no git process asked for a repository there;
// a .git directory with a HEAD is a work tree.
func TestStartPassesOverAPlaceholderGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o1500); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(ws, ".git"), 0o1500)
	if inWorkTree(ws) {
		t.Fatal("an empty .git taken for a repository")
	}
	r, err := Start(context.Background(), dir, "run-1", ws)
	if err != nil || r.GitDir == "" || r.Before == "" {
		t.Fatalf("Start: %+v %v", r, err)
	}
	os.Remove(filepath.Join(ws, ".git"))
	gitT(t, ws, "init", "-q")
	if !inWorkTree(ws) || !inWorkTree(filepath.Join(ws, "sub")) {
		t.Fatal("a repository not found")
	}
}

// TestFingerprintBoundsWhatItSkips: entries the fingerprint does not
// hash still count against MaxFiles — an agent's workspace of FIFOs is
// walked no further than one of files.
func TestFingerprintBoundsWhatItSkips(t *testing.T) {
	ws := t.TempDir()
	for i := 0; i <= MaxFiles; i++ {
		if err := unix.Mkfifo(filepath.Join(ws, strconv.Itoa(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if fp, n, _, over := fingerprint(ws); fp != "" || !over || n != MaxFiles+1 {
		t.Fatalf("%d FIFOs: fingerprint %q, %d entries, over %v", MaxFiles+1, fp, n, over)
	}
}
