package stdtool

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// argsTool is a tool shape for Parse: 1 to 2 positionals, a value flag
// with an alias, a boolean and a duration.
var argsTool = &Tool{
	Name: "t", Min: 1, Max: 2,
	Flags: []Flag{
		{Name: "--limit", Alias: "-n", Value: true},
		{Name: "--all"},
		{Name: "--timeout", Value: true},
	},
}

// spec: Parse: flags before or after positionals, `--` ends
// flags, `--name=value`, only flag-shaped words are flags.
func TestArgsParse(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		pos   []string
		flags map[string]string
		err   string
	}{
		{name: "positional only", args: []string{"a"}, pos: []string{"a"}, flags: map[string]string{}},
		{name: "flags after", args: []string{"a", "--limit", "5", "--all"}, pos: []string{"a"}, flags: map[string]string{"--limit": "5", "--all": ""}},
		{name: "flags before", args: []string{"--all", "-n", "5", "a", "b"}, pos: []string{"a", "b"}, flags: map[string]string{"--limit": "5", "--all": ""}},
		{name: "name=value", args: []string{"--limit=7", "a"}, pos: []string{"a"}, flags: map[string]string{"--limit": "7"}},
		{name: "empty value", args: []string{"--limit=", "a"}, pos: []string{"a"}, flags: map[string]string{"--limit": ""}},
		{name: "value may start with a dash", args: []string{"a", "--limit", "-3"}, pos: []string{"a"}, flags: map[string]string{"--limit": "-3"}},
		{name: "-- ends flags", args: []string{"a", "--", "--all"}, pos: []string{"a", "--all"}, flags: map[string]string{}},
		{name: "lone dash", args: []string{"-"}, pos: []string{"-"}, flags: map[string]string{}},
		{name: "negative number", args: []string{"-1"}, pos: []string{"-1"}, flags: map[string]string{}},
		{name: "markdown list", args: []string{"f", "- item\n- two\n"}, pos: []string{"f", "- item\n- two\n"}, flags: map[string]string{}},
		{name: "diff line", args: []string{"--- a/x"}, pos: []string{"--- a/x"}, flags: map[string]string{}},
		{name: "triple dash", args: []string{"---"}, pos: []string{"---"}, flags: map[string]string{}},
		{name: "unknown flag", args: []string{"a", "--bogus"}, err: "unknown flag --bogus (put -- before an argument that starts with -)"},
		{name: "unknown short flag", args: []string{"-x", "a"}, err: "unknown flag -x (put -- before an argument that starts with -)"},
		{name: "missing value", args: []string{"a", "--limit"}, err: "flag --limit needs a value"},
		{name: "boolean with a value", args: []string{"a", "--all=yes"}, err: "flag --all takes no value"},
		{name: "twice through the alias", args: []string{"a", "-n", "1", "--limit", "2"}, err: "flag --limit given twice"},
		{name: "too few", args: []string{"--all"}, err: "needs at least 1 argument(s), got 0"},
		{name: "too many", args: []string{"a", "b", "c d"}, err: `takes at most 2 argument(s), got 3: "a" "b" "c d"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(argsTool, tc.args)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Pos, tc.pos) || !reflect.DeepEqual(a.flags, tc.flags) {
				t.Fatalf("pos %q flags %v, want %q %v", a.Pos, a.flags, tc.pos, tc.flags)
			}
		})
	}
	exact := &Tool{Name: "e", Min: 2, Max: 2}
	if _, err := Parse(exact, []string{"a"}); err == nil || err.Error() != "needs 2 argument(s), got 1" {
		t.Fatalf("exact count: %v", err)
	}
}

// spec: the accessors: Has, Arg, String, Int, Seconds.
func TestArgsAccessors(t *testing.T) {
	a, err := Parse(argsTool, []string{"a", "--limit", "12", "--timeout", "1.5"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Has("--limit") || a.Has("--all") || a.Arg(0, "x") != "a" || a.Arg(1, "def") != "def" || a.String("--limit", "") != "12" || a.String("--all", "no") != "no" {
		t.Fatalf("accessors: %+v", a)
	}
	if n, err := a.Int("--limit", 1, 1, 100); n != 12 || err != nil {
		t.Fatalf("Int = %d %v", n, err)
	}
	if n, err := a.Int("--absent", 7, 1, 100); n != 7 || err != nil {
		t.Fatalf("Int default = %d %v", n, err)
	}
	if _, err := a.Int("--limit", 1, 1, 10); err == nil || err.Error() != `flag --limit: "12" is not a whole number from 1 to 10` {
		t.Fatalf("Int range: %v", err)
	}
	if d, err := a.Seconds("--timeout", time.Second, time.Minute); d != 1500*time.Millisecond || err != nil {
		t.Fatalf("Seconds = %v %v", d, err)
	}
	for v, want := range map[string]string{
		"2m":   "",
		"90s":  "",
		"0":    `flag --timeout: "0" is not from 0 to 10m0s`,
		"11m":  `flag --timeout: "11m" is not from 0 to 10m0s`,
		"soon": `flag --timeout: "soon" is not a number of seconds`,
	} {
		a, err := Parse(argsTool, []string{"a", "--timeout=" + v})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Seconds("--timeout", time.Second, 10*time.Minute)
		if got := ""; err != nil {
			got = err.Error()
			if got != want {
				t.Errorf("Seconds(%q) = %q, want %q", v, got, want)
			}
		} else if want != "" {
			t.Errorf("Seconds(%q) passed, want %q", v, want)
		}
	}
}

// FuzzArgs: Parse never panics; what it accepts has Min to Max positional
// words, each one of the arguments; words that cannot be flags are kept
// in order.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{
		"a\x00--limit\x005",
		"--limit=3\x00a\x00b",
		"a\x00--\x00--all\x00-n",
		"-\x00-1",
		"- item\n- two\x00x",
		"--all=\x00a",
		"-n\x00",
		"a\x00b\x00c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		a, err := Parse(argsTool, args)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if len(a.Pos) < argsTool.Min || len(a.Pos) > argsTool.Max {
			t.Fatalf("%q: %d positionals", args, len(a.Pos))
		}
		for _, p := range a.Pos {
			if !slices.Contains(args, p) {
				t.Fatalf("%q: positional %q is no argument", args, p)
			}
		}
		for name := range a.flags {
			if name != "--limit" && name != "--all" && name != "--timeout" {
				t.Fatalf("%q: unknown flag %q accepted", args, name)
			}
		}
		plain := true
		for _, w := range args {
			plain = plain && !strings.HasPrefix(w, "-")
		}
		if plain && !slices.Equal(a.Pos, args) {
			t.Fatalf("%q: positionals %q", args, a.Pos)
		}
	})
}
