package prompt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FrontMatterMax bounds how much of a SKILL.md is ever read for its metadata:
// the front matter must close within it (spec: R2 — never the full body).
const FrontMatterMax = 8 << 10

// ErrFrontMatter is wrapped by every front-matter syntax error.
var ErrFrontMatter = errors.New("bad front matter")

// ParseFrontMatter reads the YAML front matter at the start of r — a `---`
// line, then lines up to the closing `---` (or `...`) line — and returns its
// top-level scalar keys. It reads at most FrontMatterMax bytes and stops at the
// closing line; the document body is never read (spec: R2).
//
// The YAML subset: `key: value` lines; values plain, 'single-quoted' (” is a
// quote), "double-quoted" (\" \\ \n \t \r \/ \uXXXX), or block scalars `|` /
// `>` (with optional -/+ chomping) over the following indented lines; plain
// and quoted values continue onto indented lines (folded with spaces);
// `#` comments; indented lines under a key with no value (nested maps, lists)
// are skipped. Duplicate keys are an error, as in YAML.
func ParseFrontMatter(r io.Reader) (map[string]string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, FrontMatterMax), 512)
	var lines []string
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("front matter: %w", err)
		}
		complete := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if first {
			line = strings.TrimPrefix(line, "\uFEFF")
			if strings.TrimRight(line, " \t") != "---" || !complete {
				return nil, fmt.Errorf("front matter: first line is not ---: %w", ErrFrontMatter)
			}
			first = false
			continue
		}
		if t := strings.TrimRight(line, " \t"); complete || err == io.EOF {
			if t == "---" || t == "..." {
				return parseYAMLSubset(lines)
			}
		}
		if err == io.EOF || !complete {
			return nil, fmt.Errorf("front matter: no closing --- within %d bytes: %w", FrontMatterMax, ErrFrontMatter)
		}
		lines = append(lines, line)
	}
}

func indented(l string) bool { return l != "" && (l[0] == ' ' || l[0] == '\t') }

func blank(l string) bool { return strings.TrimSpace(l) == "" }

func parseYAMLSubset(lines []string) (map[string]string, error) {
	out := map[string]string{}
	bad := func(i int, msg string) error {
		return fmt.Errorf("front matter line %d: %s: %w", i+2, msg, ErrFrontMatter)
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if blank(l) || strings.HasPrefix(strings.TrimSpace(l), "#") || indented(l) {
			continue // blank, comment, or under a key we do not model
		}
		if strings.HasPrefix(l, "- ") || l == "-" {
			return nil, bad(i, "top-level list")
		}
		key, rest, ok := strings.Cut(l, ":")
		if !ok || key == "" || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			return nil, bad(i, "want key: value")
		}
		if strings.ContainsAny(key, " \t\"'{}[]") {
			return nil, bad(i, "unsupported key")
		}
		if _, dup := out[key]; dup {
			return nil, bad(i, fmt.Sprintf("duplicate key %q", key))
		}
		v := strings.TrimSpace(rest)
		// Continuation lines: the indented (or blank) lines that follow.
		j := i + 1
		for j < len(lines) && (indented(lines[j]) || blank(lines[j])) {
			j++
		}
		for j > i+1 && blank(lines[j-1]) {
			j-- // trailing blank lines belong to nobody
		}
		cont := lines[i+1 : j]
		i = j - 1
		var val string
		var err error
		switch {
		case v == "":
			// A nested map/list, or a plain scalar starting on the next line.
			if len(cont) > 0 && looksNested(cont[0]) {
				continue
			}
			val = foldPlain(cont)
		case v[0] == '|' || v[0] == '>':
			if strings.Trim(v[1:], "+-") != "" && !strings.HasPrefix(strings.TrimSpace(strings.Trim(v[1:], "+-")), "#") {
				return nil, bad(i, "unsupported block scalar header")
			}
			val = blockScalar(cont, v[0] == '>', strings.Contains(v, "+"))
		case v[0] == '"' || v[0] == '\'':
			val, err = quoted(v, cont)
			if err != nil {
				return nil, bad(i, err.Error())
			}
		case v[0] == '[' || v[0] == '{' || v[0] == '&' || v[0] == '*' || v[0] == '!':
			// Flow collections, anchors, aliases, tags: kept as raw text.
			val = strings.TrimSpace(stripComment(v) + " " + foldPlain(cont))
		default:
			val = strings.TrimSpace(stripComment(v) + " " + foldPlain(cont))
		}
		out[key] = val
	}
	return out, nil
}

