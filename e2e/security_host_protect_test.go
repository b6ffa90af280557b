package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warnings are the messages of a run's warning frames.
func warnings(frames []frame) []string {
	var out []string
	for _, f := range frames {
		if f.Type == "warning" {
			out = append(out, f.Message)
		}
	}
	return out
}

func anyContains(ss []string, subs ...string) bool {
	for _, s := range ss {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(s, sub)
		}
		if all {
			return true
		}
	}
	return false
}

// TestSecurityHostProtectFailsClosed: from inside a real run an agent
// plants 1,030 empty .envrc files (past the protected-path walk's bound of
// 1,024) in a workspace holding a nested repository. Its next run cannot
// write that repository's .git/config or a hook — the whole workspace is
// read-only — and a warning frame names the `partial DIR` grant of
// .d/protect that lifts it; host git then runs nothing planted. The
// end-of-run check, whose walk is cut short the same way, says so in a
// warning rather than reporting nothing. With the grant the run writes
// its workspace as before (paths past the bound unprotected, as granted).
func TestSecurityHostProtectFailsClosed(t *testing.T) {
	w := newWorld(t)
	w.start()
	installAttack(t, w)
	w.agent("pw", map[string]string{"tools": "attack\n"})
	home, marks := t.TempDir(), t.TempDir()
	mark := filepath.Join(marks, "ran")
	ws, err := filepath.EvalSymlinks(w.workspace())
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(ws, "nested", "repo")
	os.MkdirAll(repo, 0o755)
	mustGit(t, home, repo, "init", "-q")
	mustGit(t, home, repo, "commit", "-q", "--allow-empty", "-m", "first")

	// Run 1: the workspace is writable (its walk is complete); the agent
	// plants the files, then calls again: that call's sandbox already has
	// the workspace read-only, and the run is told. Its end-of-run check
	// is cut short: said.
	c := w.dial("pw")
	c.send(sendReq("plant", "tooltwice attack plant 1030 /workspace", "workspace", ws))
	frames := c.until("done", 60*time.Second)
	var res []frame
	for _, f := range frames {
		if f.Type == "tool_result" {
			res = append(res, f)
		}
	}
	if len(res) != 2 || results(res[0].Content)["planted"] != "1030" {
		t.Fatalf("planting: %v", types(frames))
	}
	if res[1].Status != "error" || !strings.Contains(res[1].Content, "read-only file system") {
		t.Errorf("the second call, after the planting, could write: %s", res[1].raw)
	}
	if !anyContains(warnings(frames), "/workspace is read-only", "partial "+ws) {
		t.Errorf("the run that made its workspace read-only was not told: %q", warnings(frames))
	}
	if !anyContains(warnings(frames), "end-of-run check", "incomplete", "/workspace", "more than 1024 protected paths") {
		t.Errorf("the cut-short end-of-run check of the planting run was not said: %q", warnings(frames))
	}

	// Run 2: the walk stops at its bound; the workspace is read-only.
	tr, frames := callTool(t, w, "pw", ws, "attack", "fsops",
		"fsmon", "/workspace/nested/repo/.git/config", filepath.Join(ws, "evil.sh"),
		"hook", "/workspace/nested/repo/.git/hooks/pre-commit", mark,
		"w", "/workspace/new.txt", "x")
	r := results(tr.Content)
	if len(r) != 3 {
		t.Fatalf("attack output incomplete:\n%s", tr.Content)
	}
	for k, v := range r {
		if v == "ok" {
			t.Errorf("write past a cut-short walk succeeded: %s", k)
		}
	}
	ws2 := warnings(frames)
	if !anyContains(ws2, "/workspace is read-only", "partial "+ws, "agent/pw.d/protect") {
		t.Errorf("no warning naming the grant that lifts the read-only workspace: %q", ws2)
	}
	if !anyContains(ws2, "end-of-run check", "incomplete") {
		t.Errorf("the cut-short end-of-run check was not said: %q", ws2)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, ".git", "config")); strings.Contains(string(b), "fsmonitor") {
		t.Errorf("nested .git/config written on the host:\n%s", b)
	}
	hostGit(t, home, repo, "commit", "-q", "--allow-empty", "-m", "second")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("host git ran a hook planted past the walk's bound")
	}

	// Run 3: with the grant, the workspace is writable as before.
	if err := os.WriteFile(filepath.Join(w.root, "agent", "pw.d", "protect"), []byte("partial "+ws+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, frames = callTool(t, w, "pw", ws, "attack", "fsops", "w", "/workspace/new.txt", "x")
	if v := results(tr.Content)["w:/workspace/new.txt"]; v != "ok" {
		t.Errorf("with `partial %s` the workspace is still not writable: %s", ws, tr.Content)
	}
	if anyContains(warnings(frames), "is read-only") {
		t.Errorf("read-only warning despite the grant: %q", warnings(frames))
	}
	if !anyContains(warnings(frames), "end-of-run check", "incomplete") {
		t.Errorf("the cut-short end-of-run check was not said under the grant: %q", warnings(frames))
	}
}
