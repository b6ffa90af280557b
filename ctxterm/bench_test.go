package ctxterm

// Relay benchmarks: the same writer (`cat` of a text file, on a
// PTY in raw mode, started by a FIFO trigger) read directly from the PTY
// master, through ctxterm to 1 and 4 watchers, through dtach and through
// tmux when installed. Compare the MB/s columns:
//
//	go test -run '^$' -bench . -benchtime 3x ./ctxterm/

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

const benchBytes = 32 << 20

type benchEnv struct {
	dir, data, fifo string
	argv            []string
}

// newBenchEnv writes benchBytes of 80-column text lines and a FIFO the
// writer waits on, so setup is not timed.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	dir := b.TempDir()
	e := &benchEnv{dir: dir, data: filepath.Join(dir, "data"), fifo: filepath.Join(dir, "go")}
	line := []byte(strings.Repeat("0123456789abcdef", 5)[:79] + "\n")
	if err := os.WriteFile(e.data, bytes.Repeat(line, benchBytes/len(line)+1)[:benchBytes], 0o644); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Mkfifo(e.fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	e.argv = []string{"sh", "-c", fmt.Sprintf("stty raw -echo; read x < %s; exec cat %s", e.fifo, e.data)}
	return e
}

// trigger releases the writer.
func (e *benchEnv) trigger(b *testing.B) {
	f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	f.Write([]byte("\n"))
	f.Close()
}

func drain(r io.Reader) int64 {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		if err != nil {
			return n
		}
	}
}

var benchEnvVars = []string{"PATH=/usr/bin:/bin", "TERM=xterm", "LANG=C"}

// BenchmarkRelayDirect is the floor: one reader on the PTY master itself.
func BenchmarkRelayDirect(b *testing.B) {
	e := newBenchEnv(b)
	b.SetBytes(benchBytes)
	for b.Loop() {
		b.StopTimer()
		cmd := exec.Command(e.argv[0], e.argv[1:]...)
		cmd.Env = benchEnvVars
		ptm, err := pty.Start(cmd)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // stty has run
		b.StartTimer()
		e.trigger(b)
		n := drain(ptm)
		b.StopTimer()
		cmd.Wait()
		ptm.Close()
		if n < benchBytes {
			b.Fatalf("read %d bytes", n)
		}
		b.StartTimer()
	}
}

func benchCtxterm(b *testing.B, watchers int) {
	e := newBenchEnv(b)
	b.SetBytes(benchBytes)
	for b.Loop() {
		b.StopTimer()
		srv, err := New(Config{Socket: filepath.Join(e.dir, "s.sock"), Argv: e.argv, Env: benchEnvVars})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan struct{})
		go func() { defer close(served); srv.Serve(ctx) }()
		conns := make([]*Conn, watchers)
		for i := range conns {
			if conns[i], err = Dial(srv.Addr(), ModeWatch); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
		var wg sync.WaitGroup
		counts := make([]countWriter, watchers)
		b.StartTimer()
		for i, c := range conns {
			wg.Add(1)
			go func() { defer wg.Done(); c.CopyOutput(&counts[i]) }()
		}
		e.trigger(b)
		wg.Wait()
		b.StopTimer()
		for i, c := range conns {
			c.Close()
			if counts[i] < benchBytes {
				b.Fatalf("watcher %d got %d bytes", i, counts[i])
			}
		}
		cancel()
		<-served
		b.StartTimer()
	}
}

// spec: T2 — the relay to one and four watchers (target ≥ 0.8× direct).
func BenchmarkRelayCtxterm1(b *testing.B) { benchCtxterm(b, 1) }
func BenchmarkRelayCtxterm4(b *testing.B) { benchCtxterm(b, 4) }

