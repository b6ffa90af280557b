package ipc

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A LogRange is served from the file in queue order with the other sends:
// the whole range as stored, or one run's lines marked as replay; what lies
// past To (not committed yet) is never sent. spec: P4
func TestConnSendLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	var log bytes.Buffer
	var runA, all []byte
	for i := range 3000 { // ~300 KiB: several chunks
		run := "run-b"
		if i%3 == 0 {
			run = "run-a"
		}
		l := (&Frame{Type: TypeDelta, Session: "s", Seq: int64(i + 1), TS: "t", Run: run, Text: strings.Repeat("x", 50)}).Line()
		log.Write(l)
		all = append(all, l...)
		if run == "run-a" {
			runA = append(runA, MarkReplay(l)...)
		}
	}
	to := int64(log.Len())
	log.WriteString(`{"type":"delta","seq":99999,"run":"run-a"}` + "\n") // past To
	if err := os.WriteFile(path, log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	server, client := socketPair(t)
	defer client.Close()
	k := NewConn(server, selfCred())
	caught := (&Frame{Type: TypeCaughtUp, Session: "s"}).Line()
	if !k.SendLog(LogRange{Path: path, From: 0, To: to}, false) ||
		!k.SendLog(LogRange{Path: path, From: 0, To: to, Run: "run-a"}, true) ||
		!k.SendLog(LogRange{Path: path, From: 5, To: 5}, false) || // empty: nothing
		!k.Send(caught) {
		t.Fatal("a send was refused")
	}
	k.Close()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, all...), runA...), caught...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// A range the file cannot give in full (the log was removed, or is shorter
// than the committed end) ends the connection instead of sending a partial
// history followed by the frames after it.
func TestConnSendLogMissingFileCloses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(path, []byte("{\"type\":\"delta\",\"seq\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []LogRange{{Path: path, From: 0, To: 1000}, {Path: filepath.Join(dir, "gone"), From: 0, To: 10}} {
		server, client := socketPair(t)
		k := NewConn(server, selfCred())
		k.SendLog(r, false)
		k.Send([]byte("after\n"))
		got, _ := io.ReadAll(client)
		client.Close()
		if len(got) != 0 {
			t.Fatalf("%+v: client got %q", r, got)
		}
		k.Close()
	}
}

// A symlink is not followed to a log.
func TestConnSendLogRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "secret")
	if err := os.WriteFile(real, []byte("secret line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "events.jsonl")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	server, client := socketPair(t)
	defer client.Close()
	k := NewConn(server, selfCred())
	k.SendLog(LogRange{Path: link, From: 0, To: 12}, false)
	got, _ := io.ReadAll(client)
	if bytes.Contains(got, []byte("secret")) {
		t.Fatalf("symlink followed: %q", got)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// memLog is a LogSource over bytes: a segmented log's logical bytes stand
// behind the same interface.
type memLog struct{ b []byte }

func (m memLog) OpenLog() (LogReader, error) { return memReader{bytes.NewReader(m.b)}, nil }

type memReader struct{ *bytes.Reader }

func (memReader) Close() error { return nil }

// A range with a source is read from it, not from Path; one the source
// cannot give in full ends the connection like a short file.
func TestConnSendLogFromSource(t *testing.T) {
	a := (&Frame{Type: TypeDelta, Session: "s", Seq: 1, Run: "run-a", Text: "x"}).Line()
	b := (&Frame{Type: TypeDelta, Session: "s", Seq: 2, Run: "run-b", Text: "y"}).Line()
	src := memLog{append(append([]byte{}, a...), b...)}
	server, client := socketPair(t)
	k := NewConn(server, selfCred())
	if !k.SendLog(LogRange{Path: "/nonexistent", Src: src, From: 0, To: int64(len(src.b)), Run: "run-b"}, false) {
		t.Fatal("refused")
	}
	k.Close()
	got, _ := io.ReadAll(client)
	client.Close()
	if !bytes.Equal(got, b) {
		t.Fatalf("got %q, want %q", got, b)
	}
	server, client = socketPair(t)
	k = NewConn(server, selfCred())
	k.SendLog(LogRange{Src: src, From: 0, To: int64(len(src.b)) + 1}, false)
	k.Send([]byte("after\n"))
	got, _ = io.ReadAll(client)
	client.Close()
	k.Close()
	if len(got) != 0 {
		t.Fatalf("a short source sent %q", got)
	}
}
