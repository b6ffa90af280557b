package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffAndUndo: a run whose tool changes the workspace (a shell script
// editing, adding, deleting, chmod-ing files — any tool, not only the
// standard ones) is shown by `ctx agent diff` and put back byte for byte
// by `ctx agent undo`; the repository's index, refs and objects are
// untouched; an
// undo after a later change refuses and changes nothing.
func TestDiffAndUndo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	w := newWorld(t)
	w.start()
	w.tool("mutate", "#!/bin/sh\nset -e\ncd /workspace\nprintf 'add() { echo $(( $1 + $2 )); }\\n' > calc.sh\nrm gone.txt\nprintf 'new\\000bytes' > new.bin\nchmod 755 run.sh\necho mutated\n")
	w.agent("u", map[string]string{"tools": "mutate\n", "policy": "allow tool *\n"})
	ws := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	files := map[string]string{"calc.sh": "add() { echo $(( $1 - $2 )); }\n", "gone.txt": "bye\n", "run.sh": "#!/bin/sh\n"}
	for n, c := range files {
		os.WriteFile(filepath.Join(ws, n), []byte(c), 0o644)
	}
	git("add", "-A")
	git("commit", "-qm", "init")
	index0, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	refs0 := git("show-ref")
	objects0 := git("count-objects", "-v")

	if r := w.ctx(ws, "", "agent", "send", "u", "tool", "mutate"); r.code != 0 || !strings.Contains(r.stdout, "mutated") {
		t.Fatalf("send: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r := w.ctx(ws, "", "agent", "diff", "u")
	for _, want := range []string{"-add() { echo $(( $1 - $2 )); }", "+add() { echo $(( $1 + $2 )); }", "deleted file mode", "new.bin", "new mode 100755"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff lacks %q: %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "index")); string(b) != string(index0) || git("show-ref") != refs0 || git("count-objects", "-v") != objects0 {
		t.Fatal("the snapshot touched the repository's index, refs or objects")
	}
	os.WriteFile(filepath.Join(ws, "new.bin"), []byte("mine"), 0o644)
	if r := w.ctx(ws, "", "agent", "undo", "u"); r.code != 1 || !strings.Contains(r.stderr, "changed since the run: new.bin") {
		t.Fatalf("undo after a later change: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "calc.sh")); !strings.Contains(string(b), "+ $2") {
		t.Fatal("a refused undo changed a file")
	}
	os.WriteFile(filepath.Join(ws, "new.bin"), []byte("new\x00bytes"), 0o644)
	if r := w.ctx(ws, "", "agent", "undo", "u"); r.code != 0 || !strings.Contains(r.stdout, "undid run") {
		t.Fatalf("undo: %d %s %s", r.code, r.stdout, r.stderr)
	}
	for n, c := range files {
		if b, err := os.ReadFile(filepath.Join(ws, n)); err != nil || string(b) != c {
			t.Errorf("%s after undo: %q %v", n, b, err)
		}
	}
	if st, _ := os.Stat(filepath.Join(ws, "run.sh")); st.Mode().Perm() != 0o644 {
		t.Errorf("run.sh mode after undo: %v", st.Mode())
	}
	if _, err := os.Stat(filepath.Join(ws, "new.bin")); !os.IsNotExist(err) {
		t.Error("the run's new file survived the undo")
	}
	if s := git("status", "--porcelain"); s != "" {
		t.Errorf("git status after undo:\n%s", s)
	}
}
