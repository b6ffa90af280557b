package reaper

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestLockWaitsForThePreviousReaper: a starting daemon's Lock waits while
// a previous reaper holds the lock (its sweep), and takes it once that
// reaper is done; it gives up after its wait.
func TestLockWaitsForThePreviousReaper(t *testing.T) {
	dir := t.TempDir()
	held, err := Lock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir, 50*time.Millisecond); !errors.Is(err, ErrLockTimeout) {
		held.Close()
		t.Fatalf("a second Lock while held: %v, want ErrLockTimeout", err)
	}
	go func() { time.Sleep(100 * time.Millisecond); held.Close() }()
	t0 := time.Now()
	f, err := Lock(dir, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if time.Since(t0) < 80*time.Millisecond {
		t.Errorf("Lock did not wait for the holder (%v)", time.Since(t0))
	}
}

// TestRunUsage: the reaper refuses arguments it cannot sweep by.
func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"relative", "0"}, {"/root", "x"}} {
		if err := Run(args, os.Stdin, os.Stderr); err == nil {
			t.Errorf("Run(%q) accepted", args)
		}
	}
}
