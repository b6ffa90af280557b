// Package stdtool is ctx's standard toolset: bash, read, write,
// edit, apply_patch, grep, glob, ls and fetch. One multi-call binary
// (cmd/ctxtools) holds them all; `ctx init` installs it as the tool objects
// CTX_ROOT/tool/<name> (hard links of one file) with a <name>.d/tool.json
// written from each tool's Meta. Each tool is an ordinary ctx tool: found on
// CTX_PATH, checked by every authority layer, run in the sandbox with the
// call's args as its argv. A tool knows nothing of authority: what it can
// touch is what the sandbox view shows.
//
// Conventions every tool keeps (README "Tools"):
//   - paths are paths inside the sandbox view, relative ones to the cwd;
//   - the result is written to stdout, valid UTF-8, at most Budget bytes,
//     and says what was cut and how to get the rest;
//   - exit status 0 on success, 1 when the tool refused or failed, with the
//     reason (also on stdout, so the model reads it in the result).
package stdtool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Budget is what a tool writes at most: under the 16 KiB tool-result cut
// (envelope.MaxContent) with room for the note saying what was cut.
const Budget = 15 << 10

// ProvidedBy marks the tool.json of a tool ctx installed: `ctx init`
// replaces only those, never a user's own tool of the same name.
const ProvidedBy = "ctx"

// Meta is what tool.json holds for a tool: the description a model reads
// (what it does, its argv, one example, its limits). It grants nothing (V2).
type Meta struct {
	Description string `json:"description"`
	ProvidedBy  string `json:"provided_by"`
}

// Flag is a flag a tool accepts. Value flags take the next word (or
// `--name=value`); the others are booleans.
type Flag struct {
	Name  string // "--offset", "-i"
	Alias string // another spelling, e.g. "--files-with-matches" for "-l"
	Value bool
}

// Tool is one tool of the set.
type Tool struct {
	Name  string
	Usage string // the argv line, e.g. "read PATH [--offset N] [--limit N]"
	// Args is the number of positional arguments: at least Min, at most Max.
	Min, Max int
	Flags    []Flag
	Meta     Meta
	Run      func(ctx context.Context, a *Args, out *Output) error
}

var registry = map[string]*Tool{}

// register adds t; each tool's file calls it from init.
func register(t *Tool) {
	if _, dup := registry[t.Name]; dup {
		panic("stdtool: duplicate tool " + t.Name)
	}
	t.Meta.ProvidedBy = ProvidedBy
	registry[t.Name] = t
}

// Tools returns every tool, sorted by name.
func Tools() []*Tool {
	out := make([]*Tool, 0, len(registry))
	for _, t := range registry {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the tool called name.
func Lookup(name string) (*Tool, bool) {
	t, ok := registry[name]
	return t, ok
}

// MetaJSON is the tool.json `ctx init` writes for t.
func (t *Tool) MetaJSON() []byte {
	b, err := json.MarshalIndent(t.Meta, "", "  ")
	if err != nil {
		panic(err) // a struct of strings always marshals
	}
	return append(b, '\n')
}

// MetaList is every tool's name and tool.json as one JSON array: what
// `ctxtools --meta` prints for `ctx init` (internal/toolset).
func MetaList() []byte {
	type entry struct {
		Name string `json:"name"`
		Meta Meta   `json:"meta"`
	}
	var es []entry
	for _, t := range Tools() {
		es = append(es, entry{t.Name, t.Meta})
	}
	b, err := json.Marshal(es)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// Failure is an error the tool reports as its refusal: exit status 1 and
// the message as the result.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

// Failf makes a Failure.
func Failf(format string, args ...any) error { return &Failure{Msg: fmt.Sprintf(format, args...)} }

// Main runs the tool named name with args (argv[1:]) and returns the exit
// status: 0 success, 1 refused or failed (a bad argv too: the message gives the
// usage), 2 when this binary holds no tool of that name.
func Main(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	t, ok := Lookup(name)
	if !ok {
		names := make([]string, 0, len(registry))
		for _, t := range Tools() {
			names = append(names, t.Name)
		}
		fmt.Fprintf(stderr, "ctxtools: no tool %q (this binary is run as one of: %s)\n", name, strings.Join(names, ", "))
		return 2
	}
	a, err := Parse(t, args)
	if err != nil {
		msg := fmt.Sprintf("%s: %v\nusage: %s\n", name, err, t.Usage)
		io.WriteString(stdout, msg)
		return 1
	}
	out := NewOutput(stdout)
	err = t.Run(ctx, a, out)
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		var f *Failure
		msg := err.Error()
		if !errors.As(err, &f) {
			msg = name + ": " + msg
		}
		if !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		io.WriteString(stdout, ValidUTF8(msg))
		return 1
	}
	return 0
}
