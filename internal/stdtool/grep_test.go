package stdtool

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// grepFixture is the tree most grep cases search, in a temp dir that is
// the cwd.
func grepFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	outside := t.TempDir()
	searchTree(t, outside, map[string]string{"leak.go": "func LeakHandler() {}\n"})
	searchTree(t, dir, map[string]string{
		".git/config":      "func GitHandler() {}\n",
		".gitignore":       "*.gen.go\nvendor/\n",
		"a.go":             "package a\n\nfunc ServeHandler() {}\nfunc serve() {}\n",
		"b.txt":            "nothing\nFUNC LoudHandler\n",
		"sub/c.go":         "package sub\n// func NotAHandler\nfunc OtherHandler(x int) {}\n",
		"sub/d.gen.go":     "func GeneratedHandler() {}\n",
		"vendor/v.go":      "func VendorHandler() {}\n",
		"bin.dat":          "func BinaryHandler\x00\x01\n",
		"empty.txt":        "",
		"linked":           "-> sub",
		"out":              "-> " + outside,
		"caf\xe9/names.go": "func LatinHandler() {}\n",
	})
	return dir
}

// TestGrep: the argv, the output format and what is searched.
// The standard toolset: grep PATTERN [PATH] [--glob G] [-i] [-l].
func TestGrep(t *testing.T) {
	grepFixture(t)
	cases := []struct {
		name string
		args []string
		want string // the whole output
		code int
	}{
		{"basic: sorted by path, ignored/binary/.git/symlinks skipped",
			[]string{`func \w+Handler`},
			"a.go:3:func ServeHandler() {}\ncaf\uFFFD/names.go:1:func LatinHandler() {}\nsub/c.go:2:// func NotAHandler\nsub/c.go:3:func OtherHandler(x int) {}\n", 0},
		{"-i", []string{`^func \w+handler`, "-i", "."},
			"a.go:3:func ServeHandler() {}\nb.txt:2:FUNC LoudHandler\ncaf\uFFFD/names.go:1:func LatinHandler() {}\nsub/c.go:3:func OtherHandler(x int) {}\n", 0},
		{"-l", []string{"Handler", "-l"}, "a.go\nb.txt\ncaf\uFFFD/names.go\nsub/c.go\n", 0},
		{"--files-with-matches", []string{"--files-with-matches", "package"}, "a.go\nsub/c.go\n", 0},
		{"PATH a directory", []string{"Handler", "sub"}, "sub/c.go:2:// func NotAHandler\nsub/c.go:3:func OtherHandler(x int) {}\n", 0},
		{"PATH a file", []string{"^package", "sub/c.go"}, "sub/c.go:1:package sub\n", 0},
		{"PATH an ignored file, named", []string{"Handler", "sub/d.gen.go"}, "sub/d.gen.go:1:func GeneratedHandler() {}\n", 0},
		{"PATH an ignored dir, named", []string{"Handler", "vendor"}, "vendor/v.go:1:func VendorHandler() {}\n", 0},
		{"PATH through a symlink", []string{"Other", "linked"}, "linked/c.go:3:func OtherHandler(x int) {}\n", 0},
		{"--glob on the name", []string{"Handler", "--glob", "*.txt"}, "b.txt:2:FUNC LoudHandler\n", 0},
		{"--glob on the path", []string{"Handler", "--glob=sub/**"}, "sub/c.go:2:// func NotAHandler\nsub/c.go:3:func OtherHandler(x int) {}\n", 0},
		{"--glob negated", []string{"Handler", "--glob", "!*.go"}, "b.txt:2:FUNC LoudHandler\n", 0},
		{"--glob relative to PATH", []string{"Handler", "sub", "--glob", "c.go"}, "sub/c.go:2:// func NotAHandler\nsub/c.go:3:func OtherHandler(x int) {}\n", 0},
		{"line anchors", []string{`^func [a-z]+\(\) \{\}$`}, "a.go:4:func serve() {}\n", 0},
		{"\\s stays in its line", []string{`package\s+func`}, `no matches for "package\\s+func" in . (6 files searched; 1 binary file skipped, 3 entries ignored by .gitignore or .git)` + "\n", 0},
		{"alternation", []string{`serve\(|Loud`}, "a.go:4:func serve() {}\nb.txt:2:FUNC LoudHandler\n", 0},
		{"no literal", []string{`^\w{7}$`}, "b.txt:1:nothing\n", 0},
		{"empty pattern, empty file", []string{"", "empty.txt"}, "no matches for \"\" in empty.txt (1 file searched)\n", 0},
		{"no matches", []string{"zebra"}, `no matches for "zebra" in . (6 files searched; 1 binary file skipped, 3 entries ignored by .gitignore or .git)` + "\n", 0},
		{"binary file named", []string{"Binary", "bin.dat"}, "no matches for \"Binary\" in bin.dat (0 files searched)\n[not searched: bin.dat: a binary file (a NUL byte in its first 8 KiB)]\n", 0},
		{"invalid regexp", []string{"func("}, "grep: invalid regular expression \"func(\": error parsing regexp: missing closing ): `func(`\n", 1},
		{"newline refused", []string{`a\nb`}, "grep: \"a\\\\nb\": the pattern holds a line break (\\n); grep matches within one line\n", 1},
		{"missing PATH", []string{"x", "nope"}, "grep: nope: no such file or directory\n", 1},
		{"bad glob", []string{"x", "--glob", "[a"}, "grep: --glob \"[a\" is not a valid glob\n", 1},
		{"usage", []string{}, "grep: needs at least 1 argument(s), got 0\nusage: grep PATTERN [PATH] [--glob G] [-i] [-l]\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, code := searchRun(t, "grep", c.args...)
			if got != c.want || code != c.code {
				t.Errorf("grep %q: exit %d\n%s\nwant exit %d\n%s", c.args, code, got, c.code, c.want)
			}
		})
	}
}

