package specmap

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorFramesThroughCode: an error frame is built by ipc.ErrorFrame
// from an error (ipc.Errorf, ipc.WithCode, a typed error), never as a frame
// literal with a hand-picked code beside the one mapping (ipc.Code).
// spec: STYLE 11
func TestErrorFramesThroughCode(t *testing.T) {
	root, _ := filepath.Abs("../..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "testdata", "node_modules", "e2e":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "{Type: ipc.TypeError,") && !strings.Contains(line, "Code: ipc.Code(") {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s:%d builds an error frame by hand: use ipc.ErrorFrame(run, ipc.Errorf(code, …))", rel, i+1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
