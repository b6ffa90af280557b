package fdhygiene

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMain doubles as the child: with FDHYGIENE_CHILD set it reports what
// it inherited, closes it (keeping KEEP), and reports what is left open.
func TestMain(m *testing.M) {
	if os.Getenv("FDHYGIENE_CHILD") == "1" {
		before, _ := Inherited()
		keep, _ := strconv.Atoi(os.Getenv("KEEP"))
		closed, err := CloseInherited(func(fd int) bool { return fd == keep })
		after, _ := Inherited()
		os.Stdout.WriteString("before=" + ints(before) + " closed=" + ints(closed) + " after=" + ints(after) + " listen=" + strconv.Itoa(ListenFDs()) + "\n")
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func ints(a []int) string {
	s := make([]string, len(a))
	for i, v := range a {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// TestCloseInherited: a child started with three extra descriptors sees
// exactly those as inherited (not the runtime's own), closes two and keeps
// the one it was told to.
func TestCloseInherited(t *testing.T) {
	var files []*os.File
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		files = append(files, r)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FDHYGIENE_CHILD=1", "KEEP=4", "LISTEN_PID=1", "LISTEN_FDS=2")
	cmd.ExtraFiles = files // fds 3, 4, 5 in the child
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// The child also inherits what this test process inherited itself
	// (the shell's or the CI runner's descriptors): those too are closed.
	own, err := Inherited()
	if err != nil {
		t.Fatal(err)
	}
	before, closed := []int{3, 4, 5}, []int{3, 5}
	for _, fd := range own {
		if fd > 5 {
			before, closed = append(before, fd), append(closed, fd)
		}
	}
	want := "before=" + ints(before) + " closed=" + ints(closed) + " after=4 listen=0"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("child reported %q, want %q", got, want)
	}
}

// TestListenFDs: the activation range counts only for the pid it names.
func TestListenFDs(t *testing.T) {
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDS", "2")
	keep := KeepListenFDs()
	if ListenFDs() != 2 || keep(2) || !keep(3) || !keep(4) || keep(5) {
		t.Fatalf("ListenFDs %d, keep 2..5 = %v %v %v %v", ListenFDs(), keep(2), keep(3), keep(4), keep(5))
	}
	t.Setenv("LISTEN_PID", "1")
	if ListenFDs() != 0 || KeepListenFDs()(3) {
		t.Fatal("another pid's activation range was kept")
	}
}
