package procstat

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// tail is fields 3..22 of a real stat line (state S, ppid 1, starttime 4242).
const tail = " S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 4242 1000 200 18446744073709551615"

// TestParseTable covers hostile comm values. spec: U2
func TestParseTable(t *testing.T) {
	cases := []struct {
		name, in string
		want     Stat
		err      bool
	}{
		{name: "plain", in: "12 (sh)" + tail, want: Stat{12, "sh", 'S', 1, 4242}},
		{name: "space and parens a) (b", in: "12 (a) (b)" + tail, want: Stat{12, "a) (b", 'S', 1, 4242}},
		{name: "fake fields in comm", in: "12 (x) R 99 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1)" + tail, want: Stat{12, "x) R 99 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1", 'S', 1, 4242}},
		{name: "newlines", in: "12 (a\nb\n)" + tail + "\n", want: Stat{12, "a\nb\n", 'S', 1, 4242}},
		{name: "empty comm", in: "12 ()" + tail, want: Stat{12, "", 'S', 1, 4242}},
		{name: "only parens", in: "12 ())))" + tail, want: Stat{12, ")))", 'S', 1, 4242}},
		{name: "zombie", in: "12 (z)" + strings.Replace(tail, " S ", " Z ", 1), want: Stat{12, "z", 'Z', 1, 4242}},
		{name: "truncated before starttime", in: "12 (sh) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0", err: true},
		{name: "truncated in comm", in: "12 (sh", err: true},
		{name: "empty", in: "", err: true},
		{name: "no pid", in: "(sh)" + tail, err: true},
		{name: "negative pid", in: "-3 (sh)" + tail, err: true},
		{name: "bad ppid", in: "12 (sh) S x" + tail[4:], err: true},
		{name: "bad state", in: "12 (sh) SS" + tail[2:], err: true},
		{name: "bad starttime", in: "12 (sh) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 x 1", err: true},
		{name: "close before open", in: "12 )sh(" + tail, err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(c.in))
			if c.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("want ErrMalformed, got %+v, %v", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"12 (sh)" + tail, "12 (a) (b)" + tail, "12 ()" + tail, "12 (a\nb)" + tail, "12 (sh", "", "1 () S 0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Parse(b)
		if err != nil {
			return
		}
		if st.PID <= 0 || st.PPID < 0 {
			t.Fatalf("accepted bad ids: %+v", st)
		}
		// Whatever comm is, it is exactly what lies between the first '('
		// and the last ')'.
		s := string(b)
		if st.Comm != s[strings.IndexByte(s, '(')+1:strings.LastIndexByte(s, ')')] {
			t.Fatalf("comm %q from %q", st.Comm, s)
		}
	})
}

// TestReadRealProcessWithHostileComm starts a process whose comm holds
// ") (" and reads it back from /proc. spec: U2
func TestReadRealProcessWithHostileComm(t *testing.T) {
	dir := t.TempDir()
	exe := dir + "/a) (b"
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep:", err)
	}
	if err := os.Symlink(sleep, exe); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	st, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "a) (b" || st.PPID != os.Getpid() || st.StartTime == 0 {
		t.Fatalf("got %+v", st)
	}
	self, err := Read(os.Getpid())
	if err != nil || self.StartTime > st.StartTime {
		t.Fatalf("self %+v %v: parent must not be younger than child", self, err)
	}
}

func TestReadMissing(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if _, err := Read(cmd.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		// The pid might have been reused in between; only a parse of a
		// live stranger is acceptable then.
		if err != nil {
			t.Fatalf("want ErrNotExist, got %v", err)
		}
	}
	if _, err := Read(0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid 0: %v", err)
	}
}

func TestBootID(t *testing.T) {
	id, err := BootID()
	if err != nil {
		t.Skip("no boot id:", err)
	}
	if len(id) != 36 {
		t.Fatalf("boot id %q", id)
	}
}
