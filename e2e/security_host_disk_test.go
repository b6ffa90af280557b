package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// checkLog reads a session's events.jsonl line by line: every line a valid
// frame, seq strictly increasing, and the last frame a done.
func checkLog(t *testing.T, w *world, agent string) {
	t.Helper()
	fh, err := os.Open(filepath.Join(w.sessionDir(agent, "default"), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 16<<20)
	var last int64
	var typ string
	for sc.Scan() {
		var f frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("%s: invalid events.jsonl line %q: %v", agent, sc.Text(), err)
		}
		if f.Seq <= last {
			t.Errorf("%s: seq %d after %d", agent, f.Seq, last)
		}
		last, typ = f.Seq, f.Type
	}
	if typ != "done" {
		t.Errorf("%s: the log ends with %q, not done", agent, typ)
	}
}

// TestSecurityHostDiskReserve: with CTX_ROOT on a small tmpfs and a disk
// reserve of 24 MiB, a tool writes into its agent home, past the reserve,
// at 20 MiB/s (a build or a download would). That run ends
// resource_exhausted with a message naming the reserve, the free space
// and the fix, before the filesystem is full; another agent's run that
// does not write, active at the same time, completes ok, and so does a
// new one afterwards (the space is still low); the daemon answers ping;
// both events.jsonl are intact. The same holds when the tool deletes its
// file and keeps writing it (space no directory shows: the run's open
// deleted files count).
func TestSecurityHostDiskReserve(t *testing.T) {
	t.Run("file", func(t *testing.T) { diskReserve(t, "fill") })
	t.Run("deleted-open", func(t *testing.T) { diskReserve(t, "fill-unlinked") })
}

func diskReserve(t *testing.T, attack string) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	w := newWorld(t)
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", w.root).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		w.stopQuiet()
		exec.Command("umount", "-l", w.root).Run()
	})
	w.start("CTX_DISK_RESERVE=24M")
	installAttack(t, w)
	w.tool("slow", "#!/bin/sh\nsleep \"$1\"\necho still-here\n")
	w.agent("writer", map[string]string{"tools": "attack\n"})
	w.agent("idle", map[string]string{"tools": "slow\n"})

	idle := w.dial("idle")
	// Active until well after the writer crossed the reserve (about 5 s in).
	idle.send(sendReq("i1", "tool slow 9"))
	wr := w.dial("writer")
	wr.send(sendReq("w1", "tool attack "+attack+" /home/agent/fill.bin 400 256 12"))
	got := wr.until("done", 60*time.Second)
	var errf frame
	for _, f := range got {
		if f.Type == "error" {
			errf = f
		}
	}
	if errf.Code != "resource_exhausted" {
		t.Fatalf("the writing run: %v, error %s; want error resource_exhausted", types(got), errf.raw)
	}
	for _, want := range []string{"disk reserve of 24.0 MiB", "free", "CTX_DISK_RESERVE", "agent home"} {
		if !strings.Contains(errf.Message, want) {
			t.Errorf("resource_exhausted message lacks %q: %s", want, errf.Message)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(w.root, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < 1<<20 {
		t.Errorf("the filesystem filled up (%d bytes free): the reserve did not hold", free)
	}
	if ig := idle.until("done", 30*time.Second); ig[len(ig)-1].Status != "ok" {
		t.Errorf("the other agent's run, concurrent, did not complete: %v", types(ig))
	}
	if !w.ping() {
		t.Error("the daemon does not answer ping")
	}
	// Space is still below the reserve (the written file stays): a run
	// that does not write still runs.
	idle.send(sendReq("i2", "tool slow 1"))
	if ig := idle.until("done", 30*time.Second); ig[len(ig)-1].Status != "ok" {
		t.Errorf("a new run of the other agent did not complete: %v", types(ig))
	}
	checkLog(t, w, "writer")
	checkLog(t, w, "idle")
}

// TestSecurityHostDiskLimit: with `disk 8M` in .d/limits, a tool writes
// 64 MiB into its agent home at 20 MiB/s; the run ends resource_exhausted
// with a message naming the limit, its file and that the daemon (not the
// kernel) measures it, with the home well short of 64 MiB, and its log
// intact; also when the tool deletes its file and keeps writing it.
func TestSecurityHostDiskLimit(t *testing.T) {
	t.Run("file", func(t *testing.T) { diskLimit(t, "fill") })
	t.Run("deleted-open", func(t *testing.T) { diskLimit(t, "fill-unlinked") })
}

func diskLimit(t *testing.T, attack string) {
	w := newWorld(t)
	w.start()
	installAttack(t, w)
	w.agent("capped", map[string]string{"tools": "attack\n", "limits": "disk 8M\n"})
	c := w.dial("capped")
	c.send(sendReq("c1", "tool attack "+attack+" /home/agent/fill.bin 64 256 12"))
	got := c.until("done", 60*time.Second)
	var errf frame
	for _, f := range got {
		if f.Type == "error" {
			errf = f
		}
	}
	if errf.Code != "resource_exhausted" {
		t.Fatalf("the run over its disk limit: %v, error %s; want error resource_exhausted", types(got), errf.raw)
	}
	for _, want := range []string{"disk limit of 8.0 MiB", "agent/capped.d/limits", "the kernel does not enforce it"} {
		if !strings.Contains(errf.Message, want) {
			t.Errorf("message lacks %q: %s", want, errf.Message)
		}
	}
	if attack == "fill" {
		fi, err := os.Stat(filepath.Join(w.root, "home", itoa(os.Getuid()), "agent", "capped", "fill.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= 40<<20 {
			t.Errorf("the home grew to %d bytes: the limit did not stop the writer", fi.Size())
		}
	}
	for _, f := range got {
		if f.Type == "tool_result" && (f.Status != "error" || !strings.Contains(f.Content, "disk watcher")) {
			t.Errorf("the writer's call was not ended by the disk watcher: %s", f.raw)
		}
	}
	checkLog(t, w, "capped")
}
