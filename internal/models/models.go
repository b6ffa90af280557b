// Package models knows the context-window limits of model candidates: a
// built-in table embedded from limits.tsv, extended or overridden by the
// user's $CTX_ROOT/models.tsv (runtime.md W4–W6, interfaces.md "Model agents").
package models

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

//go:embed limits.tsv
var builtinTSV []byte

// UserFile is the name of the user's table inside CTX_ROOT.
const UserFile = "models.tsv"

// maxUserFile bounds how much of $CTX_ROOT/models.tsv is read.
const maxUserFile = 1 << 20

// ErrMalformed is wrapped by every table or model-file syntax error.
var ErrMalformed = errors.New("malformed")

// ErrBadModel is wrapped by every invalid model name.
var ErrBadModel = errors.New("invalid model name")

// Entry is one known limit.
type Entry struct {
	Model  string // provider/model
	Tokens uint32 // context window in tokens, > 0
	Source string // public URL the number comes from (may be empty in the user file)
}

// Table maps model names to known limits. The zero Table knows nothing.
// A Table is immutable once built and safe for concurrent use.
type Table struct {
	m map[string]Entry
}

// Limit returns the model's context window in tokens; ok is false when the
// model is unknown (spec: W4 — anything not listed is unknown).
func (t Table) Limit(model string) (tokens uint32, ok bool) {
	e, ok := t.m[model]
	if !ok {
		return 0, false
	}
	return e.Tokens, true
}

// Lookup returns the whole entry, with its source.
func (t Table) Lookup(model string) (Entry, bool) {
	e, ok := t.m[model]
	return e, ok
}

// Len is the number of known models.
func (t Table) Len() int { return len(t.m) }

// builtin parses limits.tsv once; the map is never written afterwards.
var builtin = sync.OnceValue(func() map[string]Entry {
	m := map[string]Entry{}
	if err := parseInto(m, bytes.NewReader(builtinTSV), "limits.tsv", true); err != nil {
		// limits.tsv is compiled in and covered by TestBuiltin.
		panic(fmt.Sprintf("models: built-in table: %v", err))
	}
	return m
})

// Builtin is the table embedded from limits.tsv.
func Builtin() Table { return Table{m: builtin()} }

// Entries lists the table sorted by model name.
func (t Table) Entries() []Entry {
	out := make([]Entry, 0, len(t.m))
	for _, e := range t.m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// Load returns the built-in table overlaid with $ctxRoot/models.tsv when that
// file exists. A user line replaces a built-in line for the same model; the
// token value "unknown" removes a model (its limit becomes unknown). A
// malformed user file is an error naming file:line; a missing one is not.
func Load(ctxRoot string) (Table, error) {
	t := Table{m: maps.Clone(builtin())}
	if ctxRoot == "" {
		return t, nil
	}
	path := filepath.Join(ctxRoot, UserFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return Table{}, fmt.Errorf("models: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxUserFile+1))
	if err != nil {
		return Table{}, fmt.Errorf("models: read %s: %w", path, err)
	}
	if len(b) > maxUserFile {
		return Table{}, fmt.Errorf("models: %s: larger than %d bytes: %w", path, maxUserFile, ErrMalformed)
	}
	if err := parseInto(t.m, bytes.NewReader(b), path, false); err != nil {
		return Table{}, fmt.Errorf("models: %w", err)
	}
	return t, nil
}

// Parse reads a table in the limits.tsv format (see that file's header). name
// is used in error messages ("name:line: ..."). It is what Load applies to the
// user file, exported for tests and tools.
func Parse(r io.Reader, name string) (Table, error) {
	t := Table{m: map[string]Entry{}}
	if err := parseInto(t.m, r, name, false); err != nil {
		return Table{}, err
	}
	return t, nil
}

func parseInto(m map[string]Entry, r io.Reader, name string, builtin bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	seen := map[string]bool{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimLeft(text, " \t"), "#") {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s: %w", name, line, fmt.Sprintf(format, a...), ErrMalformed)
		}
		cols := strings.Split(text, "\t")
		if len(cols) < 2 || len(cols) > 3 {
			return bad("want 2 or 3 TAB-separated columns (model, tokens[, source]), got %d", len(cols))
		}
		model, tok := cols[0], cols[1]
		src := ""
		if len(cols) == 3 {
			src = strings.TrimSpace(cols[2])
		}
		if err := CheckName(model); err != nil {
			return bad("%v", err)
		}
		if seen[model] {
			return bad("model %q listed twice", model)
		}
		seen[model] = true
		if tok == "unknown" && !builtin {
			delete(m, model)
			continue
		}
		n, err := parseTokens(tok)
		if err != nil {
			return bad("tokens %q: %v", tok, err)
		}
		if builtin && !strings.HasPrefix(src, "https://") {
			return bad("built-in entry %q needs an https source URL", model)
		}
		if src != "" && strings.ContainsAny(src, " \t") {
			return bad("source %q contains spaces", src)
		}
		m[model] = Entry{Model: model, Tokens: n, Source: src}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return nil
}

// parseTokens accepts a positive decimal u32 without sign or leading zero.
func parseTokens(s string) (uint32, error) {
	if s == "" || s[0] == '0' || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, errors.New("want a positive decimal number without sign or leading zero")
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, errors.New("does not fit in 32 bits")
	}
	return uint32(n), nil
}

// CheckName validates a model name: "provider/model", provider
// [a-z0-9][a-z0-9-]*, model one or more of [A-Za-z0-9._:@+/-] starting with a
// letter or digit, at most 200 bytes in all.
func CheckName(name string) error {
	provider, model, ok := strings.Cut(name, "/")
	switch {
	case !ok || provider == "" || model == "":
		return fmt.Errorf("%q: want provider/model: %w", name, ErrBadModel)
	case len(name) > 200:
		return fmt.Errorf("%q: longer than 200 bytes: %w", name[:40]+"…", ErrBadModel)
	}
	for i, r := range provider {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0) {
			return fmt.Errorf("%q: provider must match [a-z0-9][a-z0-9-]*: %w", name, ErrBadModel)
		}
	}
	for i, r := range model {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._:@+/-", r)) {
			return fmt.Errorf("%q: model must match [A-Za-z0-9][A-Za-z0-9._:@+/-]*: %w", name, ErrBadModel)
		}
	}
	return nil
}

// ParseCandidates parses the `model` control file: one provider/model per
// LF-terminated line, preferred first (spec: W6). At least one line; empty
// lines, CR, a missing final LF and duplicates are invalid.
func ParseCandidates(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("model: empty: %w", ErrMalformed)
	}
	if b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("model: last line not LF-terminated: %w", ErrMalformed)
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	seen := make(map[string]bool, len(lines))
	for i, l := range lines {
		if l == "" {
			return nil, fmt.Errorf("model: line %d: empty: %w", i+1, ErrMalformed)
		}
		if err := CheckName(l); err != nil {
			return nil, fmt.Errorf("model: line %d: %w", i+1, err)
		}
		if seen[l] {
			return nil, fmt.Errorf("model: line %d: %q listed twice: %w", i+1, l, ErrMalformed)
		}
		seen[l] = true
	}
	return lines, nil
}
