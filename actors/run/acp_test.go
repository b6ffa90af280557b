package run

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTermOutputCut: a terminal keeps at most its limit, cut from the
// beginning on a character boundary (ACP terminal/output).
func TestTermOutputCut(t *testing.T) {
	tm := &term{limit: 8}
	_, _ = tm.Write([]byte("abc"))
	if string(tm.out) != "abc" || tm.truncated {
		t.Fatalf("%q %v", tm.out, tm.truncated)
	}
	_, _ = tm.Write([]byte("défghij")) // é is two bytes
	if len(tm.out) > 8 || !tm.truncated || !strings.HasSuffix(string(tm.out), "ghij") || !utf8.Valid(tm.out) {
		t.Fatalf("%q %v", tm.out, tm.truncated)
	}
	tm = &term{limit: 3}
	_, _ = tm.Write([]byte("aé"))  // 3 bytes: kept
	_, _ = tm.Write([]byte("ééx")) // cut inside é: moves past it
	if s := string(tm.out); s != "éx" {
		t.Fatalf("%q", s)
	}
}

// TestEnvKeyOK: an agent's terminal env never sets PATH or CTX_*.
// spec: X11
func TestEnvKeyOK(t *testing.T) {
	for k, ok := range map[string]bool{"FOO": true, "foo_1": true, "_X": true, "PATH": false, "CTX_RUN": false,
		"": false, "1A": false, "A-B": false, "A=B": false} {
		if envKeyOK(k) != ok {
			t.Errorf("%q: want %v", k, ok)
		}
	}
}
