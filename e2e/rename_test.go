package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestRenameSession: `ctx agent rename-session` moves a session whole to
// its new name (its history, then the next send continues it there), the
// old name starts afresh; a taken name is refused and nothing moves; a
// session with an active run is refused busy; without a daemon ctx renames
// the directory itself.
func TestRenameSession(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("rn", nil)
	w.mustCtx("agent", "send", "rn", "echo first")
	if r := w.ctx("", "", "agent", "rename-session", "rn", "default", "bugfix"); r.code != 0 || !strings.Contains(r.stdout, "renamed") {
		t.Fatalf("rename: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(w.sessionDir("rn", "default")); !os.IsNotExist(err) {
		t.Fatal("the old name is still there")
	}
	if h := w.mustCtx("agent", "history", "rn", "--session", "bugfix"); !strings.Contains(h, "echo first") {
		t.Fatalf("history under the new name:\n%s", h)
	}
	w.mustCtx("agent", "send", "rn", "--session", "bugfix", "echo second")
	if got := userTextsOf(w, "rn", "bugfix"); strings.Join(got, "|") != "echo first|echo second" {
		t.Fatalf("the renamed session's messages: %q", got)
	}
	w.mustCtx("agent", "send", "rn", "echo fresh")
	if got := userTextsOf(w, "rn", "default"); strings.Join(got, "|") != "echo fresh" {
		t.Fatalf("the old name afresh: %q", got)
	}
	if r := w.ctx("", "", "agent", "rename-session", "rn", "default", "bugfix"); r.code != 2 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("onto a taken name: %d %s", r.code, r.stderr)
	}
	if got := userTextsOf(w, "rn", "default"); len(got) != 1 {
		t.Fatalf("a refused rename moved something: %q", got)
	}
	c := w.dial("rn")
	c.send(sendReq("long", "sleep 30", "session", "busy"))
	waitFor(t, "the run", 10*time.Second, func() bool { return strings.Contains(strings.Join(userTextsOf(w, "rn", "busy"), ""), "sleep") })
	if r := w.ctx("", "", "agent", "rename-session", "rn", "busy", "other"); r.code != 1 || !strings.Contains(r.stderr, "active run") {
		t.Fatalf("an active session: %d %s", r.code, r.stderr)
	}
	w.mustCtx("agent", "cancel", "rn", "--session", "busy")
	c.until("done", 10*time.Second)
	w.stop()
	if r := w.ctx("", "", "agent", "rename-session", "rn", "bugfix", "offline"); r.code != 0 {
		t.Fatalf("without a daemon: %d %s", r.code, r.stderr)
	}
	if got := userTextsOf(w, "rn", "offline"); len(got) != 2 {
		t.Fatalf("renamed offline: %q", got)
	}
}

func userTextsOf(w *world, agent, session string) []string {
	var out []string
	if _, err := os.Stat(w.sessionDir(agent, session) + "/events.jsonl"); err != nil {
		return nil
	}
	for _, f := range w.events(agent, session) {
		if f.Type == "user" {
			out = append(out, f.Text)
		}
	}
	return out
}
