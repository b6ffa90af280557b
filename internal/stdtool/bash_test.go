package stdtool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fastGrace lowers bashGrace for a test.
func fastGrace(t *testing.T) {
	old := bashGrace
	bashGrace = 300 * time.Millisecond
	t.Cleanup(func() { bashGrace = old })
}

// TestBash: what the result shows and the exit status of the tool.
// The standard toolset: bash COMMAND_LINE [--timeout S].
func TestBash(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile(filepath.Join(dir, "here.txt"), nil, 0o644)
	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"stdout", []string{"echo hello"}, "hello\n[exit status 0]\n", 0},
		{"both streams, status", []string{"echo out; echo err >&2; exit 3"}, "out\n[stderr]\nerr\n[exit status 3]\n", 1},
		{"stderr only", []string{"echo oops >&2; false"}, "[stderr]\noops\n[exit status 1]\n", 1},
		{"no trailing newline", []string{"printf abc"}, "abc\n[exit status 0]\n", 0},
		{"nothing", []string{"true"}, "[exit status 0]\n", 0},
		{"cwd", []string{"ls"}, "here.txt\n[exit status 0]\n", 0},
		{"stdin is empty", []string{"cat; echo end"}, "end\n[exit status 0]\n", 0},
		{"a signal", []string{"kill -TERM $$"}, "[killed by signal 15 (terminated)]\n", 1},
		{"a shell line", []string{"for i in 1 2; do echo $i; done | tac"}, "2\n1\n[exit status 0]\n", 0},
		{"empty", []string{"  "}, "bash: empty command line\n", 1},
		{"bad timeout", []string{"true", "--timeout", "601"}, "bash: flag --timeout: \"601\" is not from 0 to 10m0s\n", 1},
		{"two args", []string{"echo", "hi"}, "bash: takes at most 1 argument(s), got 2: \"echo\" \"hi\"\nusage: bash COMMAND_LINE [--timeout S]\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, code := searchRun(t, "bash", c.args...)
			if got != c.want || code != c.code {
				t.Errorf("bash %q: exit %d\n%s\nwant exit %d\n%s", c.args, code, got, c.code, c.want)
			}
		})
	}
}

// alive reports whether the process pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || !strings.HasPrefix(string(stat[i+1:]), " Z")
}

// grandchild starts a background process that ignores SIGTERM and holds
// the output pipes, writing its pid to a file; it returns the command line
// and where the pid will be.
func grandchild(t *testing.T, then string) (string, string) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	return "(trap '' TERM; echo $BASHPID > " + pidFile + "; exec sleep 300) & " + then, pidFile
}

func readPid(t *testing.T, pidFile string) int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("no grandchild pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestBashTimeout: on timeout the whole group is ended, SIGKILL for a
// grandchild that ignores SIGTERM and holds the pipes; Wait does not hang
// on those pipes.
// The standard toolset: timeout kills the whole group including a background grandchild.
func TestBashTimeout(t *testing.T) {
	fastGrace(t)
	line, pidFile := grandchild(t, "echo started; sleep 300")
	start := time.Now()
	got, code := searchRun(t, "bash", line, "--timeout", "0.5")
	took := time.Since(start)
	want := "started\n[timed out after 0.5s; process group ended]\n"
	if got != want || code != 1 {
		t.Errorf("exit %d\n%s\nwant\n%s", code, got, want)
	}
	if took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	if pid := readPid(t, pidFile); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("grandchild %d survived the timeout", pid)
	}
}

// TestBashCancel: cancelling the context (ctxtools does on SIGTERM) ends
// the group the same way.
// The standard toolset: cancel via context.
func TestBashCancel(t *testing.T) {
	fastGrace(t)
	line, pidFile := grandchild(t, "sleep 300")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for range 100 {
			if _, err := os.Stat(pidFile); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	got, code := searchRunCtx(t, ctx, "bash", line)
	if got != "[cancelled; process group ended]\n" || code != 1 {
		t.Errorf("exit %d: %q", code, got)
	}
	if pid := readPid(t, pidFile); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("grandchild %d survived the cancel", pid)
	}
}

