package diskreserve

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDisk reports free space set by the test.
type fakeDisk struct{ free atomic.Int64 }

func (f *fakeDisk) statfs(string) (int64, int64, error) { return f.free.Load(), 1 << 40, nil }

type stops struct {
	mu  sync.Mutex
	got map[string]string
}

func (s *stops) fn(id string) func(string) {
	return func(msg string) { s.mu.Lock(); s.got[id] = msg; s.mu.Unlock() }
}

func (s *stops) get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.got[id]
	return m, ok
}

// Below the reserve, the run whose directory grows is stopped with a
// message naming the reserve, the free space and the fix; a run that does
// not write goes on; above twice the reserve nothing is measured.
func TestStopsTheGrowingRun(t *testing.T) {
	root := t.TempDir()
	writer, idle := filepath.Join(root, "home", "w"), filepath.Join(root, "home", "i")
	os.MkdirAll(writer, 0o755)
	os.MkdirAll(idle, 0o755)
	os.WriteFile(filepath.Join(idle, "old"), make([]byte, 4<<20), 0o644)
	d := &fakeDisk{}
	d.free.Store(1 << 30)
	w := New(Options{Root: root, Reserve: 64 << 20, Interval: 10 * time.Millisecond, Statfs: d.statfs})
	defer w.Close()
	s := &stops{got: map[string]string{}}
	offW := w.Register(Run{ID: "run-w", Dirs: []string{writer}, Stop: s.fn("run-w")})
	offI := w.Register(Run{ID: "run-i", Dirs: []string{idle}, Stop: s.fn("run-i")})
	defer offI()
	defer offW()
	time.Sleep(50 * time.Millisecond)
	d.free.Store(100 << 20) // below twice the reserve: baselines
	time.Sleep(50 * time.Millisecond)
	os.WriteFile(filepath.Join(writer, "big"), make([]byte, 3<<20), 0o644)
	d.free.Store(10 << 20) // below the reserve
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := s.get("run-w"); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg, ok := s.get("run-w")
	if !ok {
		t.Fatal("the growing run was not stopped")
	}
	for _, want := range []string{"10.0 MiB free", "reserve of 64.0 MiB", "CTX_DISK_RESERVE", writer, "grew by"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if m, ok := s.get("run-i"); ok {
		t.Errorf("the idle run was stopped: %s", m)
	}
}

// The ticker runs only while runs are registered (goleak checks that the
// loop is gone once the last one left).
func TestTickerOnlyWhileRunsAreActive(t *testing.T) {
	var calls atomic.Int64
	w := New(Options{Root: t.TempDir(), Reserve: 1, Interval: time.Millisecond,
		Statfs: func(string) (int64, int64, error) { calls.Add(1); return 1 << 30, 1 << 40, nil }})
	defer w.Close()
	time.Sleep(20 * time.Millisecond)
	if calls.Load() != 0 {
		t.Fatal("statfs without a run")
	}
	off := w.Register(Run{ID: "r", Stop: func(string) {}})
	time.Sleep(20 * time.Millisecond)
	if calls.Load() == 0 {
		t.Fatal("no check while a run is active")
	}
	off()
	off() // twice is harmless
	time.Sleep(10 * time.Millisecond)
	n := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if calls.Load() != n {
		t.Fatal("checks go on after the last run left")
	}
	off = w.Register(Run{ID: "r2", Stop: func(string) {}})
	off()
}

func TestReserveAndParse(t *testing.T) {
	w := New(Options{Reserve: -1})
	if got := w.Reserve(100 << 30); got != DefaultReserve {
		t.Errorf("default on 100G: %d", got)
	}
	if got := w.Reserve(100 << 20); got != 5<<20 {
		t.Errorf("default on 100M: %d", got)
	}
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{{"0", 0, true}, {"256M", 256 << 20, true}, {"1G", 1 << 30, true}, {"12345", 12345, true},
		{"-1", 0, false}, {"1.5G", 0, false}, {"", 0, false}, {"10 M", 0, false}, {"1P", 0, false}} {
		got, err := ParseReserve(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseReserve(%q) = %d, %v", c.in, got, err)
		}
	}
	var nilW *Watcher
	nilW.Register(Run{ID: "x"})()
	nilW.Close()
}

// The agent home's own limit holds whatever the free space: the run that
// puts the home over it is stopped; a run of an agent under its limit
// goes on.
func TestHomeLimit(t *testing.T) {
	root := t.TempDir()
	over, under := filepath.Join(root, "over"), filepath.Join(root, "under")
	os.MkdirAll(over, 0o755)
	os.MkdirAll(under, 0o755)
	os.WriteFile(filepath.Join(under, "f"), make([]byte, 1<<20), 0o644)
	w := New(Options{Root: root, Reserve: 0, Interval: 10 * time.Millisecond,
		Statfs: func(string) (int64, int64, error) { return 1 << 40, 1 << 41, nil }})
	defer w.Close()
	s := &stops{got: map[string]string{}}
	defer w.Register(Run{ID: "o", Home: over, HomeLimit: 2 << 20, Agent: "big", Stop: s.fn("o")})()
	defer w.Register(Run{ID: "u", Home: under, HomeLimit: 2 << 20, Agent: "small", Stop: s.fn("u")})()
	time.Sleep(50 * time.Millisecond)
	if _, ok := s.get("o"); ok {
		t.Fatal("stopped while under its limit")
	}
	os.WriteFile(filepath.Join(over, "big"), make([]byte, 3<<20), 0o644)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := s.get("o"); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg, ok := s.get("o")
	if !ok {
		t.Fatal("the run over its home's limit was not stopped")
	}
	for _, want := range []string{over, "disk limit of 2.0 MiB", "agent/big.d/limits", "the kernel does not enforce it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if m, ok := s.get("u"); ok {
		t.Errorf("the run under its limit was stopped: %s", m)
	}
}
