package prompt

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFrontMatter(t *testing.T) {
	cases := []struct {
		in   string
		want map[string]string
	}{
		{"---\nname: pdf\ndescription: Read PDFs.\n---\nbody", map[string]string{"name": "pdf", "description": "Read PDFs."}},
		{"\uFEFF---\r\nname: a\r\n---\r\n", map[string]string{"name": "a"}},
		{"---\nname: 'it''s'\ndescription: \"say \\\"hi\\\"\\n\\u00e9\"\n---\n", map[string]string{"name": "it's", "description": "say \"hi\"\né"}},
		{"---\nname: a # comment\ndescription: one\n  two\n  three\n...\n", map[string]string{"name": "a", "description": "one two three"}},
		{"---\ndescription: >\n  folded\n  text\n\n  para\nname: b\n---\n", map[string]string{"description": "folded text\npara", "name": "b"}},
		{"---\ndescription: |-\n  line1\n  line2\n---\n", map[string]string{"description": "line1\nline2"}},
		{"---\nmetadata:\n  author: x\n  version: 1\nallowed-tools:\n  - Bash\nname: c\n---\n", map[string]string{"name": "c"}},
		{"---\ndescription:\n  on the next line\n---\n", map[string]string{"description": "on the next line"}},
		{"---\n# only a comment\n\n---\n", map[string]string{}},
		{"---\nname: \"multi\n  line quoted\"\n---\n", map[string]string{"name": "multi line quoted"}},
		{"---\ntags: [a, b]\n---\n", map[string]string{"tags": "[a, b]"}},
	}
	for _, c := range cases {
		got, err := ParseFrontMatter(strings.NewReader(c.in))
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%q: got %q want %q", c.in, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%q: %s = %q, want %q", c.in, k, got[k], v)
			}
		}
	}
	bad := []string{
		"", "name: a\n", "--- \nname: a\n", // no closing
		"---\nname: a\n", "---\nname: a\nname: b\n---\n", "---\njust text\n---\n",
		"---\nname: \"open\n---\n", "---\nname: 'x' y\n---\n", "---\n- item\n---\n",
		"---\nname:a\n---\n", "---\nname: \"\\q\"\n---\n",
		"---\n" + strings.Repeat("k: v\n", FrontMatterMax/4) + "---\n",
	}
	for _, in := range bad {
		if got, err := ParseFrontMatter(strings.NewReader(in)); err == nil || !errors.Is(err, ErrFrontMatter) {
			t.Errorf("%q: want ErrFrontMatter, got %v %v", in, got, err)
		}
	}
}

// countReader counts bytes handed out.
type countReader struct {
	r *strings.Reader
	n int
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}

// spec: R2 — the body after the closing --- is never read.
func TestFrontMatterBoundedRead(t *testing.T) {
	body := strings.Repeat("body line that must never be read\n", 100000)
	cr := &countReader{r: strings.NewReader(skillMD("x", "y", body))}
	if _, err := ParseFrontMatter(cr); err != nil {
		t.Fatal(err)
	}
	if cr.n > 1024 {
		t.Errorf("read %d bytes for a 40-byte front matter", cr.n)
	}
	cr = &countReader{r: strings.NewReader("---\n" + body)} // never closes
	if _, err := ParseFrontMatter(cr); err == nil || cr.n > FrontMatterMax {
		t.Errorf("unclosed: err %v, read %d", err, cr.n)
	}
}

func FuzzParseFrontMatter(f *testing.F) {
	for _, s := range []string{
		"---\nname: a\ndescription: b\n---\n",
		"---\nname: 'a''b'\ndescription: \"x\\ny\"\n---\nbody",
		"---\ndescription: >-\n  a\n  b\n\n  c\n---\n",
		"---\nmetadata:\n  k: v\n  - l\n---\n",
		"---\nname: \"\\u00e9\n  x\"\n...\n",
		"---\r\nk:\r\n---\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cr := &countReader{r: strings.NewReader(string(b))}
		m, err := ParseFrontMatter(cr)
		if cr.n > FrontMatterMax {
			t.Fatalf("read %d bytes", cr.n)
		}
		if err != nil {
			if !errors.Is(err, ErrFrontMatter) {
				t.Fatalf("error class: %v", err)
			}
			return
		}
		for k, v := range m {
			if len(k)+len(v) > 4*FrontMatterMax {
				t.Fatalf("value larger than input: %q", k)
			}
		}
	})
}
