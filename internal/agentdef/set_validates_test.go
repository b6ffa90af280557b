package agentdef

import (
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// `ctx agent set NAME CONTROL VALUE` is "validated, atomic" (interfaces.md):
// a value that Load (or the policy/label readers) refuses must be refused by
// Set, with nothing written, instead of breaking every later run.
// spec: V1 W5
func TestSetRefusesValuesTheDefinitionReaderRefuses(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: 1000}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	if err := Create(l, "a", CreateOptions{Models: []string{"openai/gpt-4o"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ control, value string }{
		{"mount", "rw /etc"},
		{"mount", "rw /home/me /proc"},
		{"mount", "net local localhost:11434"}, // a name, not an address
		{"mount", "net local 127.0.0.1"},
		{"mount", "net everything"},
		{"uid", "abc"},
		{"gid", "-1"},
		{"cwd", "relative/dir"},
		{"root", "/srv/jail"},
		{"label", "two words"},
		{"policy", "allow everything"},
		{"policy", "allow label x"},
		{"limits", "tasks unlimited"}, // Limits
		{"limits", "swap 1G"},
	} {
		if err := Set(l, "a", c.control, c.value, nil); err == nil {
			t.Errorf("set %s %q accepted", c.control, c.value)
		}
		if _, err := Load(l, "a"); err != nil {
			t.Fatalf("after set %s %q the definition no longer loads: %v", c.control, c.value, err)
		}
	}
	for _, o := range []CreateOptions{
		{Models: []string{"openai/gpt-4o", "openai/gpt-4o"}},
		{Models: []string{"openai/gpt-4o"}, Tools: []string{"x", "x"}},
	} {
		if err := Create(l, "b", o); err == nil {
			if _, lerr := Load(l, "b"); lerr != nil {
				t.Errorf("create %+v succeeded but the agent does not load: %v", o, lerr)
			}
			_ = Remove(l, "b")
		}
	}
}