// TestGrepUnicodeFold: -i matches what Go's (?i) matches, also the runes
// outside ASCII that fold to k and s, and non-ASCII letters.
// The standard toolset: -i.
func TestGrepUnicodeFold(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	searchTree(t, dir, map[string]string{
		"k.txt": "a \u212aey here\nplain key\nno\n",
		"s.txt": "mi\u017f\u017fion\n",
		"e.txt": "CAFÉ\n",
	})
	for _, c := range []struct{ pattern, want string }{
		{"key", "k.txt:1:a \u212aey here\nk.txt:2:plain key\n"},
		{"mission", "s.txt:1:mi\u017f\u017fion\n"},
		{"café", "e.txt:1:CAFÉ\n"},
	} {
		if got, code := searchRun(t, "grep", "-i", c.pattern); got != c.want || code != 0 {
			t.Errorf("grep -i %s: exit %d\n%s\nwant\n%s", c.pattern, code, got, c.want)
		}
	}
}

// TestGrepCaps: 500 matching lines at most with a note on how to narrow,
// long lines cut around their match, the output budget.
// The standard toolset: a result cap with a note on how to narrow.
func TestGrepCaps(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var many strings.Builder
	for i := range 600 {
		fmt.Fprintf(&many, "hit %d\n", i)
	}
	long := strings.Repeat("x", 5000) + "NEEDLE" + strings.Repeat("y", 5000)
	searchTree(t, dir, map[string]string{
		"many.txt":   many.String(),
		"more.txt":   "hit again\n",
		"long.txt":   long + "\n",
		"a-wide.txt": strings.Repeat("wide hit "+strings.Repeat("w", 200)+"\n", 300),
		"other.txt":  "hit last\n",
	})
	got, code := searchRun(t, "grep", "hit", "many.txt")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if code != 0 || len(lines) != 501 || lines[499] != "many.txt:500:hit 499" ||
		lines[500] != "[600 matching lines in 1 file, 500 shown; narrow the search with a PATH or --glob]" {
		t.Errorf("cap: exit %d, %d lines, last %q", code, len(lines), lines[len(lines)-1])
	}

	got, _ = searchRun(t, "grep", "NEEDLE")
	want := "long.txt:1:…" + strings.Repeat("x", 100) + "NEEDLE" + strings.Repeat("y", 294) + "… [line of 10006 bytes cut]\n"
	if got != want {
		t.Errorf("long line:\n%q\nwant\n%q", got, want)
	}

	got, _ = searchRun(t, "grep", "hit")
	if len(got) > Budget+512 || !strings.Contains(got, "[output cut: ") ||
		!strings.Contains(got, "[902 matching lines in 4 files, ") || strings.Contains(got, "other.txt") {
		t.Errorf("budget: %d bytes, ends %q", len(got), got[max(0, len(got)-300):])
	}

	got, _ = searchRun(t, "grep", "-l", "hit")
	if got != "a-wide.txt\nmany.txt\nmore.txt\nother.txt\n" {
		t.Errorf("-l: %q", got)
	}
}

