package tshrc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spec: K3 — .tshrc is data: only CTX_PATH= with absolute directories.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
		err  string // prefix of the error, "" = valid
	}{
		{"empty file", "", nil, ""},
		{"pinned example", "CTX_PATH=/ctx/tool:/ctx/home/1000/tool\n", []string{"/ctx/tool", "/ctx/home/1000/tool"}, ""},
		{"comments and blanks", "# mine\n\nCTX_PATH=/a\n# end\n", []string{"/a"}, ""},
		{"no final newline", "CTX_PATH=/a", []string{"/a"}, ""},
		{"trailing slash cleaned", "CTX_PATH=/a/b/", []string{"/a/b"}, ""},
		{"double slash cleaned", "CTX_PATH=//a//b", []string{"/a/b"}, ""},
		{"odd but literal chars", "CTX_PATH=/a-b_c.d+e,f@g=h%i", []string{"/a-b_c.d+e,f@g=h%i"}, ""},
		{"command substitution", "CTX_PATH=$(touch /tmp/marker)\n", nil, "f:1: "},
		{"variable", "# x\nCTX_PATH=$HOME/tool\n", nil, "f:2: "},
		{"braced variable", "CTX_PATH=/a:${X}\n", nil, "f:1: "},
		{"backtick", "CTX_PATH=/`id`\n", nil, "f:1: "},
		{"single quotes", "CTX_PATH='/a'\n", nil, "f:1: "},
		{"double quotes", "CTX_PATH=\"/a\"\n", nil, "f:1: "},
		{"backslash", "CTX_PATH=/a\\ b\n", nil, "f:1: "},
		{"relative", "CTX_PATH=tool\n", nil, "f:1: "},
		{"dot-slash", "CTX_PATH=./tool\n", nil, "f:1: "},
		{"dotdot", "CTX_PATH=/ctx/../etc\n", nil, "f:1: "},
		{"dot component", "CTX_PATH=/ctx/./tool\n", nil, "f:1: "},
		{"tilde", "CTX_PATH=~/tool\n", nil, "f:1: "},
		{"empty entry", "CTX_PATH=/a::/b\n", nil, "f:1: "},
		{"trailing colon", "CTX_PATH=/a:\n", nil, "f:1: "},
		{"empty value", "CTX_PATH=\n", nil, "f:1: "},
		{"export", "export CTX_PATH=/a\n", nil, "f:1: "},
		{"space before =", "CTX_PATH =/a\n", nil, "f:1: "},
		{"space in value", "CTX_PATH=/a /b\n", nil, "f:1: "},
		{"semicolon", "CTX_PATH=/a;touch x\n", nil, "f:1: "},
		{"other variable", "PATH=/usr/bin\n", nil, "f:1: "},
		{"command", "\n\ntouch marker\n", nil, "f:3: "},
		{"indented comment", " # x\n", nil, "f:1: "},
		{"twice", "CTX_PATH=/a\nCTX_PATH=/b\n", nil, "f:2: "},
		{"CRLF", "CTX_PATH=/a\r\n", nil, "f:1: "},
		{"NUL", "CTX_PATH=/a\x00\n", nil, "f:1: "},
		{"bad UTF-8", "CTX_PATH=/\xff\n", nil, "f:1: "},
		{"glob", "CTX_PATH=/a/*\n", nil, "f:1: "},
		{"too large", strings.Repeat("#\n", MaxSize), nil, "f: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("f", []byte(tc.in))
			if tc.err != "" {
				if err == nil {
					t.Fatalf("accepted: %q", got)
				}
				if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %q, want prefix %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ":") != strings.Join(tc.want, ":") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".tshrc")
	if d, present, err := Load(p); d != nil || present || err != nil {
		t.Fatalf("absent: %v %v %v", d, present, err)
	}
	if err := os.WriteFile(p, []byte("CTX_PATH=/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, present, err := Load(p); len(d) != 1 || !present || err != nil {
		t.Fatalf("present: %v %v %v", d, present, err)
	}
	if err := os.WriteFile(p, []byte("CTX_PATH=$(touch m)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(p); err == nil || !strings.HasPrefix(err.Error(), p+":1:") {
		t.Fatalf("invalid: %v", err)
	}
	if _, _, err := Load(dir); err == nil {
		t.Fatal("directory accepted")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "CTX_PATH=/ctx/tool:/ctx/home/1000/tool\n", "# c\n\nCTX_PATH=/a\n",
		"CTX_PATH=$(touch m)\n", "CTX_PATH=`id`", "CTX_PATH='/a'", "CTX_PATH=/a/../b",
		"CTX_PATH=/a::/b", "export CTX_PATH=/a", "CTX_PATH=/a\nCTX_PATH=/b", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		dirs, err := Parse("fuzz", []byte(data))
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		for _, d := range dirs {
			if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsAny(d, "$`'\"\\ \t;&|<>(){}*?[]~!#\r\n") {
				t.Fatalf("unsafe directory %q accepted", d)
			}
			for _, c := range strings.Split(d, "/") {
				if c == ".." || c == "." {
					t.Fatalf("dot component in %q", d)
				}
			}
		}
		// Valid output round-trips.
		if len(dirs) > 0 {
			again, err := Parse("fuzz", []byte(prefix+strings.Join(dirs, ":")+"\n"))
			if err != nil || strings.Join(again, ":") != strings.Join(dirs, ":") {
				t.Fatalf("round trip: %q %v", again, err)
			}
		}
	})
}