// BenchmarkRelayDtach: dtach's attach client on its own PTY, read directly.
func BenchmarkRelayDtach(b *testing.B) {
	dtach, err := exec.LookPath("dtach")
	if err != nil {
		b.Skip("dtach not installed (apt-get install -y dtach)")
	}
	e := newBenchEnv(b)
	b.SetBytes(benchBytes)
	for b.Loop() {
		b.StopTimer()
		sock := filepath.Join(e.dir, "dtach.sock")
		start := exec.Command(dtach, append([]string{"-n", sock, "-E"}, e.argv...)...)
		start.Env = benchEnvVars
		if out, err := start.CombinedOutput(); err != nil {
			b.Fatalf("dtach -n: %v %s", err, out)
		}
		att := exec.Command(dtach, "-a", sock, "-E", "-r", "none")
		att.Env = benchEnvVars
		ptm, err := pty.Start(att)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		b.StartTimer()
		e.trigger(b)
		n := drain(ptm)
		b.StopTimer()
		att.Wait()
		ptm.Close()
		if n < benchBytes {
			b.Fatalf("read %d bytes", n)
		}
		b.StartTimer()
	}
}

// BenchmarkRelayTmux: tmux re-renders rather than relays, so this is the
// time until an attached client sees the program end.
func BenchmarkRelayTmux(b *testing.B) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		b.Skip("tmux not installed")
	}
	e := newBenchEnv(b)
	b.SetBytes(benchBytes)
	for b.Loop() {
		b.StopTimer()
		sockName := fmt.Sprintf("ctxterm-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
		tm := func(args ...string) *exec.Cmd {
			c := exec.Command(tmux, append([]string{"-L", sockName, "-f", "/dev/null"}, args...)...)
			c.Env = benchEnvVars
			return c
		}
		if out, err := tm("new-session", "-d", "-x", "80", "-y", "24", strings.Join(quoteAll(e.argv), " ")).CombinedOutput(); err != nil {
			b.Fatalf("tmux new-session: %v %s", err, out)
		}
		att := tm("attach")
		ptm, err := pty.StartWithSize(att, &pty.Winsize{Cols: 80, Rows: 24})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		b.StartTimer()
		e.trigger(b)
		drain(ptm)
		b.StopTimer()
		att.Wait()
		ptm.Close()
		tm("kill-server").Run()
		b.StartTimer()
	}
}

func quoteAll(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}

// BenchmarkAttachLatency: connect → hello → ready frame (the first byte a
// client receives), in process.
func BenchmarkAttachLatency(b *testing.B) {
	srv, err := New(Config{Socket: filepath.Join(b.TempDir(), "s.sock"), Argv: []string{"cat"}, Env: benchEnvVars})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	for b.Loop() {
		c, err := Dial(srv.Addr(), ModeAttach)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkAttachLatencyTmux: `tmux attach` started on a PTY until its first
// output byte (includes starting the tmux client process).
func BenchmarkAttachLatencyTmux(b *testing.B) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		b.Skip("tmux not installed")
	}
	sockName := fmt.Sprintf("ctxterm-lat-%d-%d", os.Getpid(), time.Now().UnixNano())
	tm := func(args ...string) *exec.Cmd {
		c := exec.Command(tmux, append([]string{"-L", sockName, "-f", "/dev/null"}, args...)...)
		c.Env = benchEnvVars
		return c
	}
	if out, err := tm("new-session", "-d", "cat").CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	defer tm("kill-server").Run()
	one := make([]byte, 1)
	for b.Loop() {
		att := tm("attach")
		ptm, err := pty.StartWithSize(att, &pty.Winsize{Cols: 80, Rows: 24})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ptm.Read(one); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		att.Process.Kill()
		att.Wait()
		ptm.Close()
		b.StartTimer()
	}
}

// BenchmarkAttachLatencyProcess: a client process that dials and reads the
// ready frame — comparable with the tmux number (process start included).
func BenchmarkAttachLatencyProcess(b *testing.B) {
	srv, err := New(Config{Socket: filepath.Join(b.TempDir(), "s.sock"), Argv: []string{"cat"}, Env: benchEnvVars})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	for b.Loop() {
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{helperEnv + "=" + srv.Addr()}
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte("accepted")) {
			b.Fatalf("%v %s", err, out)
		}
	}
}