// TestBashLeftovers: a background process still running when the shell
// exits (and holding its pipes) does not hang the call and is ended.
// The standard toolset: a grandchild holding the pipes does not hang Wait.
func TestBashLeftovers(t *testing.T) {
	fastGrace(t)
	line, pidFile := grandchild(t, "echo done")
	start := time.Now()
	got, code := searchRun(t, "bash", line)
	want := "done\n[processes the command left running were ended: a call's processes do not outlive it]\n[exit status 0]\n"
	if got != want || code != 0 {
		t.Errorf("exit %d\n%s\nwant\n%s", code, got, want)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	if pid := readPid(t, pidFile); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("background process %d survived", pid)
	}
}

// TestBashCut: a long output keeps its head and its tail with a marker
// counting what was cut, within the budget, and says how to see it all;
// stderr gets its share.
// The standard toolset: output head+tail cut.
func TestBashCut(t *testing.T) {
	got, code := searchRun(t, "bash", "seq 1 100000; echo last")
	if code != 0 || len(got) > Budget {
		t.Fatalf("exit %d, %d bytes", code, len(got))
	}
	if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.Contains(got, "\n99999\n100000\nlast\n[output cut in the middle;") ||
		!strings.Contains(got, "read --offset]\n[exit status 0]\n") {
		t.Errorf("head/tail: %q … %q", got[:20], got[len(got)-300:])
	}
	i := strings.Index(got, "[… ")
	j := strings.Index(got, " cut …]\n")
	if i < 0 || j < i {
		t.Fatalf("no cut marker")
	}
	// the lines before and after the marker, and the count between them
	before := strings.Split(got[:i-1], "\n")
	after := strings.SplitN(got[j+len(" cut …]\n"):], "\n", 2)
	first, _ := strconv.Atoi(before[len(before)-1])
	next, _ := strconv.Atoi(after[0])
	var bytesCut, linesCut int
	if _, err := fmt.Sscanf(got[i:j], "[… %d bytes (%d lines)", &bytesCut, &linesCut); err != nil {
		t.Fatalf("marker %q: %v", got[i:j], err)
	}
	if linesCut != next-first-1 {
		t.Errorf("marker says %d lines cut, the lines %d…%d are missing", linesCut, first+1, next-1)
	}

	got, _ = searchRun(t, "bash", "seq 1 100000; seq 1 100000 >&2; exit 2")
	k := strings.Index(got, "[stderr]\n")
	if len(got) > Budget || k < 0 || len(got)-k > 4<<10+400 || !strings.Contains(got[k:], "\n100000\n") ||
		!strings.HasSuffix(got, "[exit status 2]\n") {
		t.Errorf("both streams: %d bytes, stderr part %d bytes", len(got), len(got)-k)
	}
}

// TestHeadTail: the in-memory bound keeps the first and last bytes over
// many small writes and one large one.
// The standard toolset: each stream bounded in memory.
func TestHeadTail(t *testing.T) {
	h := newHeadTail(4, 6)
	for _, w := range []string{"ab", "cdef", "ghij", "klmnopq", "rs"} {
		h.Write([]byte(w))
	}
	v := h.show()
	if string(v.head) != "abcd" || string(v.tail) != "nopqrs" || v.cut != 9 || v.n != 19 {
		t.Errorf("head %q tail %q cut %d n %d", v.head, v.tail, v.cut, v.n)
	}
	h = newHeadTail(4, 6)
	h.Write([]byte("0123456789abcdefghij"))
	v = h.show()
	if string(v.head) != "0123" || string(v.tail) != "efghij" || v.cut != 10 {
		t.Errorf("one write: head %q tail %q cut %d", v.head, v.tail, v.cut)
	}
	v.shrink(4)
	if string(v.head) != "0" || string(v.tail) != "hij" || v.cut != 16 {
		t.Errorf("shrink: head %q tail %q cut %d", v.head, v.tail, v.cut)
	}
}

// TestBashEnderOwned: the goroutine that ends a timed-out group belongs to
// the call — none is left running killGroup once runShell returns (one
// that was raced the test's restore of bashGrace under -race).
func TestBashEnderOwned(t *testing.T) {
	fastGrace(t)
	for range 5 {
		r := runShell(context.Background(), "sleep 300", 100*time.Millisecond)
		if !r.timedOut {
			t.Fatalf("not timed out: %+v", r)
		}
		buf := make([]byte, 1<<20)
		if st := string(buf[:runtime.Stack(buf, true)]); strings.Contains(st, "stdtool.killGroup(") {
			t.Fatalf("a group ender outlived its call:\n%s", st)
		}
	}
}
