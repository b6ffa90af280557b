package chatview

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreview: the diff an approval question shows for write, edit and
// apply_patch, computed from the workspace and the call's argv; a note
// when there is nothing to show. spec: issue 18
func TestPreview(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "calc.sh"), []byte("# calc\nadd() {\n\techo $(( $1 - $2 ))\n}\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "long.txt"), []byte(strings.Repeat("same\n", 20)+"old\n"+strings.Repeat("same\n", 20)+"x\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "noeol"), []byte("a\nb"), 0o644)
	os.WriteFile(filepath.Join(ws, "bin"), []byte("a\x00b"), 0o644)
	os.WriteFile(filepath.Join(ws, "twice"), []byte("x x\n"), 0o644)
	for _, tc := range []struct {
		name       string
		tool       string
		argv       []string
		diff, note string
	}{
		{"edit", "edit", []string{"calc.sh", "$(( $1 - $2 ))", "$(( $1 + $2 ))"},
			"--- calc.sh\n+++ calc.sh\n@@ -1,4 +1,4 @@\n # calc\n add() {\n-\techo $(( $1 - $2 ))\n+\techo $(( $1 + $2 ))\n }", ""},
		{"edit, flags after --", "edit", []string{"--", "calc.sh", "# calc", "--all"},
			"--- calc.sh\n+++ calc.sh\n@@ -1,4 +1,4 @@\n-# calc\n+--all\n add() {\n \techo $(( $1 - $2 ))\n }", ""},
		{"edit far from the start: one hunk with 3 lines of context", "edit", []string{"/workspace/long.txt", "old", "new"},
			"--- /workspace/long.txt\n+++ /workspace/long.txt\n@@ -18,7 +18,7 @@\n same\n same\n same\n-old\n+new\n same\n same\n same", ""},
		{"edit --all", "edit", []string{"twice", "x", "y", "--all"}, "--- twice\n+++ twice\n@@ -1 +1 @@\n-x x\n+y y", ""},
		{"edit, not unique", "edit", []string{"twice", "x", "y"}, "", "no preview: the text to replace occurs 2 times in twice (the edit will fail without --all)"},
		{"edit, absent text", "edit", []string{"calc.sh", "nope", "y"}, "", "no preview: the text to replace is not in calc.sh (the edit will fail)"},
		{"edit, no file", "edit", []string{"gone", "a", "b"}, "", "no preview: gone does not exist (the edit will fail)"},
		{"write, new file", "write", []string{"dir/new.txt", "one\ntwo\n"}, "--- /dev/null\n+++ dir/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two", ""},
		{"write, replace; no final newline kept visible", "write", []string{"noeol", "a\nc"},
			"--- noeol\n+++ noeol\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file", ""},
		{"write, same content", "write", []string{"noeol", "a\nb"}, "", "no change: the file already holds this content"},
		{"write, binary", "write", []string{"bin", "x"}, "", "no preview: bin is not text"},
		{"outside the workspace", "write", []string{"../etc/passwd", "x"}, "", "no preview: ../etc/passwd is outside the workspace"},
		{"absolute outside", "edit", []string{"/etc/passwd", "a", "b"}, "", "no preview: /etc/passwd is outside the workspace"},
		{"apply_patch shows the patch", "apply_patch", []string{"*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\n"}, "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch", ""},
		{"bad argv", "write", []string{"only-path"}, "", "no preview: write takes PATH CONTENT"},
		{"a tool that changes no file", "read", []string{"calc.sh"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff, note := Preview(tc.tool, tc.argv, ws)
			if diff != tc.diff || note != tc.note {
				t.Errorf("Preview(%s %q)\n got diff %q note %q\nwant diff %q note %q", tc.tool, tc.argv, diff, note, tc.diff, tc.note)
			}
		})
	}
}

// TestPreviewBounded: a long change is cut to MaxPreviewLines, counted.
// spec: issue 18
func TestPreviewBounded(t *testing.T) {
	diff, _ := Preview("write", []string{"big", strings.Repeat("line\n", 500)}, t.TempDir())
	lines := strings.Split(diff, "\n")
	if len(lines) != MaxPreviewLines+1 || lines[len(lines)-1] != "… 303 more lines" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// TestUnwrapAndLabel: a model's tsh call is shown as the tool it runs.
// spec: issue 18
func TestUnwrapAndLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tsh", []string{"call", "read", "a b.go"}, `read "a b.go"`},
		{"tsh", []string{"load", "bash"}, "tsh load bash"},
		{"mark", nil, "mark"},
		{"tsh", []string{"call", "bash", "printf '\x1b[2J'"}, `bash "printf '\x1b[2J'"`},
	} {
		if got := Label(tc.name, tc.args); got != tc.want {
			t.Errorf("Label(%s %q) = %q, want %q", tc.name, tc.args, got, tc.want)
		}
	}
}

// TestQuestion: the approval question names the tool and its argv, shows
// the diff, and ends with the prompt; control characters are neutralised.
// spec: issue 18
func TestQuestion(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("a\n"), 0o644)
	q := Question("tsh", []string{"call", "edit", "f", "a", "b\x1b[31m"}, ws, false)
	want := "? the agent wants to run tool edit with argv [\"f\" \"a\" \"b\\x1b[31m\"]\n--- f\n+++ f\n@@ -1 +1 @@\n-a\n+b\uFFFD[31m\nAllow once? [y/N] "
	if q != want {
		t.Errorf("got  %q\nwant %q", q, want)
	}
	if c := Question("tsh", []string{"call", "edit", "f", "a", "b"}, ws, true); !strings.Contains(c, "\x1b[") || !strings.HasSuffix(c, "Allow once? [y/N] ") {
		t.Errorf("coloured question: %q", c)
	}
}
