package layout

import (
	"errors"
	"testing"
)

func TestCheckName(t *testing.T) {
	good := []string{"a", "demo", "A.b-c_d", "0", "x123456789012345678901234567890123456789012345678901234567890123"}
	bad := []string{"", ".", "..", "../x", "a/b", "-a", ".hidden", "a b", "é", "x1234567890123456789012345678901234567890123456789012345678901234", "a\x00"}
	for _, n := range good {
		if err := CheckName("agent", n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range bad {
		if err := CheckName("agent", n); !errors.Is(err, ErrBadName) {
			t.Errorf("%q: want ErrBadName, got %v", n, err)
		}
	}
}

func TestHostPath(t *testing.T) {
	l := Layout{Root: "/r", Runtime: "/run/x", UID: 7}
	cases := map[string]string{"/ctx": "/r", "/ctx/tool": "/r/tool", "/ctx/home/7/tool/": "/r/home/7/tool"}
	for in, want := range cases {
		got, ok := l.HostPath(in)
		if !ok || got != want {
			t.Errorf("%s: %s %v", in, got, ok)
		}
	}
	for _, in := range []string{"/ctxx", "/etc", "/ctx/../etc", "relative"} {
		if got, ok := l.HostPath(in); ok {
			t.Errorf("%s: want refusal, got %s", in, got)
		}
	}
	if l.DefaultCTXPath() != "/ctx/tool:/ctx/home/7/tool" {
		t.Error(l.DefaultCTXPath())
	}
}
