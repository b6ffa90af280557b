package unixsock

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestListen: 0600 in a 0700 directory made on demand, a live server
// refused, a stale file replaced, a non-socket refused, unlinked on close,
// our own credentials seen on a connection. spec: A4
func TestListen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "sub")
	p := filepath.Join(dir, "s.sock")
	ln, err := Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	if st, _ := os.Lstat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v", st.Mode().Perm())
	}
	if _, err := Listen(p); !errors.Is(err, ErrInUse) {
		t.Errorf("second listen on a live socket: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		cred, err := PeerCred(c)
		if err != nil || int(cred.Uid) != os.Getuid() || int(cred.Pid) != os.Getpid() {
			t.Errorf("peer %+v %v", cred, err)
		}
	}()
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	c.Close()
	ln.Close()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after close: %v", err)
	}
	// a stale socket file (nobody listens) is replaced
	stale, _ := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = Listen(p)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln.Close()
	// a regular file is not removed
	os.WriteFile(p, []byte("x"), 0o600)
	if _, err := Listen(p); err == nil {
		t.Error("listened over a regular file")
	}
}

// A socket file is 0600 the moment bind makes it, not only once Listen's
// chmod ran: a stat in between saw the umask's 0755. spec: A4 L6
func TestSocketBornOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	l, err := ownerOnly.Listen(context.Background(), "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the socket as bound: %v %v, want 0600", st.Mode(), err)
	}
}
