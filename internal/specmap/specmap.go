// Package specmap finds where each runtime.md requirement is enforced and
// tested: it scans the tree for `spec: ID` tags (in code comments and in
// tests) so docs/requirements.md can be checked against the code.
package specmap

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Where lists, for one requirement id, the code files that carry its tag
// and the tests (function names, or a file where the tag is outside a test).
type Where struct {
	Code  []string
	Tests []string
}

var idRe = regexp.MustCompile(`\b([A-Z])([0-9]{1,2})(?:\s*[–-]\s*([A-Z]?)([0-9]{1,2}))?\b`)

// IDs returns the requirement ids a tag line names after "spec:", with
// ranges such as "X2–X5" expanded.
func IDs(line string) []string {
	_, after, ok := strings.Cut(line, "spec:")
	if !ok {
		return nil
	}
	var out []string
	for _, m := range idRe.FindAllStringSubmatch(after, -1) {
		lo, _ := strconv.Atoi(m[2])
		hi := lo
		if m[4] != "" && (m[3] == "" || m[3] == m[1]) {
			hi, _ = strconv.Atoi(m[4])
		}
		if hi < lo || hi-lo > 20 {
			hi = lo
		}
		for n := lo; n <= hi; n++ {
			out = append(out, m[1]+strconv.Itoa(n))
		}
	}
	return out
}

// Scan walks root (skipping .git, bin and testdata) and maps every tagged
// id to where it appears: *.go and *.sh files as code, *_test.go by test.
// A fixture never counts as a proof: this package's own files (their tag
// lines are parser cases), testdata, and a tag in a test file outside a
// Test or Fuzz function (a helper, a seed, a benchmark, an example) are
// not a test that fails without the code.
func Scan(root string) (map[string]*Where, error) {
	m := map[string]*Where{}
	at := func(id string) *Where {
		if m[id] == nil {
			m[id] = &Where{}
		}
		return m[id]
	}
	err := walkFiles(root, nil, func(p string, d fs.DirEntry) error {
		rel, _ := filepath.Rel(root, p)
		if filepath.ToSlash(filepath.Dir(rel)) == ownDir {
			return nil
		}
		switch {
		case strings.HasSuffix(p, "_test.go"):
			tags, err := testTags(p)
			if err != nil {
				return err
			}
			for id, names := range tags {
				at(id).Tests = append(at(id).Tests, names...)
			}
		case strings.HasSuffix(p, ".go"), strings.HasSuffix(p, ".sh"):
			lines, err := tagLines(p)
			if err != nil {
				return err
			}
			for _, l := range lines {
				for _, id := range IDs(l.text) {
					at(id).Code = append(at(id).Code, rel)
				}
			}
		}
		return nil
	})
	for _, w := range m {
		w.Code, w.Tests = uniq(w.Code), uniq(w.Tests)
	}
	return m, err
}

// walkFiles calls fn for every file of the tree at root, skipping .git,
// bin, testdata, node_modules and the directories named in skip: the one
// walk of the map and of the tree's rules.
func walkFiles(root string, skip []string, fn func(p string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch n := d.Name(); {
			case n == ".git", n == "bin", n == "testdata", n == "node_modules", slices.Contains(skip, n):
				return filepath.SkipDir
			}
			return nil
		}
		return fn(p, d)
	})
}

type tagLine struct {
	n    int
	text string
}

func tagLines(p string) ([]tagLine, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []tagLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), "spec:") {
			out = append(out, tagLine{n, sc.Text()})
		}
	}
	return out, sc.Err()
}

// ownDir is this package, relative to the tree's root.
const ownDir = "internal/specmap"

// testTags attributes each tag line of a test file to the Test or Fuzz
// function whose doc comment or body holds it; a tag anywhere else in the
// file proves nothing and is dropped.
func testTags(p string) (map[string][]string, error) {
	lines, err := tagLines(p)
	if err != nil || len(lines) == 0 {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	type span struct {
		from, to int
		name     string
	}
	var spans []span
	for _, d := range file.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || !isTest(fd.Name.Name) {
			continue
		}
		from := fset.Position(fd.Pos()).Line
		if fd.Doc != nil {
			from = fset.Position(fd.Doc.Pos()).Line
		}
		spans = append(spans, span{from, fset.Position(fd.End()).Line, fd.Name.Name})
	}
	out := map[string][]string{}
	for _, l := range lines {
		name := ""
		for _, s := range spans {
			if l.n >= s.from && l.n <= s.to {
				name = s.name
				break
			}
		}
		if name == "" {
			continue
		}
		for _, id := range IDs(l.text) {
			out[id] = append(out[id], name)
		}
	}
	return out, nil
}

func isTest(name string) bool {
	for _, p := range []string{"Test", "Fuzz"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
