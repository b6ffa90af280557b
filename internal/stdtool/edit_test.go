package stdtool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// spec: edit replaces an exact string, once or with --all, keeps
// line endings, mode and a missing final newline, and shows the change.
func TestEdit(t *testing.T) {
	goFile := "package main\n\nfunc main() {\n\tx := 1\n\tprintln(x)\n}\n"
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		args    []string // after the path
		want    string   // the output
		code    int
		after   string // the file afterwards (with code 1 it must be unchanged)
	}{
		{
			name: "unique", content: goFile, args: []string{"x := 1", "x := 2"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 4)\n     1\tpackage main\n     2\t\n     3\tfunc main() {\n     4\t\tx := 2\n     5\t\tprintln(x)\n     6\t}\n",
			after: "package main\n\nfunc main() {\n\tx := 2\n\tprintln(x)\n}\n",
		},
		{
			name: "not unique", content: goFile, args: []string{"x", "y"}, code: 1,
			want: "OLD occurs 2 times in f (lines 4, 5); add surrounding lines to OLD so that it occurs once, or pass --all to replace every occurrence\n",
		},
		{
			name: "--all", content: goFile, args: []string{"x", "y", "--all"}, code: 0,
			want:  "edited f: replaced 2 occurrences (lines 4, 5)\n     1\tpackage main\n     2\t\n     3\tfunc main() {\n     4\t\ty := 1\n     5\t\tprintln(y)\n     6\t}\n",
			after: "package main\n\nfunc main() {\n\ty := 1\n\tprintln(y)\n}\n",
		},
		{
			name: "--all with one occurrence", content: numbered(30, "\n"), args: []string{"--all", "line 2\n", "line two\n"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 2)\n     1\tline 1\n     2\tline two\n     3\tline 3\n     4\tline 4\n     5\tline 5\n",
			after: strings.Replace(numbered(30, "\n"), "line 2\n", "line two\n", 1),
		},
		{
			name: "several places", content: "a\n" + strings.Repeat("mid\n", 10) + "a\n", args: []string{"--all", "a\n", "A\n"}, code: 0,
			want:  "edited f: replaced 2 occurrences (lines 1, 12)\n     1\tA\n     2\tmid\n     3\tmid\n     4\tmid\n  …\n     9\tmid\n    10\tmid\n    11\tmid\n    12\tA\n",
			after: "A\n" + strings.Repeat("mid\n", 10) + "A\n",
		},
		{
			name: "deletion shows the lines around it", content: "a\nb\nc\nd\n", args: []string{"b\n", ""}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 2)\n     1\ta\n     2\tc\n     3\td\n",
			after: "a\nc\nd\n",
		},
		{
			name: "deletion at the end", content: "a\nb\n", args: []string{"b\n", ""}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 2)\n     1\ta\n",
			after: "a\n",
		},
		{
			name: "CRLF file, LF in OLD and NEW", content: "one\r\ntwo\r\nthree\r\n", args: []string{"one\ntwo\n", "1\n2\n2.5\n"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 1)\n     1\t1\n     2\t2\n     3\t2.5\n     4\tthree\n",
			after: "1\r\n2\r\n2.5\r\nthree\r\n",
		},
		{
			name: "CRLF file, single-line OLD, multi-line NEW", content: "a\r\nb\r\n", args: []string{"b", "b\nc"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 2)\n     1\ta\n     2\tb\n     3\tc\n",
			after: "a\r\nb\r\nc\r\n",
		},
		{
			name: "no final newline kept", content: "a\nb", args: []string{"b", "B"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 2)\n     1\ta\n     2\tB\n",
			after: "a\nB",
		},
		{
			name: "mode kept", content: "secret=1\n", mode: 0o600, args: []string{"1", "2"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 1)\n     1\tsecret=2\n",
			after: "secret=2\n",
		},
		{
			name: "everything deleted", content: "only\n", args: []string{"only\n", ""}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 1)\n(the file is now empty)\n",
			after: "",
		},
		{
			name: "dash-led OLD and NEW", content: "- a\n- b\n", args: []string{"- b", "- c"}, code: 0,
			want:  "edited f: replaced 1 occurrence (line 2)\n     1\t- a\n     2\t- c\n",
			after: "- a\n- c\n",
		},
		{name: "empty OLD", content: "a\n", args: []string{"", "x"}, code: 1, want: "OLD is empty: give the exact text to replace (to create a file, use write)\n"},
		{name: "OLD equals NEW", content: "a\n", args: []string{"a", "a"}, code: 1, want: "OLD and NEW are the same; nothing to change\n"},
		{name: "only line endings differ", content: "a\r\nb\r\n", args: []string{"a\nb", "a\r\nb"}, code: 1, want: "OLD and NEW differ only in their line endings, which edit keeps as the file has them; nothing to change\n"},
		{
			name: "not found", content: goFile, args: []string{"y := 1", "y := 2"}, code: 1,
			want: "OLD was not found in f. Read it (read f) and copy the text exactly, without the line-number prefixes.\n",
		},
		{
			name: "found when whitespace is ignored", content: goFile, args: []string{"    x := 1\n    println(x)", "z"}, code: 1,
			want: "OLD was not found in f. Lines 4–5 would match it if whitespace were ignored (indentation, tabs or spaces, trailing spaces or line breaks differ); read f --offset 4 --limit 2 shows them exactly.\n",
		},
		{
			name: "read's line numbers left in OLD", content: goFile, args: []string{"     4\t\tx := 1", "z"}, code: 1,
			want: "OLD was not found in f. OLD seems to hold read's line-number prefixes (spaces, a number, a tab): leave them out.\n",
		},
		{name: "binary", content: "\x7fELF\x00\x00", args: []string{"ELF", "FLE"}, code: 1, want: "f is a binary file (6 bytes); edit changes text files only\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ftDir(t)
			mode := tc.mode
			if mode == 0 {
				mode = 0o644
			}
			ftWrite(t, "f", tc.content, mode)
			got, code := ftRun(t, "edit", append([]string{"f"}, tc.args...)...)
			if got != tc.want || code != tc.code {
				t.Fatalf("edit %q = %d\n%s\nwant %d\n%s", tc.args, code, got, tc.code, tc.want)
			}
			after := ftRead(t, "f")
			if tc.code != 0 && after != tc.content {
				t.Fatalf("refused edit changed the file to %q", after)
			}
			if tc.code == 0 && after != tc.after {
				t.Fatalf("file %q, want %q", after, tc.after)
			}
			if st, err := os.Stat("f"); err != nil || st.Mode().Perm() != mode {
				t.Fatalf("mode %v %v, want %v", st.Mode(), err, mode)
			}
		})
	}
}

