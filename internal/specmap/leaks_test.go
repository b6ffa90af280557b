package specmap

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noLeakCheck names the packages that start goroutines yet have no leak
// check, each with its reason.
var noLeakCheck = map[string]string{
	"e2e/attack":  "a program the e2e tests run inside the sandbox; it has no tests of its own",
	"e2e/mcpfake": "an MCP server the e2e tests start as a process; it has no tests of its own",
}

// TestEveryGoroutineHasAnOwner: every package whose code starts a
// goroutine checks in its tests that none is left running (goleak), so a
// goroutine nobody stops fails its package's tests.
func TestEveryGoroutineHasAnOwner(t *testing.T) {
	root, _ := filepath.Abs("../..")
	starts := map[string]bool{}
	checks := map[string]bool{}
	fset := token.NewFileSet()
	err := walkFiles(root, nil, func(p string, d fs.DirEntry) error {
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), `"go.uber.org/goleak"`) {
				checks[rel] = true
			}
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.GoStmt); ok {
				starts[rel] = true
				return false
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(starts) < 10 {
		t.Fatalf("found only %d packages that start goroutines: the walk is broken", len(starts))
	}
	for pkg := range starts {
		if checks[pkg] {
			continue
		}
		if _, ok := noLeakCheck[pkg]; ok {
			continue
		}
		t.Errorf("%s starts goroutines but no test of it uses goleak: add a leak_test.go with goleak.VerifyTestMain", pkg)
	}
	for pkg := range noLeakCheck {
		if !starts[pkg] || checks[pkg] {
			t.Errorf("noLeakCheck lists %s, which no longer needs the exception", pkg)
		}
	}
}
