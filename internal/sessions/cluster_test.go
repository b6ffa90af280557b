package sessions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/ipc"
)

// ScanDir reads a cluster session's segmented chain only on a cluster's
// root (an ancestor holds cluster.json): a segments/ planted in a single
// daemon's session directory — writable from the agent's sandbox — never
// replaces events.jsonl in what the person is shown; nor does a
// cluster.json planted in the session directory itself.
func TestScanDirReadsTheChainOnlyOnAClusterRoot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "home", "1000", "agent", "a", "session", "s")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	plain := (&ipc.Frame{Type: ipc.TypeUser, Seq: 1, Run: "r", Text: "plain"}).Line()
	if err := os.WriteFile(filepath.Join(dir, store.EventsFile), plain, 0o600); err != nil {
		t.Fatal(err)
	}
	l, _, err := store.OpenSegmented(dir, 7, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ipc.Frame{Type: ipc.TypeUser, Run: "r2", Text: "segmented"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	texts := func() []string {
		var out []string
		if _, err := ScanDir(dir, func(f *Frame) { out = append(out, f.Text) }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := texts(); len(got) != 1 || got[0] != "plain" {
		t.Fatalf("single daemon's root: %q, want events.jsonl's frame only", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := texts(); len(got) != 1 {
		t.Fatalf("a marker in the session directory itself decided: %q", got)
	}
	if err := os.WriteFile(filepath.Join(root, "cluster.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := texts(); len(got) != 2 || got[0] != "plain" || got[1] != "segmented" {
		t.Fatalf("cluster root: %q, want the chain (segment 0, then n1's)", got)
	}
}
