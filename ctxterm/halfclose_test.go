package ctxterm

import (
	"net"
	"testing"
	"time"
)

// Regression: a same-uid client that half-closes (readLoop ends, setGone)
// while its writer is blocked on a full socket is never given a deadline:
// it is no longer in s.clients, so neither dropSlow nor Serve's flush
// deadline reaches it, and Serve never returns after the program exits.
// spec: T2
func TestHalfClosedClientDoesNotBlockServe(t *testing.T) {
	s := serve(t, []string{"/bin/sh", "-c", "sleep 0.3; head -c 1500000 /dev/zero | tr '\\0' a; sleep 0.3"}, nil)
	c, err := net.Dial("unix", s.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	uc := c.(*net.UnixConn)
	_ = uc.SetReadBuffer(4096)
	if _, err := uc.Write(Hello{Mode: ModeWatch}.Marshal()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // the output is queued; the writer blocks on our full socket
	_ = uc.CloseWrite()                 // reader ends: "closed"
	select {
	case <-s.done:
		t.Logf("Serve returned (fixed)")
	case <-time.After(8 * time.Second):
		t.Errorf("Serve still blocked 8s after the program exited: a half-closed client wedges ctxterm")
	}
	uc.Close() // let the test clean up
}
