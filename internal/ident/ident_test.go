package ident

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidMatchesTheRegexp: Valid agrees with the regexp each use
// replaced, on names at and around every edge.
func TestValidMatchesTheRegexp(t *testing.T) {
	cases := []struct {
		re          string
		first, rest string
		max         int
	}{
		{`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`, "A-Za-z0-9", "A-Za-z0-9._-", 63},
		{`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`, "A-Za-z0-9_", "A-Za-z0-9._-", 127},
		{`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`, "A-Za-z0-9", "A-Za-z0-9_-", 31},
		{`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`, "A-Za-z0-9", "A-Za-z0-9._:-", 127},
		{`^[A-Za-z_][A-Za-z0-9_]{0,127}$`, "A-Za-z_", "A-Za-z0-9_", 127},
	}
	inputs := []string{"", "a", "A", "0", "_", ".", "-", ":", "a.b", "a-b", "a_b", "a:b", "a b", "a/b", "é", "a\x00",
		"_x", ".x", "-x", "x.", "Z9", "a\n"}
	for _, n := range []int{31, 32, 33, 63, 64, 65, 127, 128, 129} {
		inputs = append(inputs, "a"+strings.Repeat("b", n-1), "a"+strings.Repeat("b", n))
	}
	for _, c := range cases {
		re := regexp.MustCompile(c.re)
		first, rest := NewClass(c.first), NewClass(c.rest)
		for _, in := range inputs {
			if got, want := Valid(in, first, rest, c.max), re.MatchString(in); got != want {
				t.Errorf("%s %q: Valid %v, regexp %v", c.re, in, got, want)
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{"a", "a.b", "-", "a\nb", strings.Repeat("x", 70)} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	first, rest := NewClass("A-Za-z0-9"), NewClass("A-Za-z0-9._:-")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s, first, rest, 127), re.MatchString(s); got != want {
			t.Errorf("%q: Valid %v, regexp %v", s, got, want)
		}
	})
}
