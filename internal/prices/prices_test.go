package prices

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `# model                      input  output  cache_read  cache_write
anthropic/claude-sonnet-4-5	3	15	0.30	3.75

openai/gpt-4o   2.50   10   1.25   -
   # indented comment
local/free 0 0 0 0
`

// TestParse: the documented format, and every way a line is refused
// (naming its line).
func TestParse(t *testing.T) {
	tb, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Len() != 3 {
		t.Fatalf("len %d", tb.Len())
	}
	p, ok := tb.Lookup("openai/gpt-4o")
	if !ok || *p.Input != 2.5 || *p.Output != 10 || *p.CacheRead != 1.25 || p.CacheWrite != nil {
		t.Errorf("gpt-4o: %+v", p)
	}
	for _, tc := range []struct{ name, in, err string }{
		{"too few fields", "m 1 2 3\n", "line 1: want 5 fields"},
		{"too many", "# c\nm 1 2 3 4 5\n", "line 2: want 5 fields"},
		{"negative", "m -1 2 3 4\n", `line 1: input: "-1" is not a decimal number or -`},
		{"exponent", "m 1e3 2 3 4\n", `line 1: input: "1e3" is not a decimal number or -`},
		{"nan", "m 1 NaN 3 4\n", `output: "NaN" is not`},
		{"comma", "m 1 2,5 3 4\n", `"2,5" is not`},
		{"dots", "m 1 2 3 1.2.3\n", `cache_write: "1.2.3" is not`},
		{"huge", "m 1 2 3 1000001\n", "over 1e+06"},
		{"duplicate", "m 1 2 3 4\nm 1 2 3 4\n", "line 2: model m is listed twice"},
		{"control in name", "m\x01 1 2 3 4\n", "control or space"},
	} {
		_, err := Parse(strings.NewReader(tc.in))
		if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestCost: usage is priced only when every kind of token used has a
// price; nothing is made up.
func TestCost(t *testing.T) {
	tb, _ := Parse(strings.NewReader(sample))
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	for _, tc := range []struct {
		model string
		u     Usage
		want  float64
		ok    bool
	}{
		{"anthropic/claude-sonnet-4-5", Usage{Input: 1000, Output: 100}, 0.0045, true},
		{"anthropic/claude-sonnet-4-5", Usage{Input: 1_000_000, Output: 1_000_000, CacheRead: 1_000_000, CacheWrite: 1_000_000}, 3 + 15 + 0.3 + 3.75, true},
		{"openai/gpt-4o", Usage{Input: 10, Output: 10}, (10*2.5 + 10*10) / 1e6, true},
		{"openai/gpt-4o", Usage{Input: 10, CacheWrite: 1}, 0, false}, // cache write unpriced
		{"unknown/model", Usage{Input: 1}, 0, false},
		{"local/free", Usage{Input: 5, Output: 5}, 0, true},
		{"anthropic/claude-sonnet-4-5", Usage{Input: -1}, 0, false},
	} {
		got, ok := tb.Cost(tc.model, tc.u)
		if ok != tc.ok || !near(got, tc.want) {
			t.Errorf("Cost(%s, %+v) = %v %v, want %v %v", tc.model, tc.u, got, ok, tc.want, tc.ok)
		}
	}
	var nilTable *Table
	if _, ok := nilTable.Cost("anthropic/claude-sonnet-4-5", Usage{Input: 1}); ok {
		t.Error("a nil table priced something")
	}
	if got, ok := tb.CostByModel(map[string]map[string]int64{
		"anthropic/claude-sonnet-4-5": {"input": 1000, "output": 100},
		"openai/gpt-4o":               {"input": 1000, "output": 0},
	}); !ok || !near(got, 0.0045+0.0025) {
		t.Errorf("CostByModel: %v %v", got, ok)
	}
	if _, ok := tb.CostByModel(map[string]map[string]int64{"anthropic/claude-sonnet-4-5": {"input": 1, "reasoning": 2}}); ok {
		t.Error("an unknown kind of token was priced")
	}
	if _, ok := tb.CostByModel(nil); ok {
		t.Error("no usage was priced")
	}
	for usd, want := range map[float64]string{0.0045: "$0.0045", 0: "$0.0000", 12.345: "$12.35"} {
		if got := Format(usd); got != want {
			t.Errorf("Format(%v) = %q, want %q", usd, got, want)
		}
	}
}

// TestLoad: an absent file is no table; a bad one is an error naming the
// file.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if tb, err := Load(filepath.Join(dir, "prices.tsv")); tb != nil || err != nil {
		t.Errorf("absent: %v %v", tb, err)
	}
	p := filepath.Join(dir, "bad.tsv")
	os.WriteFile(p, []byte("m 1\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) || !errors.Is(err, ErrSyntax) {
		t.Errorf("bad: %v", err)
	}
}

// FuzzParse: any input parses or fails with ErrSyntax; what parses holds
// only finite prices in range, and parsing is deterministic.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("m 1 2 3 4\nm 1 2 3 4\n")
	f.Add("m - - - -\n")
	f.Add("m 1e3 2 3 4\n")
	f.Add("\xff 1 2 3 4\n")
	f.Fuzz(func(t *testing.T, in string) {
		tb, err := Parse(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error without ErrSyntax: %v", err)
			}
			return
		}
		for m, p := range tb.m {
			for _, v := range []*float64{p.Input, p.Output, p.CacheRead, p.CacheWrite} {
				if v != nil && (math.IsNaN(*v) || *v < 0 || *v > MaxPrice) {
					t.Fatalf("%s: price %v", m, *v)
				}
			}
			if _, ok := tb.Cost(m, Usage{Input: 1 << 40, Output: 1 << 40}); ok {
				if c, _ := tb.Cost(m, Usage{Input: 1 << 40, Output: 1 << 40}); math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
					t.Fatalf("%s: cost %v", m, c)
				}
			}
		}
		again, err := Parse(strings.NewReader(in))
		if err != nil || again.Len() != tb.Len() {
			t.Fatalf("not deterministic: %v", err)
		}
	})
}
