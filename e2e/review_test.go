package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
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

// TestReviewWhileAnotherRunHoldsTheWorkspace: two sessions in one
// workspace outside git. While one's run is in its tool call — its
// sandboxes hold the placeholders of the workspace's absent protected
// names there, an empty .git among them — the other's run is still
// snapshotted (the placeholder is no repository) and `ctx agent diff`
// shows what it changed.
func TestReviewWhileAnotherRunHoldsTheWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	w := newWorld(t)
	w.start()
	w.tool("mutate", "#!/bin/sh\nset -e\necho changed > /workspace/a.txt\necho mutated\n")
	w.tool("hold", "#!/bin/sh\nwhile [ ! -e /workspace/release ]; do sleep 0.05; done\necho held\n")
	w.agent("u", map[string]string{"tools": "mutate\nhold\n", "policy": "allow tool *\n"})
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("original\n"), 0o644)
	c := w.dial("u")
	c.send(sendReq("h1", "tool hold", "session", "holder", "workspace", ws))
	c.until("tool_call", 30*time.Second)
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !st.IsDir() {
		t.Fatalf("the holding run's .git placeholder: %v %v", st, err)
	}
	if r := w.ctx(ws, "", "agent", "send", "u", "--session", "b", "tool", "mutate"); r.code != 0 || !strings.Contains(r.stdout, "mutated") {
		t.Fatalf("send: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r := w.ctx(ws, "", "agent", "diff", "u", "--session", "b")
	if !strings.Contains(r.stdout, "-original") || !strings.Contains(r.stdout, "+changed") {
		t.Errorf("diff of the run beside the holder: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(ws, "release"), nil, 0o644)
	if got := c.until("done", 30*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("the holding run: %v", types(got))
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git after both runs: %v", err)
	}
}

// TestReviewRecordIsTheHostsAlone: the persistent terminal's processes
// see their session's directory (writable, for tools.json), and the
// session's runs keep their review records there. A record a tool could
// rewrite would point undo at any host directory; a private repository's
// config it could write would run its programs on the host. From a bash
// in the terminal, before the first record exists and after: nothing
// under review/ can be made, changed or removed, and the next run's
// record is the host's; the same for blobs/ (the images the owner
// attached). spec: X7 B2
func TestReviewRecordIsTheHostsAlone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	w, ws := termWorld(t)
	os.WriteFile(filepath.Join(w.root, "agent", "t1.d", "policy"), []byte("allow tool *\n"), 0o644)
	w.tool("touchit", "#!/bin/sh\necho changed >> /workspace/a.txt\necho touched\n")
	os.WriteFile(filepath.Join(w.root, "agent", "t1.d", "tools"), []byte("touchit\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	a := dialTerm(t, filepath.Join(w.run, "terminal", "t1", "default", "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	a.send("bash\r")
	a.expect("/workspace# ", 10*time.Second)
	sess := "/ctx/home/" + strconv.Itoa(os.Getuid()) + "/agent/t1/session/default"
	attack := func(key string) string {
		return a.run(`cd `+sess+` && { mkdir -p review/git 2>/dev/null; echo '{"run":"x","workspace":"/"}' > review/planted.json 2>/dev/null && r=wrote; `+
			`for f in review/*.json review/*.jsonl; do [ -e "$f" ] && echo forged 2>/dev/null > "$f" && r="$r,forged"; done; `+
			`echo '[core]' > review/git/config 2>/dev/null && r="$r,config"; rm -rf review 2>/dev/null; [ -e review ] || r="$r,removed"; `+
			`echo x > blobs/0000 2>/dev/null && r="$r,blob"; rm -rf blobs 2>/dev/null; [ -e blobs ] || r="$r,blobs-removed"; `+
			`echo "`+key+`""=[$r]"; cd /workspace; }`, key)
	}
	if got := attack("FIRST"); got != "[]" {
		t.Fatalf("before any run, a terminal process wrote the review directory: %s", got)
	}
	if r := w.ctx(ws, "", "agent", "send", "t1", "tool", "touchit"); r.code != 0 || !strings.Contains(r.stdout, "touched") {
		t.Fatalf("send: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got := attack("SECOND"); got != "[]" {
		t.Fatalf("a terminal process changed the review records: %s", got)
	}
	// The records: one line at the run's start and one at its end, both
	// the host's; no other record file.
	dir := filepath.Join(w.sessionDir("t1", "default"), "review")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("a record file %s beside the records", e.Name())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var rec struct{ Run, Workspace string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Workspace != ws {
			t.Errorf("record %q is not the host's (%v)", line, err)
		}
		runs[rec.Run] = true
	}
	if len(runs) != 1 {
		t.Errorf("records of %d runs, want the run's one:\n%s", len(runs), b)
	}
	if r := w.ctx(ws, "", "agent", "diff", "t1"); !strings.Contains(r.stdout, "+changed") {
		t.Errorf("diff: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestUndoOutsideGit: a workspace in no git work tree — the standard
// tools' edit in one run, bash in the next — is diffed and undone run by
// run, byte for byte; no .git appears in it. spec: K1
func TestUndoOutsideGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	f := newFakeProvider(t,
		anthropicToolUse("toolu_1", "call", "edit", "calc.sh", "$(( $1 - $2 ))", "$(( $1 + $2 ))"),
		anthropicText("Fixed."),
		anthropicToolUse("toolu_2", "call", "bash", "printf 'x\\000y' > data.bin && rm notes.txt && echo more >> calc.sh"),
		anthropicText("Done."))
	w := stdModelWorld(t, f)
	ws := t.TempDir()
	files := map[string]string{"calc.sh": calcBuggy, "notes.txt": "todo\n"}
	for n, c := range files {
		os.WriteFile(filepath.Join(ws, n), []byte(c), 0o644)
	}
	c := w.dial("m")
	var runs []string
	for i, in := range []string{"fix it", "tidy up"} {
		c.send(sendReq(fmt.Sprintf("r%d", i), in, "workspace", ws))
		got := c.until("done", 60*time.Second)
		calls, results := toolFrames(got)
		if len(calls) != 1 || len(results) != 1 || results[0].Status != "ok" {
			t.Fatalf("run %d: %v %v", i+1, calls, results)
		}
		runs = append(runs, got[len(got)-1].Run)
	}
	r := w.ctx(ws, "", "agent", "diff", "m")
	for _, want := range []string{"data.bin", "deleted file mode", "-todo", "+more"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff of the bash run lacks %q: %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	if r := w.ctx(ws, "", "agent", "undo", "m"); r.code != 0 {
		t.Fatalf("undo of the bash run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	fixed := strings.Replace(calcBuggy, "$(( $1 - $2 ))", "$(( $1 + $2 ))", 1)
	if b, _ := os.ReadFile(filepath.Join(ws, "calc.sh")); string(b) != fixed {
		t.Fatalf("calc.sh after undoing the bash run: %q", b)
	}
	// The edit's run, named.
	first := runs[0]
	if r := w.ctx(ws, "", "agent", "diff", "m", first); !strings.Contains(r.stdout, "+add() {") && !strings.Contains(r.stdout, "+\techo $(( $1 + $2 ))") {
		t.Errorf("diff of the edit run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := w.ctx(ws, "", "agent", "undo", "m", first); r.code != 0 {
		t.Fatalf("undo of the edit run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	for n, want := range files {
		if b, err := os.ReadFile(filepath.Join(ws, n)); err != nil || string(b) != want {
			t.Errorf("%s after both undos: %q %v", n, b, err)
		}
	}
	for _, n := range []string{"data.bin", ".git"} {
		if _, err := os.Lstat(filepath.Join(ws, n)); !os.IsNotExist(err) {
			t.Errorf("%s exists after the undos: %v", n, err)
		}
	}
}
