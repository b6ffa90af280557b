package mcphost

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var schema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"message": map[string]any{"type": "string"},
		"a":       map[string]any{"type": "number"},
		"n":       map[string]any{"type": "integer"},
		"flag":    map[string]any{"type": "boolean"},
		"list":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"mode":    map[string]any{"enum": []any{"x", "y"}},
	},
	"required":             []any{"message"},
	"additionalProperties": false,
}

// spec: key=value words typed by the schema, --json, validation
// before any round trip.
func TestArgs(t *testing.T) {
	v, err := NewValidator(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		words []string
		ok    bool
	}{
		{[]string{"message=hi"}, true},
		{[]string{"message=hi", "a=1.5", "n=3", "flag=true", "mode=x"}, true},
		{[]string{"--json", `{"message":"hi","list":["a","b"]}`}, true},
		{[]string{}, false},                                 // required missing
		{[]string{"message=hi", "a=x"}, false},              // not a number
		{[]string{"message=hi", "n=1.5"}, false},            // not an integer
		{[]string{"message=hi", "list=a"}, false},           // needs --json
		{[]string{"message=hi", "extra=1"}, false},          // additionalProperties
		{[]string{"message=hi", "mode=z"}, false},           // enum
		{[]string{"message"}, false},                        // not key=value
		{[]string{"--json", `[1]`}, false},                  // not an object
		{[]string{"--json", `{"message":1}`}, false},        // wrong type
		{[]string{"--json", `{"message":"a"}`, "x"}, false}, // extra word
	} {
		args, err := ParseArgs(c.words, schema)
		if err == nil {
			err = v.Validate(args)
		}
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.words, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrBadArgs) {
			t.Errorf("%q: %v is not ErrBadArgs", c.words, err)
		}
	}
	if got := CompactSchema(schema); got != `{message: string, a?: number, flag?: boolean, list?: [string], mode?: "x"|"y", n?: integer}` {
		t.Errorf("compact schema %s", got)
	}
}

func TestFormatResult(t *testing.T) {
	st, content, _ := FormatResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"},
		&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 95)}}})
	if st != "ok" || content != "hello\n[image image/png, 95 bytes]\n" {
		t.Errorf("%s %q", st, content)
	}
	st, content, _ = FormatResult(&mcp.CallToolResult{StructuredContent: map[string]any{"b": 1, "a": "x"},
		Content: []mcp.Content{&mcp.TextContent{Text: "{\n \"a\": \"x\", \"b\": 1}"}}})
	if st != "ok" || content != `{"a":"x","b":1}`+"\n" {
		t.Errorf("structured: %s %q", st, content)
	}
	st, content, _ = FormatResult(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}})
	if st != "error" || content != "boom\n" {
		t.Errorf("isError: %s %q", st, content)
	}
	st, content, trunc := FormatResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 1<<20)}}})
	if st != "ok" || !trunc || len(content) != 16<<10 {
		t.Errorf("cut: %s %d %v", st, len(content), trunc)
	}
	_, content, _ = FormatResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "x://b", MIMEType: "application/pdf", Blob: make([]byte, 10)}}}})
	if content != "[resource x://b application/pdf, 10 bytes]\n" {
		t.Errorf("blob: %q", content)
	}
}

func TestFormatResultWrappedText(t *testing.T) {
	_, content, _ := FormatResult(&mcp.CallToolResult{StructuredContent: map[string]any{"content": "hello\n"},
		Content: []mcp.Content{&mcp.TextContent{Text: "hello\n"}}})
	if content != "hello\n" {
		t.Errorf("%q", content)
	}
}
