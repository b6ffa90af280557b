package applypatch

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// update parses a patch of one Update hunk of body and returns its chunks.
func update(t *testing.T, body string) []Chunk {
	t.Helper()
	p, err := Parse("*** Begin Patch\n*** Update File: f\n" + body + "\n*** End Patch")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p.Hunks[0].Chunks
}

// spec: chunks are located as Codex's seek_sequence does and
// the file keeps its line endings and its missing final newline.
func TestApplyChunks(t *testing.T) {
	tests := []struct {
		name    string
		content string
		body    string
		want    string
		err     string
	}{
		{name: "replace", content: "foo\nbar\nbaz\n", body: "@@\n foo\n-bar\n+BAR\n baz", want: "foo\nBAR\nbaz\n"},
		{name: "delete only", content: "a\nb\nc\n", body: "@@\n a\n-b\n c", want: "a\nc\n"},
		{name: "several chunks", content: "a\nb\nc\nd\ne\nf\n", body: "@@\n a\n-b\n+B\n@@\n d\n-e\n+E\n@@\n f\n+g\n*** End of File", want: "a\nB\nc\nd\nE\nf\ng\n"},
		{name: "CRLF file stays CRLF", content: "one\r\ntwo\r\nthree\r\n", body: "@@\n one\n-two\n+TWO\n+2.5\n three", want: "one\r\nTWO\r\n2.5\r\nthree\r\n"},
		{name: "mixed endings: kept lines keep theirs", content: "a\r\nb\nc\r\n", body: "@@\n a\n b\n-c\n+C", want: "a\r\nb\nC\r\n"},
		{name: "no final newline stays so", content: "a\nb", body: "@@\n a\n-b\n+B", want: "a\nB"},
		{name: "append after a last line without newline", content: "a\nb", body: "@@\n b\n+c\n*** End of File", want: "a\nb\nc"},
		{name: "CRLF without final newline", content: "a\r\nb", body: "@@\n-b\n+B\n+C", want: "a\r\nB\r\nC"},
		{name: "trailing whitespace ignored, file's bytes kept", content: "x  \ny\n", body: "@@\n x\n-y\n+Y", want: "x  \nY\n"},
		{name: "indentation ignored on the third pass", content: "\tif x {\n\t\treturn\n\t}\n", body: "@@\n if x {\n-    return\n+\t\treturn nil\n }", want: "\tif x {\n\t\treturn nil\n\t}\n"},
		{name: "typographic dash matches ASCII", content: "a \u2013 b\n", body: "@@\n-a - b\n+c", want: "c\n"},
		{name: "exact match wins over a fuzzy earlier one", content: "x \ny\nx\ny\n", body: "@@\n-x\n+X\n y", want: "x \ny\nX\ny\n"},
		{name: "@@ context narrows the search", content: "def a():\n    pass\ndef b():\n    pass\n", body: "@@ def b():\n-    pass\n+    return 1", want: "def a():\n    pass\ndef b():\n    return 1\n"},
		{name: "pure addition after its @@ line", content: "class A:\n    x = 1\nend\n", body: "@@ class A:\n+    y = 2", want: "class A:\n    y = 2\n    x = 1\nend\n"},
		{name: "pure addition without @@ text goes at the end", content: "a\nb\n", body: "@@\n+c", want: "a\nb\nc\n"},
		{name: "pure addition to an empty file", content: "", body: "@@\n+first", want: "first\n"},
		{name: "End of File picks the last occurrence", content: "end\nx\nend\n", body: "@@\n-end\n+END\n*** End of File", want: "end\nx\nEND\n"},
		{name: "trailing empty context line stands for the final newline", content: "a\nb\n", body: "@@\n a\n-b\n+B\n ", want: "a\nB\n"},
		{name: "delete every line", content: "a\nb\n", body: "@@\n-a\n-b", want: ""},
		{name: "context not found", content: "a\nb\n", body: "@@\n-zzz\n+y", err: "chunk 1 (patch line 3): could not find its context and removed lines:\n  zzz\nRead the file again"},
		{name: "partial match says which line differs", content: "a\nb\nc\n", body: "@@\n a\n b\n-C\n+D", err: `The first 2 of these lines match at line 1, but line 3 of the file is "c" where the chunk has "C".`},
		{name: "End of File not at the end", content: "x\ny\n", body: "@@\n-x\n+X\n*** End of File", err: "at the end of the file ('*** End of File')"},
		{name: "chunks out of order", content: "a\nb\nc\n", body: "@@\n-c\n+C\n@@\n-a\n+A", err: "chunk 2 (patch line 6): could not find its context and removed lines (searched from line 4, after the chunk before):\n  a\nThey occur at line 1, before the chunk before"},
		{name: "@@ line not found", content: "a\n", body: "@@ func main() {\n-a\n+b", err: "could not find the line of its '@@ func main() {'"},
		{name: "@@ with a diff range", content: "a\n", body: "@@ -1,2 +1,2 @@\n-a\n+b", err: "not a line-number range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyChunks([]byte(tc.content), update(t, tc.body))
			if tc.err != "" {
				var ce *ChunkError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a *ChunkError with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// spec: a 200k-line file: the chunk near its end is found.
func TestApplyChunksHugeFile(t *testing.T) {
	var b strings.Builder
	for i := range 200000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	got, err := ApplyChunks([]byte(b.String()), update(t, "@@\n line 199998\n-line 199999\n+last\n*** End of File"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(got), "line 199998\nlast\n") || len(got) != b.Len()-len("line 199999")+len("last") {
		t.Fatalf("tail %q, len %d", got[len(got)-30:], len(got))
	}
}

// memFiles is a Files over a map; a value "!err" makes ReadFile fail.
type memFiles map[string]string

func (m memFiles) ReadFile(name string) ([]byte, error) {
	s, ok := m[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	case s == "!err":
		return nil, fmt.Errorf("open %s: permission denied", name)
	}
	return []byte(s), nil
}

// spec: Apply computes every file's new state, all or nothing.
func TestApply(t *testing.T) {
	type state struct {
		existed, exists bool
		old, new, from  string
	}
	tests := []struct {
		name  string
		files memFiles
		body  string
		want  map[string]state
		order []string
		err   string
	}{
		{
			name:  "add, update with move, delete",
			files: memFiles{"old.go": "a\nb\n", "gone.txt": "x\n"},
			body:  "*** Add File: new.txt\n+hi\n*** Update File: old.go\n*** Move to: new.go\n@@\n-b\n+B\n*** Delete File: gone.txt",
			order: []string{"new.txt", "old.go", "new.go", "gone.txt"},
			want: map[string]state{
				"new.txt":  {exists: true, new: "hi\n"},
				"old.go":   {existed: true, old: "a\nb\n"},
				"new.go":   {exists: true, new: "a\nB\n", from: "old.go"},
				"gone.txt": {existed: true, old: "x\n"},
			},
		},
		{
			name:  "add then update the same file",
			files: memFiles{},
			body:  "*** Add File: n\n+1\n+2\n*** Update File: n\n@@\n-2\n+two",
			order: []string{"n"},
			want:  map[string]state{"n": {exists: true, new: "1\ntwo\n"}},
		},
		{
			name:  "a move of a moved file keeps the first source",
			files: memFiles{"a": "x\n"},
			body:  "*** Update File: a\n*** Move to: b\n*** Update File: b\n*** Move to: c\n@@\n-x\n+y",
			order: []string{"a", "b", "c"},
			want: map[string]state{
				"a": {existed: true, old: "x\n"},
				"b": {},
				"c": {exists: true, new: "y\n", from: "a"},
			},
		},
		{name: "add over an existing file", files: memFiles{"a": "x\n"}, body: "*** Add File: a\n+y", err: "Add File a (patch line 2): the file already exists"},
		{name: "delete a missing file", files: memFiles{}, body: "*** Delete File: a", err: "Delete File a (patch line 2): the file does not exist"},
		{name: "update a missing file", files: memFiles{}, body: "*** Update File: a\n@@\n-x", err: "Update File a (patch line 2): the file does not exist; create it with '*** Add File: a'"},
		{name: "move onto an existing file", files: memFiles{"a": "x\n", "b": "y\n"}, body: "*** Update File: a\n*** Move to: b\n@@\n-x\n+z", err: "cannot move it to b: that file already exists"},
		{name: "read error", files: memFiles{"a": "!err"}, body: "*** Delete File: a", err: "Delete File a (patch line 2): open a: permission denied"},
		{
			name:  "second file's hunk fails",
			files: memFiles{"a": "1\n", "b": "2\n"},
			body:  "*** Update File: a\n@@\n-1\n+one\n*** Update File: b\n@@\n-3\n+three",
			err:   "Update File b (patch line 6): chunk 1 (patch line 7): could not find",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("*** Begin Patch\n" + tc.body + "\n*** End Patch")
			if err != nil {
				t.Fatal(err)
			}
			changes, err := Apply(p, tc.files)
			if tc.err != "" {
				var he *HunkError
				if !errors.As(err, &he) || !strings.Contains(err.Error(), tc.err) || changes != nil {
					t.Fatalf("err = %v (changes %v), want a *HunkError with %q and no changes", err, changes, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != len(tc.order) {
				t.Fatalf("got %d changes, want %d: %+v", len(changes), len(tc.order), changes)
			}
			for i, c := range changes {
				if c.Path != tc.order[i] {
					t.Errorf("change %d is %s, want %s", i, c.Path, tc.order[i])
				}
				w := tc.want[c.Path]
				got := state{c.Existed, c.Exists, string(c.Old), string(c.New), c.MovedFrom}
				if got != w {
					t.Errorf("%s: got %+v, want %+v", c.Path, got, w)
				}
			}
		})
	}
}

func TestChanged(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want bool
	}{
		{Change{}, false},
		{Change{Existed: true, Old: []byte("a"), Exists: true, New: []byte("a")}, false},
		{Change{Existed: true, Old: []byte("a"), Exists: true, New: []byte("b")}, true},
		{Change{Existed: true, Old: []byte("a")}, true},
		{Change{Exists: true}, true},
		{Change{Existed: true, Old: []byte("a"), Exists: true, New: []byte("a"), MovedFrom: "x"}, true},
	} {
		if got := tc.c.Changed(); got != tc.want {
			t.Errorf("%+v: Changed = %v, want %v", tc.c, got, tc.want)
		}
	}
}