// TestGrepHugeAndUnreadable: a file over the size bound is skipped with a
// note naming it; so is an unreadable one (skipped as root: chmod 000 does
// not stop root, which CI runs as).
// The standard toolset: huge files, unreadable files.
func TestGrepHugeAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	searchTree(t, dir, map[string]string{
		"big.txt":   strings.Repeat("needle\n", 300),
		"small.txt": "needle\n",
	})
	old := grepMaxFileSize
	grepMaxFileSize = 1 << 10
	t.Cleanup(func() { grepMaxFileSize = old })
	got, code := searchRun(t, "grep", "needle")
	want := "small.txt:1:needle\n[not searched: big.txt: 0 MiB, over grep's 0 MiB (search it with bash: rg or grep)]\n"
	if got != want || code != 0 {
		t.Errorf("huge: exit %d\n%s\nwant\n%s", code, got, want)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: the unreadable-file case is skipped (root reads a mode 000 file)")
		return
	}
	grepMaxFileSize = old
	os.Chmod(filepath.Join(dir, "small.txt"), 0)
	got, _ = searchRun(t, "grep", "needle")
	if !strings.Contains(got, "[not searched: small.txt: open: permission denied]") {
		t.Errorf("unreadable: %s", got)
	}
}

// TestGrepLikeRegexpPerLine: the literal prefilter and the whole-file
// search find exactly the lines Go's regexp matches one line at a time.
// The standard toolset: match against the whole buffer, map matches to lines.
func TestGrepLikeRegexpPerLine(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	words := []string{"func", "Handler", "serve", "HTTP", "key", "KEY", "x", "", " ", "\t", "(", ")", "{", "}", "é", "\u212a", "mission", "\r"}
	var text strings.Builder
	for range 3000 {
		for range rng.Intn(8) {
			text.WriteString(words[rng.Intn(len(words))])
		}
		text.WriteByte('\n')
	}
	data := []byte(text.String() + "func Handler") // no final newline
	lines := strings.Split(string(data), "\n")
	patterns := []string{
		`func \w*Handler`, `Handler`, `^func`, `\)$`, `serve|HTTP`, `(?:key|x)+y?`, `[a-z]+\(`, `^$`, `^\s*$`,
		`\w{3}`, `KEY`, `é`, `mission|é`, `x*`, `(?i)key`, `(?i)HTTP|serve`, `.`, `\bfunc\b.*\}`,
	}
	for _, p := range patterns {
		for _, icase := range []bool{false, true} {
			g, err := compileGrep(p, icase)
			if err != nil {
				t.Fatal(err)
			}
			ref := regexp.MustCompile(map[bool]string{false: "", true: "(?i)"}[icase] + p)
			var want []string
			for i, l := range lines {
				if ref.MatchString(l) {
					want = append(want, fmt.Sprintf("%d:%s", i+1, l))
				}
			}
			var got []string
			n := g.search(data, &grepScratch{}, func(lineNo int, line []byte) bool {
				got = append(got, fmt.Sprintf("%d:%s", lineNo, line))
				return true
			})
			if strings.Join(got, "\n") != strings.Join(want, "\n") || n != len(want) {
				t.Errorf("%q (icase %v, lits %q pure %v): %d lines, want %d", p, icase, g.lits, g.pure, len(got), len(want))
			}
		}
	}
}

// TestGrepCancel: a cancelled context stops grep with the context's error.
// The standard toolset: cancel.
func TestGrepCancel(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	searchTree(t, dir, map[string]string{"a.txt": "x\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, code := searchRunCtx(t, ctx, "grep", "x"); code != 1 || got != "grep: context canceled\n" {
		t.Errorf("exit %d: %q", code, got)
	}
}
