package termres

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// spec: T5 — the id is made once and survives.
func TestEnsureStableID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "session", "terminal")
	id1, err := Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !validID(id1) {
		t.Fatalf("id %q", id1)
	}
	id2, err := Ensure(dir)
	if err != nil || id2 != id1 {
		t.Fatalf("second Ensure: %q %v, want %q", id2, err, id1)
	}
	got, err := ID(dir)
	if err != nil || got != id1 {
		t.Fatalf("ID: %q %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("leftover files: %v", ents)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", st.Mode())
	}
}

func TestEnsureConcurrentAgree(t *testing.T) {
	dir := t.TempDir()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := Ensure(dir)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("ids differ: %v", ids)
		}
	}
}

func TestEnsureRejectsBadID(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, IDFile), []byte("../../etc\n"), 0o600)
	if _, err := Ensure(dir); err == nil {
		t.Fatal("want ErrBadID")
	}
}

func TestAppendRead(t *testing.T) {
	tests := []struct {
		name   string
		events []Event
		check  func(t *testing.T, got []Event)
	}{
		{"empty", nil, func(t *testing.T, got []Event) {
			if len(got) != 0 {
				t.Fatalf("got %v", got)
			}
		}},
		{"lifecycle", []Event{
			{Type: Created, ID: "term-0123456789abcdef"},
			{Type: Attached, Mode: "watch", PID: 42, UID: Int(0)},
			{Type: Resized, Cols: 100, Rows: 30},
			{Type: Detached, Reason: "closed"},
			{Type: Exited, Status: Int(0)},
		}, func(t *testing.T, got []Event) {
			if len(got) != 5 || got[1].UID == nil || *got[1].UID != 0 || got[4].Status == nil || *got[4].Status != 0 {
				t.Fatalf("got %+v", got)
			}
			for _, e := range got {
				if e.TS.IsZero() {
					t.Fatalf("no ts: %+v", e)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, e := range tt.events {
				if err := Append(dir, e); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}

func TestAppendNeedsType(t *testing.T) {
	if err := Append(t.TempDir(), Event{}); err == nil {
		t.Fatal("want error")
	}
}

func TestReadTornTailAndCorruption(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    int
		wantErr bool
	}{
		{"torn tail skipped", `{"type":"attached","ts":"2025-01-01T00:00:00Z"}` + "\n" + `{"type":"det`, 1, false},
		{"bad middle line", `{"type":"attached","ts":"2025-01-01T00:00:00Z"}` + "\nnot json\n" + `{"type":"exited","ts":"2025-01-01T00:00:00Z"}` + "\n", 1, true},
		{"blank lines", "\n\n" + `{"type":"exited","ts":"2025-01-01T00:00:00Z"}` + "\n", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, EventsFile), []byte(tt.content), 0o600)
			got, err := Read(dir)
			if (err != nil) != tt.wantErr || len(got) != tt.want {
				t.Fatalf("got %d events, err %v", len(got), err)
			}
		})
	}
}

// TestValidIDMatchesTheRegexp: validID accepts exactly what
// `^term-[0-9a-f]{16}$` does.
func TestValidIDMatchesTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^term-[0-9a-f]{16}$`)
	for _, id := range []string{"term-0123456789abcdef", "term-0123456789abcde", "term-0123456789abcdef0",
		"term-0123456789ABCDEF", "Term-0123456789abcdef", "term-0123456789abcdeg", "term-", "", "term-0123456789abcde\n",
		"xterm-0123456789abcdef", "term-../../../../etc/p"} {
		if got, want := validID(id), re.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the regexp says %v", id, got, want)
		}
	}
}
