package ownership

import (
	"errors"
	"strings"
	"testing"
)

var sessionCases = []struct {
	in string
	ok bool
}{
	{"agent/scope/session", true},
	{"a/b/c", true},
	{"my-agent/default/2026-01-02T03:04:05Z", true},
	{"a/b:c/d e", true},
	{"", false},
	{"a", false},
	{"a/b", false},
	{"a/b/", false},
	{"/b/c", false},
	{"a//c", false},
	{"a/b/c/", false},
	{"a/b/c/d", false},
	{"//", false},
	{"///", false},
	{"a/b//c", false},
}

func TestValidateSession(t *testing.T) {
	for _, c := range sessionCases {
		err := ValidateSession(c.in)
		if (err == nil) != c.ok {
			t.Errorf("ValidateSession(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateSession(%q) = %v, not ErrInvalid", c.in, err)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"prod", true}, {"node-1", true}, {"n.example:7000", true},
		{"", false}, {"a/b", false}, {"/", false}, {"a\x00b", false}, {"a\nb", false}, {"a\x7f", false},
	} {
		if err := validName("node", c.in); (err == nil) != c.ok {
			t.Errorf("validName(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}

// FuzzValidateSession: an accepted id has exactly three non-empty parts,
// joins back to itself, and its owner key stays inside owner/ with the id
// as its whole tail.
func FuzzValidateSession(f *testing.F) {
	for _, c := range sessionCases {
		f.Add(c.in)
	}
	k, err := keysFor("c")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateSession(s) != nil {
			return
		}
		parts := strings.Split(s, "/")
		if len(parts) != 3 {
			t.Fatalf("accepted %q with %d parts", s, len(parts))
		}
		for _, p := range parts {
			if p == "" {
				t.Fatalf("accepted %q with an empty part", s)
			}
		}
		if SessionID(parts[0], parts[1], parts[2]) != s {
			t.Fatalf("SessionID does not rebuild %q", s)
		}
		key := k.owner(s)
		if !strings.HasPrefix(key, k.owners()) || strings.TrimPrefix(key, k.owners()) != s {
			t.Fatalf("key %q for %q", key, s)
		}
	})
}
