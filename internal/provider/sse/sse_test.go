package sse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(r io.Reader, max int) ([]Event, error) {
	rd := NewReader(r, max)
	var out []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"lf", "event: a\ndata: x\n\n", []Event{{Type: "a", Data: "x"}}},
		{"crlf", "event: a\r\ndata: x\r\n\r\n", []Event{{Type: "a", Data: "x"}}},
		{"cr", "event: a\rdata: x\r\r", []Event{{Type: "a", Data: "x"}}},
		{"multi data", "data: a\ndata:b\ndata\n\n", []Event{{Data: "a\nb\n"}}},
		{"one space stripped", "data:  two\n\n", []Event{{Data: " two"}}},
		{"comment and ping", ": keep-alive\n\ndata: y\n\n", []Event{{Data: "y"}}},
		{"no data no dispatch, type reset", "event: a\n\ndata: y\n\n", []Event{{Data: "y"}}},
		{"empty data dispatches", "data:\n\n", []Event{{Data: ""}}},
		{"bom", "\uFEFFdata: z\n\n", []Event{{Data: "z"}}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\n", []Event{{Data: "a", ID: "7"}, {Data: "b", ID: "7"}}},
		{"unknown field ignored", "retry: 10\nfoo: bar\ndata: a\n\n", []Event{{Data: "a"}}},
		{"partial event at EOF dropped", "data: a\n\ndata: b\n", []Event{{Data: "a"}}},
		{"partial line at EOF dropped", "data: a\n\ndata: b", []Event{{Data: "a"}}},
		{"two events", "event: x\ndata: 1\n\nevent: y\ndata: 2\n\n", []Event{{Type: "x", Data: "1"}, {Type: "y", Data: "2"}}},
		// Llama.cpp reports a stream failure in an "error" field.
		{"error field dispatches", "error: {\"code\":400}\n\ndata: [DONE]\n\n", []Event{{Error: `{"code":400}`}, {Data: "[DONE]"}}},
		{"error and data", "data: a\nerror: e1\nerror: e2\n\n", []Event{{Data: "a", Error: "e1\ne2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(tt.in), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReaderTooLarge(t *testing.T) {
	_, err := readAll(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("line: got %v, want ErrTooLarge", err)
	}
	_, err = readAll(strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 10)+"\n"), 50)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("data: got %v, want ErrTooLarge", err)
	}
}

func TestReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := readAll(io.MultiReader(strings.NewReader("data: a\n"), iotest.ErrReader(boom)), 0)
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
}

// FuzzReader checks that parsing never panics, respects its bound, yields data
// without CR, and does not depend on how the bytes are split into reads (a
// CRLF split across two reads is the classic bug).
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
		"data: {\"choices\":[]}\r\n\r\ndata: [DONE]\r\n\r\n",
		"data: a\rdata: b\r\r",
		": ping\n\nevent: ping\ndata: {}\n\n",
		"\uFEFFid: 1\nretry: 5\ndata\n\n",
		"data: a\r",
		"data:\r\n\r\n\r\n",
		"error: {\"code\":400,\"message\":\"too long\"}\n\ndata: [DONE]\n\n", // llama.cpp
		"error: a\r\nerror: b\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	// Every recorded provider stream (../testdata): Anthropic server tools,
	// thinking, pause_turn; OpenAI reasoning and usage chunks; Gemini's
	// thought signatures.
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*.sse"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 256
		whole, errWhole := readAll(bytes.NewReader(in), max)
		bytewise, errBytewise := readAll(iotest.OneByteReader(bytes.NewReader(in)), max)
		if !reflect.DeepEqual(whole, bytewise) || (errWhole == nil) != (errBytewise == nil) {
			t.Fatalf("split-dependent result:\nwhole %q %v\nbytes %q %v", whole, errWhole, bytewise, errBytewise)
		}
		for _, ev := range whole {
			if len(ev.Data) > max || len(ev.Error) > max {
				t.Fatalf("data over bound: %d %d", len(ev.Data), len(ev.Error))
			}
			if strings.ContainsAny(ev.Data+ev.Error, "\r") || strings.ContainsAny(ev.Type, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
				t.Fatalf("line terminator leaked into %+v", ev)
			}
		}
	})
}
