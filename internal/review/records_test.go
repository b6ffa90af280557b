package review

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRecordsAppend: every save is one line of the session's records; a
// run's record is its last line, the session's last is the last saved;
// saving makes no other file in review/ (no file per run, no temporary).
func TestRecordsAppend(t *testing.T) {
	dir := t.TempDir()
	save := func(r Record) {
		t.Helper()
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	save(Record{Run: "run-1", Workspace: "/w", Before: "a"})
	save(Record{Run: "run-1", Workspace: "/w", Before: "a", After: "b"})
	save(Record{Run: "run-2", Workspace: "/w", Before: "b"})
	for _, c := range []struct{ run, after, before string }{{"run-1", "b", "a"}, {"run-2", "", "b"}, {"", "", "b"}} {
		got, err := Load(dir, c.run)
		if err != nil || got.Before != c.before || got.After != c.after {
			t.Errorf("Load(%q) = %+v, %v; want before %q after %q", c.run, got, err, c.before, c.after)
		}
	}
	if _, err := Load(dir, "run-3"); !errors.Is(err, ErrNone) {
		t.Errorf("Load of a run without a record: %v, want ErrNone", err)
	}
	ents, _ := os.ReadDir(Dir(dir))
	if len(ents) != 1 || ents[0].Name() != recordsName {
		t.Errorf("review/ holds %v, want only %s", ents, recordsName)
	}
	b, _ := os.ReadFile(filepath.Join(Dir(dir), recordsName))
	if n := strings.Count(string(b), "\n"); n != 3 {
		t.Errorf("%d lines, want 3:\n%s", n, b)
	}
}

// TestRecordsTornLine: a line a crash left without its end is skipped
// by Load and ended by the next Save, which is then read whole.
func TestRecordsTornLine(t *testing.T) {
	for _, torn := range []string{`{"run":"run-2","workspace":"/w","bef`, `{"run":"run-2"`, "garbage", `{"run":"run-2","before":"x"}`} {
		dir := t.TempDir()
		if err := Save(dir, Record{Run: "run-1", Before: "a"}); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(Dir(dir), recordsName)
		f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		f.WriteString(torn)
		f.Close()
		got, err := Load(dir, "")
		want := "a"
		if json.Valid([]byte(torn)) {
			want = "x" // a whole record without its newline still reads
		}
		if err != nil || got.Before != want {
			t.Errorf("torn %q: Load = %+v %v, want before %q", torn, got, err, want)
		}
		if err := Save(dir, Record{Run: "run-3", Before: "c"}); err != nil {
			t.Fatal(err)
		}
		if got, err := Load(dir, ""); err != nil || got.Run != "run-3" || got.Before != "c" {
			t.Errorf("torn %q: after a save Load = %+v %v", torn, got, err)
		}
		if got, err := Load(dir, "run-1"); err != nil || got.Before != "a" {
			t.Errorf("torn %q: run-1 = %+v %v", torn, got, err)
		}
	}
}

// TestRecordsLongFile: records past the read chunk are found, a line
// that spans two chunks included, and the last one is read from the end.
func TestRecordsLongFile(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 400; i++ {
		// ~500 bytes a line: lines cross the 64 KiB chunk boundaries.
		if err := Save(dir, Record{Run: "run-" + strconv.Itoa(i), Workspace: strings.Repeat("w", 300+i%97), Before: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 400; i++ {
		got, err := Load(dir, "run-"+strconv.Itoa(i))
		if err != nil || got.Before != strconv.Itoa(i) {
			t.Fatalf("run-%d: %+v %v", i, got, err)
		}
	}
	if got, err := Load(dir, ""); err != nil || got.Run != "run-399" {
		t.Errorf("last: %+v %v", got, err)
	}
}

// TestRecordsLongLines: records longer than the first chunks loadRecords
// reads (4 KiB, then four times as much) are found whole, the last and
// one further back.
func TestRecordsLongLines(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{300, 5000, 17000, 70000, 3000, 90000}
	for i, n := range sizes {
		if err := Save(dir, Record{Run: "run-" + strconv.Itoa(i), Workspace: strings.Repeat("w", n), Before: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range sizes {
		got, err := Load(dir, "run-"+strconv.Itoa(i))
		if err != nil || got.Before != strconv.Itoa(i) || len(got.Workspace) != n {
			t.Fatalf("run-%d: %q %d bytes, %v", i, got.Before, len(got.Workspace), err)
		}
	}
	if got, err := Load(dir, ""); err != nil || got.Run != "run-5" {
		t.Errorf("last: %q %v", got.Run, err)
	}
}

// TestRecordsOlderFiles: a session of an older daemon (a file per run)
// still loads; once the records hold a line, that is the last record.
func TestRecordsOlderFiles(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(Dir(dir), 0o700)
	b, _ := json.Marshal(Record{Run: "run-old", Before: "o"})
	os.WriteFile(filepath.Join(Dir(dir), "run-old.json"), b, 0o600)
	if got, err := Load(dir, ""); err != nil || got.Run != "run-old" {
		t.Errorf("older file as the last: %+v %v", got, err)
	}
	if err := Save(dir, Record{Run: "run-new", Before: "n"}); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(dir, ""); err != nil || got.Run != "run-new" {
		t.Errorf("last after a save: %+v %v", got, err)
	}
	if got, err := Load(dir, "run-old"); err != nil || got.Before != "o" {
		t.Errorf("older run by name: %+v %v", got, err)
	}
}

// TestRecordsNotFollowed: a symlink in the records' place is refused,
// neither written through nor read.
func TestRecordsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(Dir(dir), 0o700)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(`{"run":"x","before":"forged"}`+"\n"), 0o600)
	os.Symlink(target, filepath.Join(Dir(dir), recordsName))
	if err := Save(dir, Record{Run: "run-1"}); err == nil {
		t.Error("Save wrote through a symlink")
	}
	if got, err := Load(dir, ""); err == nil {
		t.Errorf("Load read through a symlink: %+v", got)
	}
	if b, _ := os.ReadFile(target); strings.Contains(string(b), "run-1") {
		t.Error("the symlink's target was written")
	}
}

// FuzzLoadRecords: whatever the records file holds, Load never panics,
// and a record saved after it is the last one read.
func FuzzLoadRecords(f *testing.F) {
	for _, s := range []string{"", "\n", `{"run":"a"}` + "\n", `{"run":"a"`, "\x00\xff\n{", strings.Repeat("x", 70000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		os.MkdirAll(Dir(dir), 0o700)
		p := filepath.Join(Dir(dir), recordsName)
		os.WriteFile(p, content, 0o600)
		_, _ = Load(dir, "")
		_, _ = Load(dir, "a")
		if err := Save(dir, Record{Run: "fz", Before: "t"}); err != nil {
			t.Fatal(err)
		}
		if got, err := Load(dir, ""); err != nil || got.Run != "fz" || got.Before != "t" {
			t.Fatalf("after a save: %+v %v", got, err)
		}
	})
}

// TestRecordsNotRegular: something other than a regular file in the
// records' place (a FIFO here) is refused by Save and Load alike.
func TestRecordsNotRegular(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(Dir(dir), 0o700)
	if err := syscall.Mkfifo(filepath.Join(Dir(dir), recordsName), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, Record{Run: "run-1"}); err == nil {
		t.Error("Save wrote into a FIFO")
	}
	if _, err := Load(dir, ""); err == nil {
		t.Error("Load read a FIFO")
	}
}
