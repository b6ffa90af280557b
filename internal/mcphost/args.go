package mcphost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// ErrBadArgs is matched by every argument error: the call is refused
// before any round trip to the server.
var ErrBadArgs = errors.New("invalid arguments")

// SplitName splits SERVER.TOOL at the first dot.
func SplitName(name string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(name, ".")
	return server, tool, ok && server != "" && tool != ""
}

// ParseArgs turns tsh call words into the arguments object: either exactly
// `--json '{…}'`, or `key=value` words whose values are typed by the
// schema's flat properties (string, number, integer, boolean; anything
// else needs --json). No words is the empty object.
func ParseArgs(words []string, schema any) (map[string]any, error) {
	if len(words) > 0 && words[0] == "--json" {
		if len(words) != 2 {
			return nil, fmt.Errorf("--json takes exactly one JSON object: %w", ErrBadArgs)
		}
		dec := json.NewDecoder(strings.NewReader(words[1]))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
			return nil, fmt.Errorf("--json: not one JSON object (%v): %w", err, ErrBadArgs)
		}
		return normalizeNumbers(m).(map[string]any), nil
	}
	props := properties(schema)
	args := map[string]any{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value words or --json '{…}': %w", w, ErrBadArgs)
		}
		if _, dup := args[k]; dup {
			return nil, fmt.Errorf("%s given twice: %w", k, ErrBadArgs)
		}
		typ := schemaType(props[k])
		switch typ {
		case "", "string":
			args[k] = v
		case "number":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: want a number: %w", k, v, ErrBadArgs)
			}
			args[k] = f
		case "integer":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: want an integer: %w", k, v, ErrBadArgs)
			}
			args[k] = n
		case "boolean":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: want true or false: %w", k, v, ErrBadArgs)
			}
			args[k] = b
		default:
			return nil, fmt.Errorf("%s is of type %s: pass the arguments with --json '{…}': %w", k, typ, ErrBadArgs)
		}
	}
	return args, nil
}

// normalizeNumbers turns json.Number into int64 when integral, else float64.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	}
	return v
}

// Validator checks arguments against one tool's input schema.
type Validator struct{ r *jsonschema.Resolved }

// NewValidator resolves a tool's input schema (as the server sent it). A
// schema that cannot be resolved gives a validator that refuses every call,
// saying why (fail closed).
func NewValidator(schema any) (*Validator, error) {
	data, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return &Validator{r: r}, nil
}

// Validate checks args (a JSON object) against the schema.
func (v *Validator) Validate(args map[string]any) error {
	// Through JSON, so numbers and nested values have the types the
	// validator expects.
	data, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("%v: %w", err, ErrBadArgs)
	}
	var inst any
	if err := json.Unmarshal(data, &inst); err != nil {
		return fmt.Errorf("%v: %w", err, ErrBadArgs)
	}
	if err := v.r.Validate(inst); err != nil {
		return fmt.Errorf("%v: %w", err, ErrBadArgs)
	}
	return nil
}

func properties(schema any) map[string]any {
	m, _ := asMap(schema)["properties"].(map[string]any)
	return m
}

func asMap(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	// A typed schema (e.g. *jsonschema.Schema): through JSON.
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

// schemaType is a property's type: its "type" (the first non-null one of a
// list), or "" when it has none.
func schemaType(p any) string {
	m, _ := p.(map[string]any)
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
	}
	if _, ok := m["enum"]; ok {
		return "string"
	}
	return ""
}

// maxCompact bounds a compact schema.
const maxCompact = 600

// CompactSchema renders an input schema in one short line for the tool
// context: `{message: string, count?: integer, mode?: "a"|"b"}` —
// optional properties marked with ?, nested objects and arrays by kind.
func CompactSchema(schema any) string {
	m := asMap(schema)
	props, _ := m["properties"].(map[string]any)
	if len(props) == 0 {
		return "{}"
	}
	required := map[string]bool{}
	if r, ok := m["required"].([]any); ok {
		for _, e := range r {
			if s, ok := e.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	var b bytes.Buffer
	b.WriteString("{")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		if !required[n] {
			b.WriteString("?")
		}
		b.WriteString(": " + kind(props[n]))
	}
	b.WriteString("}")
	s := b.String()
	if len(s) > maxCompact {
		s = s[:maxCompact-4] + " …}"
	}
	return s
}

func kind(p any) string {
	m, _ := p.(map[string]any)
	if e, ok := m["enum"].([]any); ok && len(e) > 0 && len(e) <= 8 {
		var parts []string
		for _, v := range e {
			data, _ := json.Marshal(v)
			parts = append(parts, string(data))
		}
		return strings.Join(parts, "|")
	}
	t := schemaType(p)
	switch t {
	case "array":
		if it := schemaType(m["items"]); it != "" {
			return "[" + it + "]"
		}
		return "array"
	case "":
		return "any"
	}
	return t
}