// spec: edit on a 200k-line file: the change lands, the view is
// bounded and numbered right.
func TestEditHugeFile(t *testing.T) {
	ftDir(t)
	content := numbered(200000, "\n")
	ftWrite(t, "big.txt", content, 0o644)
	got, code := ftRun(t, "edit", "big.txt", "line 199999\n", "changed\n")
	want := "edited big.txt: replaced 1 occurrence (line 199999)\n199996\tline 199996\n199997\tline 199997\n199998\tline 199998\n199999\tchanged\n200000\tline 200000\n"
	if got != want || code != 0 {
		t.Fatalf("%d %q", code, got)
	}
	if after := ftRead(t, "big.txt"); after != strings.Replace(content, "line 199999\n", "changed\n", 1) {
		t.Fatal("content wrong")
	}
	// --all over every line: the view is cut at the budget
	got, code = ftRun(t, "edit", "big.txt", "--all", "line ", "LINE ")
	if code != 0 || len(got) > 16<<10 || !strings.HasPrefix(got, "edited big.txt: replaced 199999 occurrences (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …)\n") {
		t.Fatalf("%d %d bytes %q", code, len(got), got[:min(len(got), 200)])
	}
}

// spec: a long NEW is shown by its ends.
func TestEditLongNewShowsEnds(t *testing.T) {
	ftDir(t)
	ftWrite(t, "f", "start\nX\nend\n", 0o644)
	got, code := ftRun(t, "edit", "f", "X\n", numbered(100, "\n"))
	if code != 0 {
		t.Fatal(got)
	}
	for _, want := range []string{"     1\tstart\n     2\tline 1\n", "    13\tline 12\n  …\n    90\tline 89\n", "   101\tline 100\n   102\tend\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "line 50\n") {
		t.Errorf("the middle is shown:\n%s", got)
	}
}

// spec: edit refuses a symlink out of the workspace, a
// directory, a FIFO (without blocking) and a missing file.
func TestEditRefusals(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "t.txt")
	if err := os.WriteFile(target, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := ftDir(t)
	if err := os.Symlink(target, "link.txt"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo("pipe", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"link.txt", fmt.Sprintf("%s/link.txt resolves to %s, outside the workspace %s (a symlink); write that path directly if you mean it\n", dir, target, dir)},
		{"d", "d is a directory; use ls to list it\n"},
		{"pipe", "pipe is not a regular file but a named pipe (FIFO); only regular files can be read or edited\n"},
		{"missing.txt", "missing.txt does not exist\n"},
	} {
		if got, code := ftRun(t, "edit", tc.path, "a", "b"); got != tc.want || code != 1 {
			t.Errorf("edit %s = %d %q, want %q", tc.path, code, got, tc.want)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "a\n" {
		t.Fatalf("target changed: %q", b)
	}
}

// spec: an unreadable file: clear error. Root reads a mode-000
// file anyway (CI runs tests as root): skipped there.
func TestEditUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can read a mode-000 file")
	}
	ftDir(t)
	ftWrite(t, "locked.txt", "a\n", 0o000)
	if got, code := ftRun(t, "edit", "locked.txt", "a", "b"); got != "cannot edit locked.txt: permission denied\n" || code != 1 {
		t.Fatalf("%d %q", code, got)
	}
}

// spec: a file name that is not UTF-8 is edited, and shown with
// its invalid bytes replaced.
func TestEditNonUTF8Name(t *testing.T) {
	ftDir(t)
	name := "caf\xe9.txt"
	ftWrite(t, name, "a\n", 0o644)
	got, code := ftRun(t, "edit", name, "a", "b")
	if want := "edited caf\uFFFD.txt: replaced 1 occurrence (line 1)\n     1\tb\n"; got != want || code != 0 {
		t.Fatalf("%d %q, want %q", code, got, want)
	}
	if ftRead(t, name) != "b\n" {
		t.Fatal("content")
	}
}
