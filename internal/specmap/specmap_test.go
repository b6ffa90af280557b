package specmap

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/requirements.md's generated columns")

var rowRe = regexp.MustCompile(`^\| ([A-Z][0-9]+) \| ([^|]*) \|([^|]*)\|([^|]*)\|$`)

// TestRequirementsMap: docs/requirements.md lists every requirement with
// the code and tests that carry its tag, and each has both; when the
// spec's runtime.md is beside the repository, the ids match it.
func TestRequirementsMap(t *testing.T) {
	root, _ := filepath.Abs("../..")
	docPath := filepath.Join(root, "docs", "requirements.md")
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var ids []string
	for i, l := range lines {
		r := rowRe.FindStringSubmatch(l)
		if r == nil {
			continue
		}
		id := r[1]
		ids = append(ids, id)
		w := m[id]
		if w == nil || len(w.Code) == 0 {
			t.Errorf("%s: no code carries `spec: %s`", id, id)
		}
		if w == nil || len(w.Tests) == 0 {
			t.Errorf("%s: no test carries `spec: %s`", id, id)
		}
		if w == nil {
			continue
		}
		code, tests := quote(w.Code), strings.Join(w.Tests, ", ")
		if *update {
			lines[i] = "| " + id + " | " + strings.TrimSpace(r[2]) + " | " + code + " | " + tests + " |"
			continue
		}
		if strings.TrimSpace(r[3]) != code || strings.TrimSpace(r[4]) != tests {
			t.Errorf("%s: the map is stale (run go test ./internal/specmap -run TestRequirementsMap -update):\n have %s | %s\n want %s | %s",
				id, strings.TrimSpace(r[3]), strings.TrimSpace(r[4]), code, tests)
		}
	}
	if len(ids) < 70 {
		t.Fatalf("only %d requirement rows in %s", len(ids), docPath)
	}
	for id := range m {
		if !slices.Contains(ids, id) && len(m[id].Code) > 0 && looksLikeRequirement(id) {
			t.Logf("%s is tagged in %v but not a requirement of the map", id, m[id].Code)
		}
	}
	if spec, err := os.ReadFile(filepath.Join(root, "..", "shared", "spec", "runtime.md")); err == nil {
		var want []string
		for _, mm := range regexp.MustCompile(`(?m)^- \*\*([A-Z][0-9]+)\*\*`).FindAllStringSubmatch(string(spec), -1) {
			want = append(want, mm[1])
		}
		if !slices.Equal(want, ids) {
			t.Errorf("the map's ids differ from runtime.md's:\n map  %v\n spec %v", ids, want)
		}
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func looksLikeRequirement(id string) bool { return strings.ContainsAny(id[:1], "LSPXATBVWKUR") }

func quote(files []string) string {
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = "`" + f + "`"
	}
	return strings.Join(q, ", ")
}

// TestIDs: tag parsing, ranges included.
func TestIDs(t *testing.T) {
	for line, want := range map[string][]string{
		"// spec: X6":                      {"X6"},
		"// spec: X2–X5, X10":              {"X2", "X3", "X4", "X5", "X10"},
		"// spec: U2, A4 — only the owner": {"U2", "A4"},
		"// (runtime.md X8)":               nil,
		"// spec: K1-K3":                   {"K1", "K2", "K3"},
		"// spec: B1, D6":                  {"B1", "D6"},
	} {
		if got := IDs(line); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}

// TestArchitectureListsEveryPackage: the package table of
// docs/architecture.md (the one headed "| group | packages |") names every
// directory under internal/ (its packages' parents) and no package that
// does not exist, so the list a newcomer reads matches the tree.
func TestArchitectureListsEveryPackage(t *testing.T) {
	root, _ := filepath.Abs("../..")
	const doc = "docs/architecture.md"
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n| group | packages |\n")
	if !ok {
		t.Fatal(doc + " has no package table (| group | packages |)")
	}
	listed := map[string]bool{}
	name := regexp.MustCompile("`([a-z][a-z0-9]*)`")
	for _, l := range strings.Split(table, "\n") {
		if !strings.HasPrefix(l, "|") {
			break // the table ends at its first line that is not a row
		}
		cells := strings.Split(l, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[2], -1) {
			listed[m[1]] = true
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, "internal"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && !listed[e.Name()] {
			t.Errorf("internal/%s is not in %s's package table", e.Name(), doc)
		}
		delete(listed, e.Name())
	}
	for n := range listed {
		t.Errorf("%s's package table lists %s, which is not a directory under internal/", doc, n)
	}
}

// TestScanCountsNoFixture: only a Test or Fuzz function holding a tag is a
// proof; this package's own parser cases, a helper, a benchmark, an
// example and testdata are not.
func TestScanCountsNoFixture(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("internal/specmap/specmap_test.go", "package specmap\n\n// spec: X1\nfunc TestIDs(t *testing.T) { _ = \"// spec: X1\" }\n")
	write("internal/specmap/specmap.go", "package specmap\n\n// spec: X1\n")
	write("a/a.go", "package a\n\n// spec: X1\nfunc f() {}\n")
	write("a/testdata/x_test.go", "package a\n\n// spec: X1\nfunc TestData(t *testing.T) {}\n")
	write("a/a_test.go", `package a

// spec: X1
var seeds = []string{"a"}

// spec: X1
func helper() {}

// spec: X1
func BenchmarkF(b *testing.B) {}

// spec: X1
func ExampleF() {}

// TestF proves it. spec: X1
func TestF(t *testing.T) {}

func FuzzF(f *testing.F) {
	f.Add("x") // spec: X1
}
`)
	m, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	w := m["X1"]
	if w == nil {
		t.Fatal("X1 not found")
	}
	if !slices.Equal(w.Code, []string{"a/a.go"}) {
		t.Errorf("code %v, want [a/a.go]", w.Code)
	}
	if !slices.Equal(w.Tests, []string{"FuzzF", "TestF"}) {
		t.Errorf("tests %v, want [FuzzF TestF]", w.Tests)
	}
}
