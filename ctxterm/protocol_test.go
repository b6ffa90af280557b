package ctxterm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDecoderTable(t *testing.T) {
	big := AppendFrame(nil, FrameData, bytes.Repeat([]byte("x"), MaxPayload))
	tests := []struct {
		name  string
		in    []byte
		types []byte
		err   error // error after the frames (nil = io.EOF)
		proto bool  // error wraps ErrProtocol
	}{
		{"empty stream", nil, nil, io.EOF, false},
		{"one data", AppendFrame(nil, FrameData, []byte("hi")), []byte{FrameData}, io.EOF, false},
		{"empty payload", AppendFrame(nil, FrameData, nil), []byte{FrameData}, io.EOF, false},
		{"max payload", big, []byte{FrameData}, io.EOF, false},
		{"three frames", AppendFrame(AppendFrame(AppendFrame(nil, FrameReady, []byte("{}")), FrameResize, ResizePayload(80, 24)), FrameExit, ExitPayload(7)), []byte{FrameReady, FrameResize, FrameExit}, io.EOF, false},
		{"unknown type", AppendFrame(nil, 0x7f, nil), nil, nil, true},
		{"type zero", AppendFrame(nil, 0, nil), nil, nil, true},
		{"oversized", []byte{FrameData, 0, 1, 0, 1}, nil, nil, true},
		{"huge length", []byte{FrameData, 0xff, 0xff, 0xff, 0xff}, nil, nil, true},
		{"cut header", []byte{FrameData, 0, 0}, nil, io.ErrUnexpectedEOF, false},
		{"cut payload", []byte{FrameData, 0, 0, 0, 5, 'a'}, nil, io.ErrUnexpectedEOF, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(bytes.NewReader(tt.in), 0)
			var got []byte
			var err error
			for {
				var f Frame
				f, err = d.Next()
				if err != nil {
					break
				}
				got = append(got, f.Type)
			}
			if !bytes.Equal(got, tt.types) {
				t.Fatalf("types %v, want %v", got, tt.types)
			}
			if tt.proto {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("err %v, want ErrProtocol", err)
				}
			} else if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
		})
	}
}

func TestPayloadCodecs(t *testing.T) {
	c, r, err := ParseResize(ResizePayload(65535, 1))
	if err != nil || c != 65535 || r != 1 {
		t.Fatalf("resize %d %d %v", c, r, err)
	}
	for _, st := range []int{0, 1, 130, 255, -1} {
		got, err := ParseExit(ExitPayload(st))
		if err != nil || got != st {
			t.Fatalf("exit %d -> %d %v", st, got, err)
		}
	}
	if _, _, err := ParseResize([]byte{1, 2, 3}); !errors.Is(err, ErrProtocol) {
		t.Fatal("short resize accepted")
	}
	if _, err := ParseExit(nil); !errors.Is(err, ErrProtocol) {
		t.Fatal("empty exit accepted")
	}
}

func TestParseHello(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want Hello
	}{
		{`{"mode":"watch"}`, true, Hello{Mode: ModeWatch}},
		{`{"mode":"attach","cols":120,"rows":40}`, true, Hello{Mode: ModeAttach, Cols: 120, Rows: 40}},
		{`{"v":1,"mode":"attach","extra":true}`, true, Hello{V: 1, Mode: ModeAttach}},
		{`{"mode":"spy"}`, false, Hello{}},
		{`{"mode":"watch","v":2}`, false, Hello{}},
		{`{"mode":"watch","cols":70000}`, false, Hello{}},
		{`{"mode":"watch","rows":-1}`, false, Hello{}},
		{`{"mode":"watch"} {"mode":"attach"}`, false, Hello{}},
		{`not json`, false, Hello{}},
		{``, false, Hello{}},
		{`{"mode":"watch","pad":"` + strings.Repeat("a", MaxHelloLen) + `"}`, false, Hello{}},
	}
	for _, tt := range tests {
		h, err := ParseHello([]byte(tt.line))
		if (err == nil) != tt.ok || (tt.ok && h != tt.want) {
			t.Errorf("ParseHello(%.40q) = %+v, %v", tt.line, h, err)
		}
		if err != nil && !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseHello(%.40q): %v does not wrap ErrProtocol", tt.line, err)
		}
		if tt.ok {
			back, err := ParseHello(bytes.TrimSuffix(h.Marshal(), []byte("\n")))
			if err != nil || back != h {
				t.Errorf("round trip %+v: %+v %v", h, back, err)
			}
		}
	}
}

func TestRing(t *testing.T) {
	tests := []struct {
		size   int
		writes []string
		want   string
	}{
		{8, nil, ""},
		{8, []string{"abc"}, "abc"},
		{8, []string{"abcd", "efgh"}, "abcdefgh"},
		{8, []string{"abcdef", "ghij"}, "cdefghij"},
		{8, []string{"0123456789abc"}, "56789abc"},
		{8, []string{"ab", "0123456789"}, "23456789"},
		{4, []string{"a", "b", "c", "d", "e", "f"}, "cdef"},
	}
	for _, tt := range tests {
		r := newRing(tt.size)
		for _, w := range tt.writes {
			r.Write([]byte(w))
		}
		if got := string(r.Snapshot()); got != tt.want {
			t.Errorf("ring(%d) %q = %q, want %q", tt.size, tt.writes, got, tt.want)
		}
	}
}

// FuzzDecoder: whatever the bytes, the decoder never panics, never returns a
// payload over the limit, and what it decodes re-encodes to the bytes it
// consumed.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendFrame(nil, FrameData, []byte("hello")))
	f.Add(AppendFrame(AppendFrame(nil, FrameResize, ResizePayload(80, 24)), FrameData, []byte("x")))
	f.Add([]byte{FrameData, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x7f, 0, 0, 0, 0})
	f.Add([]byte{FrameExit, 0, 0, 0, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 1024
		d := NewDecoder(bytes.NewReader(in), limit)
		var re []byte
		for {
			fr, err := d.Next()
			if err != nil {
				break
			}
			if len(fr.Payload) > limit || !knownType(fr.Type) {
				t.Fatalf("frame %x with %d bytes", fr.Type, len(fr.Payload))
			}
			switch fr.Type {
			case FrameResize:
				_, _, _ = ParseResize(fr.Payload)
			case FrameExit:
				_, _ = ParseExit(fr.Payload)
			}
			re = AppendFrame(re, fr.Type, fr.Payload)
		}
		if !bytes.HasPrefix(in, re) {
			t.Fatalf("re-encoding is not a prefix of the input")
		}
	})
}

// FuzzHello: ParseHello never panics and what it accepts round-trips.
func FuzzHello(f *testing.F) {
	f.Add([]byte(`{"mode":"watch"}`))
	f.Add([]byte(`{"mode":"attach","cols":80,"rows":24}`))
	f.Add([]byte(`{"mode":`))
	f.Fuzz(func(t *testing.T, line []byte) {
		h, err := ParseHello(line)
		if err != nil {
			return
		}
		back, err := ParseHello(bytes.TrimSuffix(h.Marshal(), []byte("\n")))
		if err != nil || back != h {
			t.Fatalf("round trip %+v: %+v %v", h, back, err)
		}
	})
}
