package agentdef

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestParseEnv: KEY=VALUE lines; the value is literal (no expansion, no
// quotes); keys are [A-Z_][A-Z0-9_]* and never CTX_*. spec: X11, B4
// (interfaces.md "Locations": env)
func TestParseEnv(t *testing.T) {
	cases := []struct {
		name, in string
		want     []KV
		ok       bool
	}{
		{"empty file", "", nil, true},
		{"one", "A=1\n", []KV{{"A", "1"}}, true},
		{"value with =", "URL=https://x/?a=b&c=d\n", []KV{{"URL", "https://x/?a=b&c=d"}}, true},
		{"value with spaces kept", "GREETING=  hello  world  \n", []KV{{"GREETING", "  hello  world  "}}, true},
		{"value with $ not expanded", "P=$HOME:${PATH}\n", []KV{{"P", "$HOME:${PATH}"}}, true},
		{"quotes kept literally", "Q=\"a b\"\n", []KV{{"Q", "\"a b\""}}, true},
		{"empty value", "E=\n", []KV{{"E", ""}}, true},
		{"underscore key", "_X_1=y\n", []KV{{"_X_1", "y"}}, true},
		{"UTF-8 value", "NAME=héllo 😀\n", []KV{{"NAME", "héllo 😀"}}, true},
		{"order kept", "B=2\nA=1\n", []KV{{"B", "2"}, {"A", "1"}}, true},
		{"CTX-like but not CTX_", "CTXA=1\nXCTX_=2\n", []KV{{"CTXA", "1"}, {"XCTX_", "2"}}, true},

		{"lowercase key", "path=/bin\n", nil, false},
		{"mixed-case key", "Path=/bin\n", nil, false},
		{"digit first", "1A=x\n", nil, false},
		{"dash in key", "A-B=x\n", nil, false},
		{"space before =", "A =x\n", nil, false},
		{"export prefix", "export A=x\n", nil, false},
		{"empty key", "=x\n", nil, false},
		{"CTX_ key", "CTX_PATH=/x\n", nil, false},
		{"CTX_ key alone", "CTX_=x\n", nil, false},
		{"duplicate", "A=1\nA=2\n", nil, false},
		{"missing =", "A\n", nil, false},
		{"blank line", "A=1\n\nB=2\n", nil, false},
		{"comment", "# note\n", nil, false},
		{"no trailing LF", "A=1", nil, false},
		{"just LF", "\n", nil, false},
		{"CR", "A=1\r\n", nil, false},
		{"CR in value", "A=x\ry\n", nil, false},
		{"NUL", "A=x\x00y\n", nil, false},
		{"invalid UTF-8", "A=\xff\n", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv([]byte(tc.in))
			if tc.ok != (err == nil) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseEnv(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestOneLine: exactly one non-empty LF-terminated line, no CR, no NUL,
// valid UTF-8. spec: X1, A1, W2 (control files are one value per line)
func TestOneLine(t *testing.T) {
	good := map[string]string{"auto\n": "auto", "sdk-envelope-v1\n": "sdk-envelope-v1", " a b \n": " a b ", "é\n": "é"}
	for in, want := range good {
		if got, err := OneLine([]byte(in)); err != nil || got != want {
			t.Errorf("OneLine(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "\n", "auto", "auto\n\n", "a\nb\n", "auto\r\n", "a\x00\n", "\xff\n", "\r\n"} {
		if got, err := OneLine([]byte(in)); err == nil {
			t.Errorf("OneLine(%q) = %q, want an error", in, got)
		}
	}
}

// TestLines: one value per LF-terminated line, each checked, no duplicates. spec: K2, W6
func TestLines(t *testing.T) {
	check := func(s string) error {
		if !regexp.MustCompile(`^[a-z]+$`).MatchString(s) {
			return errors.New("bad")
		}
		return nil
	}
	cases := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"a\n", []string{"a"}, true},
		{"b\na\n", []string{"b", "a"}, true},
		{"a", nil, false},
		{"a\nb", nil, false},
		{"a\n\nb\n", nil, false},
		{"\n", nil, false},
		{"a\na\n", nil, false},
		{"a\nB\n", nil, false},
		{"a\r\n", nil, false},
	}
	for _, tc := range cases {
		got, err := Lines([]byte(tc.in), check)
		if tc.ok != (err == nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lines(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if _, err := Lines([]byte("anthropic/claude-x\nopenai/gpt-4o\n"), checkModel); err != nil {
		t.Errorf("model lines: %v", err)
	}
	for _, m := range []string{"claude\n", "Anthropic/x\n", "a/\n", "/x\n", "a/b c\n"} {
		if _, err := Lines([]byte(m), checkModel); err == nil {
			t.Errorf("model %q accepted", m)
		}
	}
}

// TestCheckCTXPath: clean absolute directories separated by colons. spec: S6, K3, K4
func TestCheckCTXPath(t *testing.T) {
	for _, v := range []string{"/ctx/tool", "/ctx/tool:/ctx/home/1000/tool", "/", "/a:/b:/c"} {
		if err := CheckCTXPath(v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"", ":", "/a:", ":/a", "/a::/b", "tool", "/a:rel", "/a/", "/a/../b", "/a/./b", "//a", "/ctx/tool:~/tool"} {
		if err := CheckCTXPath(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

// FuzzParseEnv: never panics; whatever it accepts is exactly the input
// re-joined as KEY=VALUE lines, with valid keys, no CTX_ key, no duplicate,
// and no CR/NUL/LF in any value. spec: X11, B4
func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{
		"", "A=1\n", "URL=https://x/?a=b\n", "P=$HOME\n", "S=  spaced  \n", "A=1\nB=2\n",
		"a=1\n", "CTX_PATH=/x\n", "A=1\nA=2\n", "A\n", "A=1", "A=1\r\n", "A=\x00\n", "\n", "=\n", "A=\xff\n",
	} {
		f.Add([]byte(s))
	}
	keyRE := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	f.Fuzz(func(t *testing.T, b []byte) {
		kvs, err := ParseEnv(b)
		if err != nil {
			if kvs != nil {
				t.Fatalf("values and error: %v %v", kvs, err)
			}
			return
		}
		var sb strings.Builder
		seen := map[string]bool{}
		for _, kv := range kvs {
			if !keyRE.MatchString(kv.Key) || strings.HasPrefix(kv.Key, "CTX_") || seen[kv.Key] {
				t.Fatalf("key %q accepted", kv.Key)
			}
			if strings.ContainsAny(kv.Value, "\n\r\x00") {
				t.Fatalf("value %q accepted", kv.Value)
			}
			seen[kv.Key] = true
			sb.WriteString(kv.Key + "=" + kv.Value + "\n")
		}
		if sb.String() != string(b) {
			t.Fatalf("not literal: %q parsed as %q", b, sb.String())
		}
	})
}

// TestNameChecksMatchTheRegexps: the byte-class checks of models and env
// keys accept exactly what their regexps did.
func TestNameChecksMatchTheRegexps(t *testing.T) {
	modelRE := regexp.MustCompile(`^[a-z0-9][a-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._:/-]*$`)
	for _, m := range []string{"anthropic/claude-x", "openai/gpt-4o", "a/b", "a-/b", "-a/b", "a/b/c", "a//b", "a/.b",
		"ollama/llama3:8b", "a/b c", "A/b", "a", "a/", "/b", "", "a/b\n", "ä/b", "a/b:c/d.e_f-g"} {
		if got, want := checkModel(m) == nil, modelRE.MatchString(m); got != want {
			t.Errorf("checkModel(%q) ok=%v, the regexp says %v", m, got, want)
		}
	}
	keyRE := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	for _, k := range []string{"PATH", "_X", "A1", "1A", "a", "A-B", "", "A B", "ÄB", "HTTP_PROXY"} {
		_, err := ParseEnv([]byte(k + "=v\n"))
		if got, want := err == nil, keyRE.MatchString(k); got != want {
			t.Errorf("env key %q ok=%v, the regexp says %v (%v)", k, got, want, err)
		}
	}
}
