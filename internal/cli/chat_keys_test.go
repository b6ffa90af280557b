package cli

import (
	"io"
	"testing"
)

// TestKeyRouterKeepsKeysAcrossTheSwitch: keys the stdin reader routed to a
// run that had already ended (typed as its answer printed) reach the next
// prompt, after the run's own type-ahead and before later keys; at end of
// input the line editor reads EOF and the run's channel closes. spec: S3
func TestKeyRouterKeepsKeysAcrossTheSwitch(t *testing.T) {
	k := newKeyRouter()
	k.setIdle(false)
	k.feed([]byte{'a', 3})
	if b := <-k.run; b != 'a' {
		t.Fatalf("run read %q", b)
	}
	k.add('a') // the run loop keeps it as type-ahead
	if b := <-k.run; b != 3 {
		t.Fatalf("run read %q, want Ctrl+C", b)
	}
	k.feed([]byte("ls\r")) // the run loop has returned; nobody reads run
	k.setIdle(true)
	k.feed([]byte("x"))
	buf := make([]byte, 16)
	n, err := k.Read(buf)
	if err != nil || string(buf[:n]) != "als\rx" {
		t.Fatalf("line editor read %q, %v; want %q", buf[:n], err, "als\rx")
	}
	k.close()
	if _, err := k.Read(buf); err != io.EOF {
		t.Fatalf("after close: %v, want EOF", err)
	}
	if _, ok := <-k.run; ok {
		t.Fatal("run channel still open after close")
	}
}
