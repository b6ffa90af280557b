package applypatch

import (
	"reflect"
	"strings"
	"testing"
)

// spec: the apply_patch format as Codex parses it.
func TestParse(t *testing.T) {
	full := `*** Begin Patch
*** Add File: path/new.txt
+line one
+line two
*** Update File: path/old.go
*** Move to: path/renamed.go
@@ func main() {
 context line
-removed line
+added line
 context line
@@
-last
+LAST
*** End of File
*** Delete File: path/gone.txt
*** End Patch
`
	fullWant := []Hunk{
		{Kind: Add, Path: "path/new.txt", Contents: "line one\nline two\n", Line: 2},
		{Kind: Update, Path: "path/old.go", MoveTo: "path/renamed.go", Line: 5, Chunks: []Chunk{
			{Context: "func main() {", Line: 7, Lines: []Line{{' ', "context line"}, {'-', "removed line"}, {'+', "added line"}, {' ', "context line"}}},
			{Line: 12, EOF: true, Lines: []Line{{'-', "last"}, {'+', "LAST"}}},
		}},
		{Kind: Delete, Path: "path/gone.txt", Line: 16},
	}
	tests := []struct {
		name  string
		patch string
		want  []Hunk
		err   string // a substring of the error; "" for success
	}{
		{name: "every operation", patch: full, want: fullWant},
		{name: "CRLF patch text", patch: strings.ReplaceAll(full, "\n", "\r\n"), want: fullWant},
		{
			// Codex fixtures 017, 018, 020: padded markers and headers
			name:  "whitespace around markers",
			patch: " *** Begin Patch \n  *** Update File: foo.txt  \n@@\n-old\n+new\n *** End Patch \n",
			want:  []Hunk{{Kind: Update, Path: "foo.txt", Line: 2, Chunks: []Chunk{{Line: 3, Lines: []Line{{'-', "old"}, {'+', "new"}}}}}},
		},
		{
			name:  "leading blank lines keep line numbers",
			patch: "\n\n*** Begin Patch\n*** Delete File: a\n*** End Patch",
			want:  []Hunk{{Kind: Delete, Path: "a", Line: 4}},
		},
		{
			name:  "heredoc wrapper is removed",
			patch: "<<'EOF'\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nEOF\n",
			want:  []Hunk{{Kind: Add, Path: "a", Contents: "x\n", Line: 3}},
		},
		{
			name:  "first chunk without @@",
			patch: "*** Begin Patch\n*** Update File: f.py\n import foo\n+bar\n*** End Patch",
			want:  []Hunk{{Kind: Update, Path: "f.py", Line: 2, Chunks: []Chunk{{Line: 3, Lines: []Line{{' ', "import foo"}, {'+', "bar"}}}}}},
		},
		{
			name:  "empty line is an empty context line; blank lines between hunks",
			patch: "*** Begin Patch\n*** Update File: a\n@@\n x\n\n-y\n*** Add File: b\n+1\n\n*** Delete File: c\n*** End Patch",
			want: []Hunk{
				{Kind: Update, Path: "a", Line: 2, Chunks: []Chunk{{Line: 3, Lines: []Line{{' ', "x"}, {' ', ""}, {'-', "y"}}}}},
				{Kind: Add, Path: "b", Contents: "1\n", Line: 7},
				{Kind: Delete, Path: "c", Line: 10},
			},
		},
		{
			name:  "@@ with only blanks is a bare @@",
			patch: "*** Begin Patch\n*** Update File: a\n@@   \n-y\n*** End Patch",
			want:  []Hunk{{Kind: Update, Path: "a", Line: 2, Chunks: []Chunk{{Line: 3, Lines: []Line{{'-', "y"}}}}}},
		},
		{
			name:  "pure rename",
			patch: "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
			want:  []Hunk{{Kind: Update, Path: "a", MoveTo: "b", Line: 2}},
		},
		{
			name:  "add with no lines is an empty file",
			patch: "*** Begin Patch\n*** Add File: empty\n*** End Patch",
			want:  []Hunk{{Kind: Add, Path: "empty", Line: 2}},
		},
		{name: "empty", patch: "  \n", err: "the patch is empty"},
		{name: "no begin", patch: "*** Update File: a\n@@\n-x\n*** End Patch", err: "patch line 1: the first line of the patch must be '*** Begin Patch'"},
		{name: "no end", patch: "*** Begin Patch\n*** Delete File: a\n", err: "the last line of the patch must be '*** End Patch'"},
		{name: "only begin", patch: "*** Begin Patch", err: "the last line of the patch must be '*** End Patch'"},
		{name: "no operations", patch: "*** Begin Patch\n*** End Patch", err: "the patch has no file operations"},
		{name: "bad header", patch: "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch", err: `patch line 2: "*** Frobnicate File: a" is not a file operation`},
		{name: "update without chunks", patch: "*** Begin Patch\n*** Update File: a\n*** End Patch", err: "patch line 2: '*** Update File: a' has no changes"},
		{name: "update path missing", patch: "*** Begin Patch\n*** Update File:\n@@\n-x\n*** End Patch", err: "'*** Update File:' needs a path"},
		{name: "@@ with nothing after it", patch: "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch", err: "an '@@' line with no chunk lines after it"},
		{name: "end of file with no lines", patch: "*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch", err: "'*** End of File' with no chunk lines before it"},
		{name: "unexpected chunk line", patch: "*** Begin Patch\n*** Update File: a\n@@\nfoo\n*** End Patch", err: `patch line 4: unexpected line "foo"`},
		{name: "second chunk without @@", patch: "*** Begin Patch\n*** Update File: a\n-x\nfoo\n*** End Patch", err: `patch line 4: expected an '@@' line to start the next chunk, got "foo"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.patch)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if _, ok := err.(*ParseError); !ok {
					t.Fatalf("err is %T, want *ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Hunks, tc.want) {
				t.Fatalf("hunks\n got %+v\nwant %+v", p.Hunks, tc.want)
			}
		})
	}
}

func TestChunkSidesAndStats(t *testing.T) {
	p, err := Parse("*** Begin Patch\n*** Update File: a\n@@\n a\n-b\n+B\n+C\n c\n*** Add File: n\n+1\n+2\n*** End Patch")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Hunks[0].Chunks[0]
	if got := c.Old(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("Old = %q", got)
	}
	if got := c.New(); !reflect.DeepEqual(got, []string{"a", "B", "C", "c"}) {
		t.Errorf("New = %q", got)
	}
	if a, r := p.Hunks[0].Stats(); a != 2 || r != 1 {
		t.Errorf("update stats = +%d -%d, want +2 -1", a, r)
	}
	if a, r := p.Hunks[1].Stats(); a != 2 || r != 0 {
		t.Errorf("add stats = +%d -%d, want +2 -0", a, r)
	}
	if Update.String() != "Update File" || Kind(9).String() != "Kind(9)" {
		t.Errorf("Kind strings: %v %v", Update, Kind(9))
	}
}
