package window

import (
	"errors"
	"math"
	"testing"
)

// spec: W2
func TestParse(t *testing.T) {
	ok := map[string]Value{
		"auto\n":       Auto(),
		"1\n":          Tokens(1),
		"128000\n":     Tokens(128000),
		"4294967295\n": Tokens(math.MaxUint32),
	}
	for in, want := range ok {
		got, err := Parse([]byte(in))
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
		if string(got.Bytes()) != in {
			t.Errorf("Bytes round trip %q -> %q", in, got.Bytes())
		}
	}
	bad := []string{
		"", "\n", "auto", "128000", "0\n", "00\n", "0128\n", "+1\n", "-1\n",
		" 1\n", "1 \n", "1\t\n", "4294967296\n", "99999999999999999999\n",
		"1\r\n", "auto\r\n", "1\n2\n", "auto\n\n", "\nauto\n", "AUTO\n", "Auto\n",
		"1e3\n", "0x10\n", "1_000\n", "１\n", "auto \n", "1\x00\n",
	}
	for _, in := range bad {
		if v, err := Parse([]byte(in)); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, %v; want ErrInvalid", in, v, err)
		}
	}
}

// spec: W4
func TestEffective(t *testing.T) {
	cases := []struct {
		v      Value
		limit  uint32
		known  bool
		want   uint32
		wantOK bool
	}{
		{Auto(), 200000, true, 200000, true},
		{Auto(), 0, false, 0, false},
		{Auto(), 0, true, 0, false},
		{Tokens(1000), 200000, true, 1000, true},
		{Tokens(1000), 0, false, 1000, true}, // a number is that number (W5 is separate)
	}
	for _, c := range cases {
		got, ok := Effective(c.v, c.limit, c.known)
		if got != c.want || ok != c.wantOK {
			t.Errorf("Effective(%v,%d,%v) = %d,%v", c.v, c.limit, c.known, got, ok)
		}
	}
}

// spec: W5
func TestCheckInvariant(t *testing.T) {
	if err := CheckInvariant(Auto(), 0, false); err != nil {
		t.Error("auto is always valid")
	}
	if err := CheckInvariant(Tokens(200000), 200000, true); err != nil {
		t.Error("equal to limit is valid")
	}
	for _, c := range []struct {
		v     Value
		limit uint32
		known bool
	}{
		{Tokens(200001), 200000, true},
		{Tokens(1), 0, false},
		{Tokens(math.MaxUint32), math.MaxUint32 - 1, true},
	} {
		err := CheckInvariant(c.v, c.limit, c.known)
		var ie *InvariantError
		if !errors.Is(err, ErrInvariant) || !errors.As(err, &ie) || ie.Reason() == "" {
			t.Errorf("%v/%d/%v: %v", c.v, c.limit, c.known, err)
		}
	}
}

type fakeLimits map[string]uint32

func (f fakeLimits) Limit(m string) (uint32, bool) { n, ok := f[m]; return n, ok }

// spec: W6
func TestForCandidate(t *testing.T) {
	lim := fakeLimits{"a/big": 200000, "a/small": 8000}
	if n, k, err := ForCandidate(Auto(), "a/small", lim); err != nil || n != 8000 || !k {
		t.Errorf("auto follows candidate: %d %v %v", n, k, err)
	}
	if n, k, err := ForCandidate(Auto(), "a/unknown", lim); err != nil || k || n != 0 {
		t.Errorf("auto unknown: %d %v %v", n, k, err)
	}
	for _, m := range []string{"a/small", "a/unknown"} {
		_, _, err := ForCandidate(Tokens(100000), m, lim)
		var ie *InvariantError
		if !errors.As(err, &ie) || ie.Model != m {
			t.Errorf("%s: want unusable naming the model, got %v", m, err)
		}
	}
	errs := UnusableFallbacks(Tokens(100000), []string{"a/big", "a/small", "a/unknown"}, lim)
	if len(errs) != 2 {
		t.Errorf("fallbacks: %v", errs)
	}
}

// spec: W7 W8 W9 — every formula at the edges.
func TestFormulasAtEdges(t *testing.T) {
	const max = math.MaxUint32
	cases := []struct {
		eff, reserve, budget, skills uint32
		envChars                     string
	}{
		{1, 1, 0, 0, "4"},
		{3, 1, 8, 0, "12"},
		{4, 1, 12, 0, "16"},
		{5, 1, 16, 0, "20"},
		{16384, 4096, 49152, 983, "65536"},
		{16385, 4096, 49156, 983, "65540"},
		{200000, 4096, 783616, 15672, "800000"},
		{max, 4096, max - 16384, 85899018, "4294967295"}, // saturated
	}
	for _, c := range cases {
		if got := Reserve(c.eff); got != c.reserve {
			t.Errorf("Reserve(%d) = %d, want %d", c.eff, got, c.reserve)
		}
		if got := InputBudgetChars(c.eff); got != c.budget {
			t.Errorf("InputBudgetChars(%d) = %d, want %d", c.eff, got, c.budget)
		}
		if got := SkillBudget(InputBudgetChars(c.eff)); got != c.skills {
			t.Errorf("SkillBudget(%d) = %d, want %d", c.eff, got, c.skills)
		}
		env := Env(c.eff)
		if env[EnvChars] != c.envChars || env[EnvTokens] == "" || len(env) != 2 {
			t.Errorf("Env(%d) = %v", c.eff, env)
		}
	}
	if Reserve(0) != 1 || InputBudgetChars(0) != 0 || Env(0) != nil {
		t.Error("zero window must not underflow")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"auto\n", "1\n", "4294967295\n", "4294967296\n", "0\n", "01\n", "", "1", "1\r\n", "1\n2\n", "+1\n", " 1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		// Anything accepted is canonical: it re-serializes to the same bytes.
		if string(v.Bytes()) != string(b) {
			t.Fatalf("accepted %q but canonical form is %q", b, v.Bytes())
		}
	})
}
