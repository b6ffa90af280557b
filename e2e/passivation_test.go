package e2e

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// openFDs counts the daemon's open descriptors.
func (w *world) openFDs() int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(w.daemon.Process.Pid) + "/fd")
	return len(ents)
}

// idleWorld is a daemon passivating sessions idle for idle, a client of
// its agent p, and the daemon's descriptor count once it answered.
func idleWorld(t *testing.T, idle string) (*world, *client, int) {
	w := newWorld(t)
	w.start("CTX_SESSION_IDLE=" + idle)
	w.agent("p", nil)
	c := w.dial("p")
	c.send(map[string]any{"op": "ping"})
	c.must(5 * time.Second)
	return w, c, w.openFDs()
}

// TestIdleSessionsArePassivated: sessions with nothing to do close their
// files after CTX_SESSION_IDLE; a request to a passivated session replays a
// known id (P4), continues its seq, and resumes the same frames.
func TestIdleSessionsArePassivated(t *testing.T) {
	w, c, base := idleWorld(t, "1s")
	const n = 24
	for i := 0; i < n; i++ { // all at once: every session is live together
		c.send(sendReq("r"+strconv.Itoa(i), "echo hi", "session", "s"+strconv.Itoa(i)))
	}
	for done := 0; done < n; {
		f := c.must(20 * time.Second)
		if f.Type == "done" {
			if f.Status != "ok" {
				t.Fatalf("send: %s", f.raw)
			}
			done++
		}
	}
	busy := w.openFDs()
	if busy < base+n {
		t.Fatalf("descriptors: %d idle, %d with %d live sessions: expected each to hold its log open", base, busy, n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.openFDs() > base+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := w.openFDs(); got > base+2 {
		t.Fatalf("descriptors after the idle period: %d (idle daemon %d, busy %d): sessions were not passivated", got, base, busy)
	}
	before := w.events("p", "s3")
	// P4 across passivation: the same id replays, nothing runs again.
	c.send(sendReq("r3", "echo hi", "session", "s3"))
	got := c.until("done", 10*time.Second)
	if d := got[len(got)-1]; d.Status != "ok" || d.Run != before[len(before)-1].Run {
		t.Errorf("replay after passivation: %v", types(got))
	}
	if after := w.events("p", "s3"); len(after) != len(before) {
		t.Errorf("a replay after passivation appended %d frames", len(after)-len(before))
	}
	// A new request continues the seq.
	c.send(sendReq("r3b", "echo again", "session", "s3"))
	got = c.until("done", 10*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("send after passivation: %v", types(got))
	}
	after := w.events("p", "s3")
	for i := 1; i < len(after); i++ {
		if after[i].Seq != after[i-1].Seq+1 {
			t.Fatalf("seq %d after %d", after[i].Seq, after[i-1].Seq)
		}
	}
	if len(after) <= len(before) {
		t.Fatal("nothing appended by the new request")
	}
}

// TestQuietRunThenPassivation: a run that sends nothing for longer than
// CTX_SESSION_IDLE (a long tool call, a slow model) does not keep its
// session alive once it is done. (found by the chaos test)
func TestQuietRunThenPassivation(t *testing.T) {
	w, c, base := idleWorld(t, "200ms")
	c.send(sendReq("q1", "sleep 1", "session", "quiet"))
	if got := c.until("done", 20*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("send: %v", types(got))
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.openFDs() > base && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := w.openFDs(); got > base {
		t.Fatalf("descriptors %d, %d before the run: the session that was busy when its idle timer fired was never passivated", got, base)
	}
}
