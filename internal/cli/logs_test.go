package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
)

// The last N lines of the daemon log.
func TestPrintTail(t *testing.T) {
	big := strings.Repeat("x", 100<<10) + "\n" // lines across the 64 KiB blocks
	cases := []struct {
		name, data string
		n          int
		want       string
	}{
		{"empty", "", 3, ""},
		{"fewer lines", "a\nb\n", 3, "a\nb\n"},
		{"last two", "a\nb\nc\n", 2, "b\nc\n"},
		{"no final newline", "a\nb\nc", 2, "b\nc"},
		{"one", "a\nb\nc\n", 1, "c\n"},
		{"all", "a\nb\nc\n", 0, "a\nb\nc\n"},
		{"blank lines count", "a\n\n\n", 2, "\n\n"},
		{"big lines", "a\n" + big + big + "z\n", 3, big + big + "z\n"},
		{"big lines, two", "a\n" + big + big + "z\n", 2, big + "z\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "daemon.log")
			os.WriteFile(p, []byte(c.data), 0o600)
			f, _ := os.Open(p)
			defer f.Close()
			var out bytes.Buffer
			off, err := printTail(&out, f, c.n)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want || off != int64(len(c.data)) {
				t.Fatalf("got %d bytes (offset %d), want %d bytes", out.Len(), off, len(c.want))
			}
		})
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func waitOut(t *testing.T, b *lockedBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("followed output %q, want %q", b.String(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// -f follows appends, a truncation and a replacement.
func TestFollow(t *testing.T) {
	p := filepath.Join(t.TempDir(), "daemon.log")
	os.WriteFile(p, []byte("old\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuf
	done := make(chan error)
	go func() { done <- follow(ctx, &out, p, 4, 10*time.Millisecond) }()
	appendTo := func(s string) {
		f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		f.WriteString(s)
		f.Close()
	}
	appendTo("one\n")
	waitOut(t, &out, "one\n")
	os.Truncate(p, 0)
	time.Sleep(50 * time.Millisecond)
	appendTo("after truncate\n")
	waitOut(t, &out, "one\nafter truncate\n")
	tmp := p + ".new"
	os.WriteFile(tmp, []byte("replaced, and a longer first line than before\n"), 0o600)
	os.Rename(tmp, p)
	waitOut(t, &out, "one\nafter truncate\nreplaced, and a longer first line than before\n")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// With the systemd unit active the journal is read. The
// two programs are stand-ins on PATH recording how they were called.
func TestLogsUsesJournalWhenUnitActive(t *testing.T) {
	bin := t.TempDir()
	rec := filepath.Join(bin, "calls")
	os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho systemctl \"$@\" >> "+rec+"\nexit ${UNIT_STATUS:-0}\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "journalctl"), []byte("#!/bin/sh\necho journalctl \"$@\" >> "+rec+"\necho from the journal\n"), 0o755)
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: os.Getuid()}
	os.WriteFile(l.DaemonLog(), []byte("from the file\n"), 0o600)
	run := func(c LogsCmd) string {
		os.Remove(rec)
		var out bytes.Buffer
		env := &Env{Ctx: context.Background(), Layout: l, Stdout: &out, Stderr: &out}
		if err := c.Run(env); err != nil {
			t.Fatal(err)
		}
		calls, _ := os.ReadFile(rec)
		return out.String() + string(calls)
	}
	if got := run(LogsCmd{Lines: 5, Follow: false}); got != "from the journal\nsystemctl --user is-active --quiet ctx.service\njournalctl --user -u ctx.service --no-pager -n 5\n" {
		t.Errorf("unit active: %q", got)
	}
	if got := run(LogsCmd{Lines: 5, File: true}); got != "from the file\n" {
		t.Errorf("--file: %q", got)
	}
	t.Setenv("UNIT_STATUS", "3")
	if got := run(LogsCmd{Lines: 5}); got != "from the file\nsystemctl --user is-active --quiet ctx.service\n" {
		t.Errorf("unit inactive: %q", got)
	}
}
