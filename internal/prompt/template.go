package prompt

import (
	"strings"

	"github.com/cortexfs/ctx/ipc"
)

// The prompt template: its variables, parsing, rendering, and the history
// rendered inline.

var knownVars = map[string]bool{
	"system": true, "rules": true, "skills": true, "tools": true,
	"history": true, "time": true, "input": true,
}

type part struct {
	lit string
	v   string // variable name; "" for a literal
}

// parseTemplate splits t into literals and known variables.
func parseTemplate(t string) (parts []part, unknown []string) {
	seen := map[string]bool{}
	for {
		i := strings.Index(t, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(t[i+2:], "}}")
		if j < 0 {
			break
		}
		name := t[i+2 : i+2+j]
		if !knownVars[name] {
			if !seen[name] && len(name) < 64 && !strings.ContainsAny(name, "{}\n") {
				seen[name] = true
				unknown = append(unknown, name)
			}
			parts = append(parts, part{lit: t[:i+2]})
			t = t[i+2:]
			continue
		}
		if i > 0 {
			parts = append(parts, part{lit: t[:i]})
		}
		parts = append(parts, part{v: name})
		t = t[i+2+j+2:]
	}
	if t != "" {
		parts = append(parts, part{lit: t})
	}
	return parts, unknown
}

func render(parts []part, vals map[string]string) string {
	var b strings.Builder
	for _, p := range parts {
		if p.v == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(vals[p.v])
		}
	}
	return b.String()
}

// withContract appends the contract after the rendered template (spec: R3).
func withContract(rendered string) string {
	rendered = strings.TrimRight(rendered, "\n")
	if strings.TrimSpace(rendered) == "" {
		return Contract
	}
	return rendered + "\n\n" + Contract
}

// historyBlock is one message of an inlined history; an image shows as
// its reference line (an inlined history is text: its images are not sent).
func historyBlock(m Message) string {
	if len(m.Images) > 0 {
		return "[" + m.Role + "]\n" + m.Content + "\n" + ipc.ImageLines(m.Images)
	}
	return "[" + m.Role + "]\n" + m.Content
}

func renderHistory(h []Message) string {
	blocks := make([]string, len(h))
	for i, m := range h {
		blocks[i] = historyBlock(m)
	}
	return strings.Join(blocks, "\n\n")
}
