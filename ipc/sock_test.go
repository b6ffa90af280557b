package ipc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLineReader: a line of exactly 1 MiB is read; one byte more is
// ErrTooLarge; a final line without newline is returned, then io.EOF.
// spec: P2 (interfaces.md "Socket frames": lines ≤ 1 MiB)
func TestLineReader(t *testing.T) {
	exact := bytes.Repeat([]byte("a"), MaxLine)
	cases := []struct {
		name  string
		input []byte
		want  []string // lines, then the error
		err   error
	}{
		{"two lines", []byte("a\nbc\n"), []string{"a", "bc"}, io.EOF},
		{"empty lines", []byte("\n\nx\n"), []string{"", "", "x"}, io.EOF},
		{"final line without newline", []byte("a\nlast"), []string{"a", "last"}, io.EOF},
		{"empty stream", nil, nil, io.EOF},
		{"exactly 1 MiB", append(append([]byte{}, exact...), '\n'), []string{string(exact)}, io.EOF},
		{"exactly 1 MiB at EOF", exact, []string{string(exact)}, io.EOF},
		{"1 MiB then more", append(append(append([]byte{}, exact...), '\n'), "next\n"...), []string{string(exact), "next"}, io.EOF},
		{"1 MiB + 1", append(append(append([]byte{}, exact...), 'b'), '\n'), nil, ErrTooLarge},
		{"line after a good one over 1 MiB", append([]byte("ok\n"), bytes.Repeat([]byte("z"), 3*MaxLine)...), []string{"ok"}, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lr := NewLineReader(bytes.NewReader(tc.input))
			for i, want := range tc.want {
				got, err := lr.Next()
				if err != nil || string(got) != want {
					t.Fatalf("line %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
				}
			}
			if got, err := lr.Next(); !errors.Is(err, tc.err) || got != nil {
				t.Fatalf("after the lines: %d bytes, %v; want %v", len(got), err, tc.err)
			}
		})
	}
}

// TestLineReaderFinalLineOverLimit: a last line without newline is held to
// the same 1 MiB bound as every other line. spec: P2
func TestLineReaderFinalLineOverLimit(t *testing.T) {
	lr := NewLineReader(bytes.NewReader(bytes.Repeat([]byte("a"), MaxLine+1)))
	got, err := lr.Next()
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a final unterminated line of %d bytes: got %d bytes, %v; want ErrTooLarge", MaxLine+1, len(got), err)
	}
}

// TestLineReaderSize: a frame reader takes lines up to its own bound (the
// daemon's frames may exceed the 1 MiB request bound) and not one byte more.
func TestLineReaderSize(t *testing.T) {
	line := bytes.Repeat([]byte("a"), 3<<20)
	lr := NewLineReaderSize(bytes.NewReader(append(append(line, '\n'), append(line, 'a', '\n')...)), 3<<20)
	if got, err := lr.Next(); err != nil || len(got) != 3<<20 {
		t.Fatalf("a line of exactly the bound: %d bytes, %v", len(got), err)
	}
	if _, err := lr.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a line one byte over: %v, want ErrTooLarge", err)
	}
}

// shortDir returns a directory whose socket paths fit sun_path (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestListenHygiene: the directory is 0700 and the socket 0600; a stale
// socket file is removed; a live one is refused with ErrSocketInUse; a
// non-socket file is never removed. spec: STYLE 8 (interfaces.md "Locations")
func TestListenHygiene(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "agent", "a.sock")

	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v mode %v", err, st.Mode())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v", dst.Mode().Perm())
	}

	// Live: a second daemon must not steal the socket.
	if _, err := Listen(path); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("live socket: want ErrSocketInUse, got %v", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the live socket was removed: %v", err)
	}
	ln.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("Close must unlink the socket: %v", err)
	}

	// Stale: a socket file nobody serves (a crashed daemon).
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket file missing: %v", err)
	}
	ln, err = Listen(path)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ln.Close()

	// Not a socket: refused, and left alone.
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Fatal("Listen touched a regular file")
	}
}

// TestDialTriesPathsInOrder: the first answering path wins; none → ErrUnavailable. spec: T4
func TestDialTriesPathsInOrder(t *testing.T) {
	dir := shortDir(t)
	good := filepath.Join(dir, "good.sock")
	ln, err := Listen(good)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dial(context.Background(), filepath.Join(dir, "missing.sock"), good)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := Dial(context.Background(), filepath.Join(dir, "missing.sock")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
}

// TestPeerCred reads the kernel's credentials of the other end of a real
// socket: here, this very process. spec: A4, STYLE 8
func TestPeerCred(t *testing.T) {
	a, b := socketPair(t)
	defer a.Close()
	defer b.Close()
	cred, err := PeerCred(a)
	if err != nil {
		t.Fatal(err)
	}
	if int(cred.Pid) != os.Getpid() || int(cred.Uid) != os.Getuid() || int(cred.Gid) != os.Getgid() {
		t.Fatalf("cred %+v, want pid %d uid %d gid %d", *cred, os.Getpid(), os.Getuid(), os.Getgid())
	}

	// And over an accepted connection from a listener.
	dir := shortDir(t)
	ln, err := Listen(filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := Dial(context.Background(), filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_ = ln.SetDeadline(time.Now().Add(5 * time.Second))
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	cred, err = PeerCred(sc)
	if err != nil || int(cred.Pid) != os.Getpid() || int(cred.Uid) != os.Getuid() {
		t.Fatalf("accepted: %+v %v", cred, err)
	}
}

// TestLineReaderCut: a final line without its newline is returned and
// marked cut (a writer cut off); a whole line is not.
func TestLineReaderCut(t *testing.T) {
	lr := NewLineReader(strings.NewReader("{\"a\":1}\n{\"b\""))
	if l, err := lr.Next(); err != nil || string(l) != `{"a":1}` || lr.Cut() {
		t.Fatalf("whole line: %q %v cut=%v", l, err, lr.Cut())
	}
	if l, err := lr.Next(); err != nil || string(l) != `{"b"` || !lr.Cut() {
		t.Fatalf("cut line: %q %v cut=%v", l, err, lr.Cut())
	}
}
