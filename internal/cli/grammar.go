package cli

import (
	"reflect"
	"strings"
	"unicode"
)

// Grammar returns the kong model to parse args with: a pointer to a CLI,
// or — when args start with a command path — to a copy of the CLI's
// struct type that keeps, at each level of that path, the flags and
// arguments and only the named command. Kong reflects over every field
// and interpolates every help text of the model it is given; for the
// whole CLI that was a quarter of a short command's start (`ctx agent
// send` parses one command of ~50). The kept fields are the CLI's own
// (same types, tags and methods), so parsing and Run behave as with the
// whole model; help for a command (`ctx agent --help`) lists the same
// children. A first word that names no command (a flag, a typo, none)
// keeps the whole model, so kong's errors and suggestions are the same.
func Grammar(args []string) any {
	if len(args) > 0 && args[0] == "__complete" {
		return &CLI{} // completion walks the whole model
	}
	t := reflect.TypeFor[CLI]()
	if p := prune(t, args); p != t {
		return reflect.New(p).Interface()
	}
	return &CLI{}
}

// prune keeps, of struct type t, every field that is not a command and the
// command named args[0] (itself pruned by args[1:]); t itself when args[0]
// is not a command of t or t cannot be copied.
func prune(t reflect.Type, args []string) reflect.Type {
	if t.Kind() != reflect.Struct || len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return t
	}
	fields := make([]reflect.StructField, 0, t.NumField())
	found := false
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			return t // reflect.StructOf takes exported fields only
		}
		if _, cmd := f.Tag.Lookup("cmd"); !cmd {
			fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag, Anonymous: f.Anonymous})
			continue
		}
		if found || !namesCommand(f, args[0]) {
			continue
		}
		found = true
		fields = append(fields, reflect.StructField{Name: f.Name, Type: prune(f.Type, args[1:]), Tag: f.Tag})
	}
	if !found {
		return t
	}
	return reflect.StructOf(fields)
}

// namesCommand says whether word is the command field f's name (its name
// tag, else kong's dashed lower-case field name) or one of its aliases.
func namesCommand(f reflect.StructField, word string) bool {
	name := f.Tag.Get("name")
	if name == "" {
		name = dashed(f.Name)
	}
	if word == name {
		return true
	}
	for _, a := range strings.Split(f.Tag.Get("aliases"), ",") {
		if a != "" && a == word {
			return true
		}
	}
	return false
}

// dashed is kong's default command name of a field for the plain ASCII
// names the CLI uses: RmSession → rm-session (TestGrammarPrunesToTheSameCommands
// checks every command against kong's own).
func dashed(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
