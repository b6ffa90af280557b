package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFullDiskIsNotCorruption: with CTX_ROOT on a small tmpfs filled to the
// last byte, a send is answered resource_exhausted (not session_corrupt),
// other requests are still served — ping, a replay (P4), and another
// agent's socket: its ping and a resume of its session — and once space
// returns the same session serves again with its history intact, every
// frame committed before still in the log unchanged, and every log line
// valid with seq strictly increasing.
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
	w.agent("other", nil)
	c := w.dial("fd")
	c.send(sendReq("a1", "echo first"))
	committed := c.until("done", 10*time.Second)
	if committed[len(committed)-1].Status != "ok" {
		t.Fatalf("first send: %v", types(committed))
	}
	o := w.dial("other")
	o.send(sendReq("o1", "echo other"))
	if got := o.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("send to the other agent: %v", types(got))
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
	if !strings.Contains(f.Message, "no space") {
		t.Errorf("resource_exhausted without its cause: %s", f.raw)
	}
	c.send(map[string]any{"op": "ping"})
	if f := c.must(5 * time.Second); f.Type != "pong" {
		t.Errorf("ping on a full disk: %s", f.raw)
	}
	// A known id replays from the log: nothing to write, so it is served.
	c.send(sendReq("a1", "echo first"))
	// Or, when the failed append left a torn line, resource_exhausted:
	// reopening the log keeps that line in events.jsonl.broken-N first,
	// which needs space.
	if f := c.must(10 * time.Second); f.Type == "error" {
		if f.Code != "resource_exhausted" || !strings.Contains(f.Message, "no space") {
			t.Errorf("replay on a full disk: %s", f.raw)
		}
	} else if got := c.until("done", 10*time.Second); !got[len(got)-1].Replay || got[len(got)-1].Status != "ok" {
		t.Errorf("replay on a full disk: %v", types(got))
	}
	// Another agent keeps serving what needs no disk.
	o2 := w.dial("other")
	o2.send(map[string]any{"op": "ping"})
	if f := o2.must(5 * time.Second); f.Type != "pong" {
		t.Errorf("the other agent's ping on a full disk: %s", f.raw)
	}
	o2.send(map[string]any{"op": "resume", "session": "default"})
	if got := o2.until("caught_up", 10*time.Second); len(got) < 2 || got[0].Text != "echo other" {
		t.Errorf("the other agent's resume on a full disk: %v", types(got))
	}
	if !sysPing(w) {
		t.Error("the system socket does not answer ping on a full disk")
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
	// Every frame committed before the disk filled is still there, unchanged.
	logged := map[int64]string{}
	for _, ev := range w.events("fd", "default") {
		logged[ev.Seq] = ev.raw
	}
	for _, f := range committed {
		if f.Seq > 0 && logged[f.Seq] != f.raw {
			t.Errorf("committed frame seq %d: sent %s, log has %q", f.Seq, f.raw, logged[f.Seq])
		}
	}
}

// TestFewDescriptorsIsNotCorruption: the daemon's descriptor limit lowered
// to a few dozen above its idle count, then many sessions at once: those
// that cannot open their files are answered resource_exhausted (never
// session_corrupt, never a silent drop), those that can run to done; once
// the idle sessions passivated and their descriptors are free, new sessions
// and the refused ones serve again, the system socket answers, and every
// session's log is valid with seq strictly increasing.
func TestFewDescriptorsIsNotCorruption(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_SESSION_IDLE=3s")
	w.agent("fl", nil)
	c := w.dial("fl")
	c.send(sendReq("warm", "echo hi", "session", "warm"))
	c.until("done", 10*time.Second)
	waitFor(t, "the warm session to passivate", 20*time.Second, func() bool { return w.openFDs() <= 16 })
	base := w.openFDs()
	limit := uint64(base + 64)
	pid := w.daemon.Process.Pid
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Skipf("cannot lower the daemon's descriptor limit: %v", err)
	}
	// One session after another, each left live (idle period 2 s): they
	// run until the descriptors run out, then are refused.
	codes := map[string]int{}
	var refused []int
	ranBefore, n := 0, 0
	for i := 0; i < 400 && len(refused) < 10; i++ {
		n++
		c.send(sendReq("r"+strconv.Itoa(i), "echo hi", "session", "s"+strconv.Itoa(i)))
	read:
		for {
			f := c.must(60 * time.Second)
			switch {
			case f.Type == "error" && f.Seq > 0 && f.Code != "resource_exhausted":
				// The run actor's definition load and sandbox start name the
				// machine running out too, not agent_invalid or
				// sandbox_unavailable.
				t.Errorf("a run at the descriptor limit: %s, want resource_exhausted", f.raw)
			case f.Type == "error" && f.Seq > 0 && f.Code == "resource_exhausted":
				codes["run "+f.Code]++
			case f.Type == "done":
				codes["done "+f.Status]++
				if f.Status == "ok" && len(refused) == 0 {
					ranBefore++
				}
				break read
			case f.Type == "error" && f.Seq == 0:
				codes[f.Code]++
				if f.Code != "resource_exhausted" {
					t.Fatalf("a send at the descriptor limit: %s, want done or resource_exhausted", f.raw)
				}
				if !strings.Contains(f.Message, "too many open files") {
					t.Errorf("resource_exhausted without its cause: %s", f.raw)
				}
				refused = append(refused, i)
				break read
			}
		}
	}
	t.Logf("descriptor limit %d (idle daemon %d): %d sends answered %v", limit, base, n, codes)
	if codes["resource_exhausted"] == 0 {
		t.Fatalf("no send hit the descriptor limit %d: %v", limit, codes)
	}
	if ranBefore < 10 {
		t.Errorf("only %d sessions ran before the limit: %v", ranBefore, codes)
	}
	t.Logf("%d sessions ran before the first refusal", ranBefore)
	// The idle sessions passivate and give their descriptors back.
	waitFor(t, "the sessions to passivate", 30*time.Second, func() bool { return w.openFDs() <= base+2 })
	c.send(sendReq("fresh", "echo again", "session", "fresh"))
	if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("a new session after descriptors returned: %v", types(got))
	}
	if len(refused) > 0 {
		i := strconv.Itoa(refused[0])
		c.send(sendReq("r"+i, "echo hi", "session", "s"+i))
		if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
			t.Fatalf("a refused session after descriptors returned: %v", types(got))
		}
	}
	if !sysPing(w) {
		t.Error("the system socket does not answer ping after descriptors returned")
	}
	// Every log valid, seq strictly increasing, every run concluded.
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(w.sessionDir("fl", "x")), "*", "events.jsonl"))
	if len(dirs) == 0 {
		t.Fatal("no session logs")
	}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		runs, dones := map[string]bool{}, map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l == "" {
				continue
			}
			var ev frame
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("%s: invalid line %q: %v", p, l, err)
			}
			if ev.Seq <= last {
				t.Errorf("%s: seq %d after %d", p, ev.Seq, last)
			}
			last = ev.Seq
			if ev.Run != "" {
				runs[ev.Run] = true
			}
			if ev.Type == "done" {
				dones[ev.Run]++
			}
		}
		for r := range runs {
			if dones[r] != 1 {
				t.Errorf("%s: run %s has %d done", p, r, dones[r])
			}
		}
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

// sysPing pings the daemon's system socket.
func sysPing(w *world) bool {
	c, err := net.Dial("unix", w.run+"/system.sock")
	if err != nil {
		return false
	}
	defer c.Close()
	c.Write([]byte("{\"op\":\"ping\"}\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.Contains(line, `"pong"`)
}
