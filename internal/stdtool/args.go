package stdtool

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Args is a parsed argv: positional arguments in order and the flags given.
type Args struct {
	Pos   []string
	flags map[string]string // canonical name → value ("" for booleans)
}

// Parse parses args for t: flags may come before or after the positional
// arguments, `--` ends flags (every later word is positional), a value flag
// takes the next word or `--name=value`. Only a word spelled like a flag
// (flagName: `-x`, `--name`, `--name=value`) is taken for one; `-`, `-1`,
// `- item` or a multi-line text starting with a dash is positional. An
// unknown flag, a missing value or a wrong number of positional arguments
// is an error that names the problem.
func Parse(t *Tool, args []string) (*Args, error) {
	a := &Args{flags: map[string]string{}}
	byName := map[string]Flag{}
	for _, f := range t.Flags {
		byName[f.Name] = f
		if f.Alias != "" {
			byName[f.Alias] = f
		}
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w == "--" {
			a.Pos = append(a.Pos, args[i+1:]...)
			break
		}
		name, val, hasVal := strings.Cut(w, "=")
		if !flagName(name) {
			// "-", "-1", "- item", "--- a/x": text, not a flag (write and
			// edit take file text that often starts with a dash)
			a.Pos = append(a.Pos, w)
			continue
		}
		f, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("unknown flag %s (put -- before an argument that starts with -)", name)
		}
		switch {
		case f.Value && hasVal:
		case f.Value:
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag %s needs a value", name)
			}
			i++
			val = args[i]
		case hasVal:
			return nil, fmt.Errorf("flag %s takes no value", name)
		}
		if _, dup := a.flags[f.Name]; dup {
			return nil, fmt.Errorf("flag %s given twice", f.Name)
		}
		a.flags[f.Name] = val
	}
	switch {
	case len(a.Pos) < t.Min && t.Min == t.Max:
		return nil, fmt.Errorf("needs %d argument(s), got %d", t.Min, len(a.Pos))
	case len(a.Pos) < t.Min:
		return nil, fmt.Errorf("needs at least %d argument(s), got %d", t.Min, len(a.Pos))
	case len(a.Pos) > t.Max:
		return nil, fmt.Errorf("takes at most %d argument(s), got %d: %s", t.Max, len(a.Pos), quoteWords(a.Pos))
	}
	return a, nil
}

// flagName reports whether w is spelled like a flag: one or two dashes,
// then a letter, then letters, digits, '-' or '_'. Anything else that starts
// with a dash is a positional argument.
func flagName(w string) bool {
	switch {
	case strings.HasPrefix(w, "--"):
		w = w[2:]
	case strings.HasPrefix(w, "-"):
		w = w[1:]
	default:
		return false
	}
	if w == "" || !('a' <= w[0] && w[0] <= 'z' || 'A' <= w[0] && w[0] <= 'Z') {
		return false
	}
	for i := 1; i < len(w); i++ {
		c := w[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func quoteWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, " ")
}

// Has reports whether the flag (canonical name) was given.
func (a *Args) Has(name string) bool { _, ok := a.flags[name]; return ok }

// Arg is positional argument i, or def when absent.
func (a *Args) Arg(i int, def string) string {
	if i < len(a.Pos) {
		return a.Pos[i]
	}
	return def
}

// String is the value of a value flag, or def.
func (a *Args) String(name, def string) string {
	if v, ok := a.flags[name]; ok {
		return v
	}
	return def
}

// Int is the value of an integer flag within [lo, hi], or def when absent.
func (a *Args) Int(name string, def, lo, hi int) (int, error) {
	v, ok := a.flags[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("flag %s: %q is not a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// Seconds is a duration flag given in seconds (a decimal number, or a Go
// duration like 90s or 2m), within (0, max], or def when absent.
func (a *Args) Seconds(name string, def, max time.Duration) (time.Duration, error) {
	v, ok := a.flags[name]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return 0, fmt.Errorf("flag %s: %q is not a number of seconds", name, v)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d <= 0 || d > max {
		return 0, fmt.Errorf("flag %s: %q is not from 0 to %s", name, v, max)
	}
	return d, nil
}
