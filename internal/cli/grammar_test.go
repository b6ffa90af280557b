package cli

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// summary is what a command node of a kong model offers: its path, flags,
// positional arguments, children and help.
func summary(n *kong.Node) string {
	var b strings.Builder
	b.WriteString(n.Path() + "|" + n.Help + "|" + n.Detail + "|")
	for _, f := range n.Flags {
		b.WriteString("--" + f.Name + "=" + f.Help + ";")
	}
	for _, p := range n.Positional {
		b.WriteString("<" + p.Name + ">" + p.Help + ";")
	}
	for _, c := range n.Children {
		b.WriteString("[" + c.Name + " " + c.Help + "]")
	}
	return b.String()
}

// TestGrammarPrunesToTheSameCommands: for every command of the CLI, the
// model kong builds from Grammar(its path) holds that command exactly as
// the whole model does (flags, arguments, children, help, hidden), and
// its help text is the same.
func TestGrammarPrunesToTheSameCommands(t *testing.T) {
	full := parser(t)
	var walk func(n *kong.Node, path []string)
	n := 0
	walk = func(node *kong.Node, path []string) {
		for _, c := range node.Children {
			p := append(append([]string{}, path...), c.Name)
			n++
			k, err := kong.New(Grammar(p), kong.Name("ctx"), kong.Exit(func(int) {}))
			if err != nil {
				t.Fatalf("%v: %v", p, err)
			}
			var got *kong.Node
			cur := k.Model.Node
			for _, w := range p {
				if len(cur.Children) != 1 && p[0] != "__complete" {
					t.Errorf("%v: %q keeps %d commands, want only %q", p, cur.Path(), len(cur.Children), w)
				}
				var next *kong.Node
				for _, cc := range cur.Children {
					if cc.Name == w {
						next = cc
					}
				}
				if next == nil {
					t.Fatalf("%v: pruned model has no %q under %q", p, w, cur.Path())
				}
				cur = next
			}
			got = cur
			if summary(got) != summary(c) || got.Hidden != c.Hidden {
				t.Errorf("%v:\n pruned %s\n whole  %s", p, summary(got), summary(c))
			}
			var ph, fh bytes.Buffer
			kp, _ := kong.New(Grammar(p), kong.Name("ctx"), kong.Exit(func(int) {}), kong.Writers(&ph, &ph))
			kf, _ := kong.New(&CLI{}, kong.Name("ctx"), kong.Exit(func(int) {}), kong.Writers(&fh, &fh))
			kp.Parse(append(append([]string{}, p...), "--help"))
			kf.Parse(append(append([]string{}, p...), "--help"))
			if ph.String() != fh.String() {
				t.Errorf("%v --help differs:\n%s\n---\n%s", p, ph.String(), fh.String())
			}
			walk(c, p)
		}
	}
	walk(full.Model.Node, nil)
	if n < 40 {
		t.Fatalf("walked %d commands; the CLI has more", n)
	}
}

// TestGrammarWholeModel: a first word that is a flag, a typo or nothing
// (or the completion, which walks the model) keeps the whole CLI (kong's own errors and suggestions); a path that
// stops at a group keeps the group's children.
func TestGrammarWholeModel(t *testing.T) {
	for _, args := range [][]string{nil, {"--help"}, {"-V"}, {"agnet", "send"}, {""}, {"__complete", "words", "--", "agent", ""}} {
		if _, ok := Grammar(args).(*CLI); !ok {
			t.Errorf("%q: pruned, want the whole CLI", args)
		}
	}
	g := Grammar([]string{"agent"})
	at, ok := reflect.TypeOf(g).Elem().FieldByName("Agent")
	if !ok || at.Type != reflect.TypeFor[AgentCmd]() {
		t.Fatalf("agent: %v", reflect.TypeOf(g).Elem())
	}
	if _, ok := reflect.TypeOf(g).Elem().FieldByName("Mcp"); ok {
		t.Fatal("agent: mcp kept")
	}
	// A pruned parse runs the same command with the same values.
	k, err := kong.New(Grammar([]string{"agent", "send", "--session", "s1", "demo", "hi", "there"}), kong.Name("ctx"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := k.Parse([]string{"agent", "send", "--session", "s1", "demo", "hi", "there"})
	if err != nil {
		t.Fatal(err)
	}
	if kctx.Command() != "agent send <name> <input>" {
		t.Fatalf("command %q", kctx.Command())
	}
	send, ok := kctx.Selected().Target.Addr().Interface().(*SendCmd)
	if !ok || send.Name != "demo" || send.Session != "s1" || strings.Join(send.Input, " ") != "hi there" {
		t.Fatalf("selected %#v", kctx.Selected().Target.Interface())
	}
}