func looksNested(l string) bool {
	t := strings.TrimSpace(l)
	if strings.HasPrefix(t, "- ") || t == "-" {
		return true
	}
	k, _, ok := strings.Cut(t, ": ")
	return (ok || strings.HasSuffix(t, ":")) && !strings.ContainsAny(k, " \t")
}

func stripComment(v string) string {
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	if i := strings.Index(v, "\t#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// foldPlain joins continuation lines of a plain scalar: lines fold into
// spaces, a blank line is a newline.
func foldPlain(cont []string) string {
	var b strings.Builder
	for _, l := range cont {
		t := strings.TrimSpace(l)
		if t == "" {
			b.WriteByte('\n')
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte(' ')
		}
		b.WriteString(stripComment(t))
	}
	return strings.TrimSpace(b.String())
}

func blockScalar(cont []string, folded, keep bool) string {
	indent := -1
	for _, l := range cont {
		if !blank(l) {
			indent = len(l) - len(strings.TrimLeft(l, " \t"))
			break
		}
	}
	var parts []string
	for _, l := range cont {
		if blank(l) {
			parts = append(parts, "")
			continue
		}
		if len(l) >= indent && indent >= 0 {
			l = l[indent:]
		} else {
			l = strings.TrimLeft(l, " \t")
		}
		parts = append(parts, l)
	}
	var s string
	if folded {
		var b strings.Builder
		for i, p := range parts {
			switch {
			case p == "":
				b.WriteByte('\n')
			case i > 0 && parts[i-1] != "":
				b.WriteByte(' ')
				b.WriteString(p)
			default:
				b.WriteString(p)
			}
		}
		s = b.String()
	} else {
		s = strings.Join(parts, "\n")
	}
	if keep {
		return s + "\n"
	}
	return strings.TrimRight(s, "\n")
}

// quoted parses a single- or double-quoted scalar that starts v and may
// continue over cont (folded with spaces).
func quoted(v string, cont []string) (string, error) {
	text := v
	for _, l := range cont {
		t := strings.TrimSpace(l)
		if t == "" {
			text += "\n"
		} else {
			text += " " + t
		}
	}
	q := text[0]
	var b strings.Builder
	i := 1
	for ; i < len(text); i++ {
		c := text[i]
		if q == '\'' {
			if c == '\'' {
				if i+1 < len(text) && text[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(c)
			continue
		}
		switch c {
		case '"':
			goto done
		case '\\':
			if i+1 >= len(text) {
				return "", errors.New("dangling backslash")
			}
			i++
			switch e := text[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\', '/', ' ':
				b.WriteByte(e)
			case '0':
				b.WriteByte(0)
			case 'u':
				if i+4 >= len(text) {
					return "", errors.New("short \\u escape")
				}
				n, err := strconv.ParseUint(text[i+1:i+5], 16, 32)
				if err != nil {
					return "", errors.New("bad \\u escape")
				}
				b.WriteRune(rune(n))
				i += 4
			default:
				return "", fmt.Errorf("unsupported escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
done:
	if i >= len(text) {
		return "", errors.New("unterminated quoted string")
	}
	if rest := strings.TrimSpace(text[i+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
		return "", errors.New("text after closing quote")
	}
	return b.String(), nil
}
