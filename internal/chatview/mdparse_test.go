package chatview

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// visible renders md at width 60 with each style written as a tag
// ({b}…{/bf}, {i}, {u}, {c} code, {h} heading, {f} faint), margins kept.
func visible(md string) string {
	m, _ := NewMarkdown(60)
	r := strings.NewReplacer(
		"\x1b[1;35m", "{h}", "\x1b[22;39m", "{/h}",
		"\x1b[1m", "{b}", "\x1b[22m", "{/bf}",
		"\x1b[3m", "{i}", "\x1b[23m", "{/i}",
		"\x1b[4m", "{u}", "\x1b[24m", "{/u}",
		"\x1b[36m", "{c}", "\x1b[39m", "{/c}",
		"\x1b[2m", "{f}", "\x1b[m", "{/}")
	// Bold and faint share their "off" (22): {/bf}.
	return r.Replace(m.Render(md))
}

// TestMarkdownParse: the blocks and inlines assistants write, rendered
// as CommonMark reads them (the styles shown as tags).
func TestMarkdownParse(t *testing.T) {
	for _, tc := range []struct{ name, md, want string }{
		{"paragraph joined", "one\ntwo", "  one two"},
		{"hard break", "one  \ntwo\\\nthree", "  one\n  two\n  three"},
		{"atx", "## Title ##", "  {h}Title{/h}"},
		{"atx needs a space", "#5 is not", "  #5 is not"},
		{"setext", "Title\n===\n\nSub\n---", "  {h}Title{/h}\n\n  {h}Sub{/h}"},
		{"rule", "a\n\n***\n\nb", "  a\n\n  {f}" + strings.Repeat("─", 40) + "{/bf}\n\n  b"},
		{"strong and em", "**bold** and *it* and __b__ and _i_", "  {b}bold{/bf} and {i}it{/i} and {b}b{/bf} and {i}i{/i}"},
		{"nested", "***both*** and **a *b* c**", "  {i}{b}both{/bf}{/i} and {b}a {i}b{/i} c{/bf}"},
		{"intraword underscore", "snake_case_name and 2*3*4", "  snake_case_name and 2{i}3{/i}4"},
		{"unmatched", "a * b ** c _d", "  a * b ** c _d"},
		{"rule of three", "*a**b*", "  {i}a**b{/i}"},
		{"code span", "use `a*b*` and ``x`y``", "  use {c}a*b*{/c} and {c}x`y{/c}"},
		{"code span unclosed", "a `b", "  a `b"},
		{"escapes", `\*not\* \_no\_ \# \[x\]`, "  *not* _no_ # [x]"},
		{"link", "see [the **docs**](https://x.example/a_(b) \"T\")", "  see {u}the {b}docs{/bf}{/u} {f}https://x.example/a_(b){/bf}"},
		{"link same as text", "[https://x.example](https://x.example)", "  {u}https://x.example{/u}"},
		{"not a link", "[a] (b) and [c](d", "  [a] (b) and [c](d"},
		{"image", "![a cat](cat.png)", "  {f}[image: a cat] cat.png{/bf}"},
		{"autolink", "<https://x.example/?q=1> <me@x.example> a < b > c <br>", "  {u}https://x.example/?q=1{/u} {u}me@x.example{/u} a < b > c <br>"},
		{"entities", "&amp; &lt;x&gt; &copy; &#65; &#x42; &#27; &bogus; & alone", "  & <x> © A B &#27; &bogus; & alone"},
		{"fenced", "```go\nx := 1\n\n\ty := 2\n```\nafter", "    {c}x := 1{/c}\n\n    {c}    y := 2{/c}\n\n  after"},
		{"fence unclosed", "~~~\ncode", "    {c}code{/c}"},
		{"indented code", "para\n\n    code\n      more", "  para\n\n    {c}code{/c}\n    {c}  more{/c}"},
		{"quote", "> a\nlazy\n> > b", "  {f}│{/bf} a lazy\n  {f}│{/bf}\n  {f}│{/bf} {f}│{/bf} b"},
		{"tight list", "- a\n- b\n  more\n* other", "  • a\n  • b more\n\n  • other"},
		{"loose list", "1. one\n\n2. two", "  1. one\n\n  2. two"},
		{"ordered start", "3) three\n4) four", "  3. three\n  4. four"},
		{"nested list", "- a\n  - b\n    - c\n- d", "  • a\n    • b\n      • c\n  • d"},
		{"tabs", "-\ta\n\t-\tb\n1.\tc", "  • a\n    • b\n\n  1. c"},
		{"item with code", "1. run:\n\n   ```sh\n   make\n   ```\n2. done", "  1. run:\n\n       {c}make{/c}\n\n  2. done"},
		{"list after paragraph", "text\n- a\n- b", "  text\n\n  • a\n  • b"},
		{"ordered 2 does not interrupt", "text\n2. b", "  text 2. b"},
		{"html block", "<details>\n<summary>x</summary>\n</details>", "  <details>\n  <summary>x</summary>\n  </details>"},
		{"table", "| a | b |\n|---|---|\n| 1 | 2 |", "  | a | b |\n  |---|---|\n  | 1 | 2 |"},
		{"heading with code", "# The `x` flag", "  {h}The {c}x{/c} flag{/h}"},
	} {
		if got := visible(tc.md); got != tc.want {
			t.Errorf("%s: %q\n got %q\nwant %q", tc.name, tc.md, got, tc.want)
		}
	}
}

// TestMarkdownDeep: nesting beyond the bound and long runs of markers
// render (as text below the bound) without recursion or delay.
func TestMarkdownDeep(t *testing.T) {
	for _, md := range []string{
		strings.Repeat(">", 5000) + " deep",
		strings.Repeat("- ", 3000) + "deep",
		strings.Repeat("*a", 20000) + strings.Repeat("b*", 20000),
		strings.Repeat("[", 20000) + "x" + strings.Repeat("](y)", 20000),
		"a " + strings.Repeat("`", 5000) + "x",
		strings.Repeat("_a_ ", 20000),
	} {
		if out := visible(md); !strings.Contains(out, "deep") && !strings.Contains(out, "x") && !strings.Contains(out, "a") {
			t.Errorf("%.20q…: %.80q", md, out)
		}
	}
}

var sgrOnly = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// FuzzMarkdownRender: any text renders without panic, and the only
// control characters in the result are newlines, tabs, and the renderer's
// own SGR sequences — an agent's text never drives the terminal.
func FuzzMarkdownRender(f *testing.F) {
	for _, s := range []string{
		"# T\n\npara **b** *i* `c` [l](u) ![i](u) <https://x>\n\n- a\n  - b\n\n1. x\n\n> q\n\n```\ncode\n```\n\n---\n| a |\n| b |",
		"a\x1b]0;x\x07b &#27; &#x9b; \\\x1b", "***a**b*c*", "[a [b](c) d](e)", "> - > 1. ```\n>  x", "\t- a\n\t\t- b",
		"_a*b_c*", "**", "`` ` ``", "<a@b.c>", "&#1114111; &#xD800;",
	} {
		f.Add(s)
	}
	m, _ := NewMarkdown(40)
	f.Fuzz(func(t *testing.T, md string) {
		out := sgrOnly.ReplaceAllString(m.Render(md), "")
		for _, r := range out {
			if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
				t.Fatalf("control character %U in %q (from %q)", r, out, md)
			}
		}
	})
}
