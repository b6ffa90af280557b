package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/ctlsock"
)

// TestToolJSONMatches: the file shipped beside the tool and the string the
// daemon installs are the same.
func TestToolJSONMatches(t *testing.T) {
	b, err := os.ReadFile("tool.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != ctlsock.ToolJSON {
		t.Fatalf("tool.json %q differs from ctlsock.ToolJSON %q", b, ctlsock.ToolJSON)
	}
}

func TestParseSubject(t *testing.T) {
	for in, want := range map[string][2]string{
		"1000:coder:default": {"coder", "default"},
		"0:a:s:x":            {"a", "s:x"},
		"bad":                {"", ""},
		"":                   {"", ""},
	} {
		a, s := parseSubject(in)
		if a != want[0] || s != want[1] {
			t.Errorf("%q: %q %q", in, a, s)
		}
	}
}

// TestUsageErrorsExit1: no identity, no control, no socket: exit 1 with a
// reason on stderr and nothing on stdout.
func TestUsageErrorsExit1(t *testing.T) {
	env := map[string]string{"CTX_AGENT": "coder", "CTX_AGENT_SUBJECT": "0:coder:default", "CTX_RUN": "run-1", "CTX_CONTROL_SOCKET": t.TempDir() + "/none.sock"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{}, getenv, "--control is required"},
		{[]string{"--control", "system.md"}, func(string) string { return "" }, "not inside an agent run"},
		{[]string{"--control", "system.md", "extra"}, getenv, "unexpected arguments"},
		{[]string{"--control", "system.md"}, getenv, "control socket"},
		{[]string{"--control", "system.md", "--file", "/nonexistent"}, getenv, "no such file"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, tc.env, strings.NewReader("x"), &out, &errb)
		if code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: code %d out %q err %q, want %q", tc.args, code, out.String(), errb.String(), tc.want)
		}
	}
}
