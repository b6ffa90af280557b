package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFullDiskIsNotCorruption: with CTX_ROOT on a small tmpfs filled to the
// last byte, a send is answered resource_exhausted (not session_corrupt),
// other requests are still served, and once space returns the same session
// serves again with its history intact and every log line valid.
// issue 15 item 3
func TestFullDiskIsNotCorruption(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	w := newWorld(t)
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", w.root).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		w.stopQuiet()
		exec.Command("umount", "-l", w.root).Run()
	})
	w.start()
	w.agent("fd", nil)
	c := w.dial("fd")
	c.send(sendReq("a1", "echo first"))
	if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("first send: %v", types(got))
	}
	filler := filepath.Join(w.root, "filler")
	fill(t, filler)
	// The log's last page may still have room: send until it has none.
	var f frame
	for i := 0; i < 64 && f.Type != "error"; i++ {
		c.send(sendReq("b"+strconv.Itoa(i), "echo second"))
		for f = c.must(10 * time.Second); f.Type != "error" && f.Type != "done"; f = c.must(10 * time.Second) {
		}
	}
	if f.Type != "error" || f.Code != "resource_exhausted" {
		t.Errorf("a send on a full disk: %s, want error resource_exhausted", f.raw)
	}
	c.send(map[string]any{"op": "ping"})
	if f := c.must(5 * time.Second); f.Type != "pong" {
		t.Errorf("ping on a full disk: %s", f.raw)
	}
	os.Remove(filler)
	c.send(sendReq("a3", "echo third"))
	if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("send after space returned: %v", types(got))
	}
	// The log: valid lines, strictly increasing seq, both answered runs there.
	fh, err := os.Open(filepath.Join(w.sessionDir("fd", "default"), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 4<<20)
	last, text := 0, ""
	for sc.Scan() {
		var ev struct {
			Seq  int    `json:"seq"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("invalid log line %q: %v", sc.Text(), err)
		}
		if ev.Seq <= last {
			t.Errorf("seq %d after %d", ev.Seq, last)
		}
		last, text = ev.Seq, text+ev.Text+"|"
	}
	if !strings.Contains(text, "echo first") || !strings.Contains(text, "echo third") {
		t.Errorf("history lost: %s", text)
	}
}

// fill writes zeros to path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	small := make([]byte, 512)
	for {
		if _, err := f.Write(small); err != nil {
			break
		}
	}
}
