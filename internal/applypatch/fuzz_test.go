package applypatch

import (
	"bytes"
	"testing"
)

// FuzzParse: Parse never panics on any text, and applying what it parsed
// to any content never panics; the result keeps the content's CRLF line
// endings and (where bytes can tell) its missing final newline.
func FuzzParse(f *testing.F) {
	seeds := []struct{ patch, content string }{
		{"*** Begin Patch\n*** Add File: a\n+x\n*** End Patch", ""},
		{"*** Begin Patch\n*** Update File: f\n@@\n foo\n-bar\n+baz\n*** End Patch\n", "foo\nbar\n"},
		{"*** Begin Patch\n*** Update File: f\n*** Move to: g\n@@ def f():\n-    pass\n+    return 1\n*** End of File\n*** End Patch", "def f():\n    pass"},
		{"*** Begin Patch\n*** Update File: f\n@@\n a\n+b\n@@\n-c\n \n*** Delete File: g\n*** End Patch", "a\r\nc\r\n"},
		{"<<'EOF'\n*** Begin Patch\n*** Delete File: f\n*** End Patch\nEOF", "x"},
		{" *** Begin Patch \r\n*** Update File: f\r\n x\r\n+y\r\n*** End Patch", "x \u2013 y\n"},
		{"*** Begin Patch\n*** Update File: f\n@@\n*** End of File\n*** End Patch", ""},
		{"*** Begin Patch\n*** Update File: f\n@@ -1,3 +1,3 @@\n-a\n*** End Patch", "a\n"},
		{"*** Begin Patch\n*** Update File:0\n+\n*** End Patch", "0"},
	}
	for _, s := range seeds {
		f.Add(s.patch, []byte(s.content))
	}
	f.Fuzz(func(t *testing.T, patch string, content []byte) {
		p, err := Parse(patch)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T %v is not a *ParseError", err, err)
			}
			return
		}
		if len(p.Hunks) == 0 {
			t.Fatal("Parse succeeded without hunks")
		}
		files := constFiles(content)
		if _, err := Apply(p, files); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
		crlfOnly := bytes.Contains(content, []byte("\r\n")) && bytes.Count(content, []byte("\n")) == bytes.Count(content, []byte("\r\n"))
		// A result ending in an empty line looks like one with a final
		// newline: check only content and chunks without empty lines.
		noFinal := len(content) > 0 && content[len(content)-1] != '\n' && !hasEmptyLine(content)
		for _, h := range p.Hunks {
			got, err := ApplyChunks(content, h.Chunks)
			if err != nil {
				continue
			}
			if crlfOnly && bytes.Count(got, []byte("\n")) != bytes.Count(got, []byte("\r\n")) {
				t.Fatalf("CRLF content %q became %q", content, got)
			}
			if noFinal && !hasEmptyText(h.Chunks) && len(got) > 0 && got[len(got)-1] == '\n' {
				t.Fatalf("content %q without a final newline became %q", content, got)
			}
		}
	})
}

func hasEmptyLine(b []byte) bool {
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSuffix(l, []byte("\r"))) == 0 {
			return true
		}
	}
	return false
}

func hasEmptyText(chunks []Chunk) bool {
	for _, c := range chunks {
		for _, l := range c.Lines {
			if l.Text == "" {
				return true
			}
		}
	}
	return false
}

// constFiles answers every name with the same content.
type constFiles []byte

func (c constFiles) ReadFile(string) ([]byte, error) { return c, nil }
