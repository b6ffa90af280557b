package agent

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRequestRacingPassivation: requests arrive at a session just as its
// idle timer (1 ms) fires, again and again. The agent actor stops an idle
// session only when every request routed to it has reached it (the Seen
// count of its Idle offer): each request is answered, none is lost with a
// stopped mailbox, and the session still passivates once they stop.
// spec: P4 (a request is answered, never lost)
func TestRequestRacingPassivation(t *testing.T) {
	sys, pid, c := startAgent(t, time.Millisecond)
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	defer c.Close()
	lines := bufio.NewScanner(c)
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		// Around the idle period: some requests land before the tick,
		// some between the session's Idle offer and the agent's answer.
		time.Sleep(time.Duration(rand.IntN(2500)) * time.Microsecond)
		fmt.Fprintf(c, `{"op":"resume","session":"s"}`+"\n")
		c.(*net.UnixConn).SetReadDeadline(time.Now().Add(5 * time.Second))
		if !lines.Scan() {
			t.Fatalf("request %d was never answered (lost to a passivation?): %v", i, lines.Err())
		}
		if !strings.Contains(lines.Text(), `"caught_up"`) {
			t.Fatalf("request %d: %s", i, lines.Text())
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := sys.Root.RequestFuture(pid, &stateSizes{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if *r.(*sizes) == (sizes{}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session never passivated after the requests stopped: %+v", *r.(*sizes))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
