package mcphost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cortexfs/ctx/internal/envelope"
)

// FormatResult turns a tool result into a tool_result's status and content:
// text content as is; structured content as compact
// JSON (first, once: a text part that only repeats it is dropped); images,
// audio and binary resources summarised by type and size, never dumped;
// isError becomes status "error". The 16 KiB cut of every tool result
// applies (envelope.Normalize).
func FormatResult(r *mcp.CallToolResult) (status, content string, truncated bool) {
	var parts []string
	var structured []byte
	if r.StructuredContent != nil && !repeatsText(r) {
		// An empty object or null (a tool with no output type) says nothing.
		if data, err := json.Marshal(r.StructuredContent); err == nil && string(data) != "{}" && string(data) != "null" {
			structured = data
			parts = append(parts, string(data))
		}
	}
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			if structured != nil && sameJSON(c.Text, structured) {
				continue
			}
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s %s%s]", c.URI, orUnknown(c.MIMEType), nameOf(c.Name)))
		case *mcp.EmbeddedResource:
			res := c.Resource
			switch {
			case res == nil:
				parts = append(parts, "[resource]")
			case res.Blob != nil:
				parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes]", res.URI, orUnknown(res.MIMEType), len(res.Blob)))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s %s]\n%s", res.URI, orUnknown(res.MIMEType), res.Text))
			}
		default:
			data, _ := json.Marshal(c)
			parts = append(parts, fmt.Sprintf("[content %s]", truncate(string(data), 200)))
		}
	}
	out := strings.Join(parts, "\n")
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n" // a result ends its last line, as a tool's stdout does
	}
	return envelope.Normalize([]byte(out), nil, !r.IsError)
}

// repeatsText says whether the structured content only wraps the text
// content: an object with a single string field equal to all the text (the
// filesystem server's {"content": TEXT}). The text alone is then shown.
func repeatsText(r *mcp.CallToolResult) bool {
	m, ok := r.StructuredContent.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	var text []string
	for _, c := range r.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			return false
		}
		text = append(text, t.Text)
	}
	for _, v := range m {
		s, ok := v.(string)
		return ok && len(text) > 0 && s == strings.Join(text, "\n")
	}
	return false
}

func sameJSON(text string, compact []byte) bool {
	var b bytes.Buffer
	if json.Compact(&b, []byte(text)) != nil {
		return false
	}
	var x, y any
	if json.Unmarshal(b.Bytes(), &x) != nil || json.Unmarshal(compact, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

func orUnknown(s string) string {
	if s == "" {
		return "application/octet-stream"
	}
	return s
}

func nameOf(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
