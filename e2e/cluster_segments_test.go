package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
)

// A cluster session's log lives in segments/ (docs/cluster.md "The
// segmented log"): from inside the agent's view it is read-only like
// events.jsonl — an agent can neither forge a segment nor plant a
// high-epoch one that would make the next owner's takeover fail. In the
// single daemon, a segments/ the agent plants in its writable session
// directory changes nothing: the session still serves.
func TestSegmentsAreTheHostsAlone(t *testing.T) {
	w, ws := termWorld(t)
	os.WriteFile(filepath.Join(w.root, "agent", "t1.d", "policy"), []byte("allow tool *\n"), 0o644)
	w.tool("hello", "#!/bin/sh\necho hello-from-tool\n")
	os.WriteFile(filepath.Join(w.root, "agent", "t1.d", "tools"), []byte("hello\n"), 0o644)
	if r := w.ctx(ws, "", "agent", "send", "t1", "tool", "hello"); r.code != 0 {
		t.Fatalf("send: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// As a cluster owner's activation would have made it.
	seg := filepath.Join(w.sessionDir("t1", "default"), "segments")
	if err := os.Mkdir(seg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seg, "00000000000000000005.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
		t.Fatalf("agent start: %d %s%s", r.code, r.stdout, r.stderr)
	}
	a := dialTerm(t, filepath.Join(w.run, "terminal", "t1", "default", "main.sock"), ctxterm.ModeAttach)
	a.expect("tsh> ", 10*time.Second)
	a.send("bash\r")
	a.expect("/workspace# ", 10*time.Second)
	sess := "/ctx/home/" + strconv.Itoa(os.Getuid()) + "/agent/t1/session/default"
	got := a.run(`cd `+sess+` && { r=; echo x > segments/99999999999999999999.jsonl 2>/dev/null && r=planted; `+
		`echo forged >> segments/00000000000000000005.jsonl 2>/dev/null && r="$r,forged"; `+
		`rm -rf segments 2>/dev/null; [ -e segments ] || r="$r,removed"; echo "SE""G=[$r]"; cd /workspace; }`, "SEG")
	if got != "[]" {
		t.Fatalf("a sandbox process changed segments/: %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(seg, "00000000000000000005.jsonl")); string(b) != "{}\n" {
		t.Fatalf("segment changed: %q", b)
	}
	if ents, _ := os.ReadDir(seg); len(ents) != 1 {
		t.Fatalf("segments/ holds %d files, want the host's one", len(ents))
	}
	// The single daemon ignores segments/: the session still serves.
	if r := w.ctx(ws, "", "agent", "send", "t1", "tool", "hello"); r.code != 0 || !strings.Contains(r.stdout, "hello-from-tool") {
		t.Fatalf("send after segments/ appeared: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
