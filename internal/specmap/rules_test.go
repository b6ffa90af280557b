package specmap

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestErrorFramesThroughCode: an error frame is built by ipc.ErrorFrame
// from an error (ipc.Errorf, ipc.WithCode, a typed error), never as a frame
// literal with a hand-picked code beside the one mapping (ipc.Code).
// spec: STYLE 11
func TestErrorFramesThroughCode(t *testing.T) {
	root, _ := filepath.Abs("../..")
	err := walkFiles(root, []string{"e2e"}, func(p string, d fs.DirEntry) error {
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

// TestNoTrackerNumbers: comments, docs and file names say what and why,
// with a spec id, never a number from an issue tracker outside the
// repository (history is in git log).
func TestNoTrackerNumbers(t *testing.T) {
	root, _ := filepath.Abs("../..")
	re := regexp.MustCompile(`\b[Ii]ssues? \d+\b`)
	err := walkFiles(root, nil, func(p string, d fs.DirEntry) error {
		rel, _ := filepath.Rel(root, p)
		text := strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".sh") ||
			d.Name() == "Makefile" || rel == filepath.Join(".ci", "run")
		if regexp.MustCompile(`(?i)issue_?\d`).MatchString(d.Name()) {
			t.Errorf("%s: a file named after a tracker entry", rel)
		}
		if !text {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(p, ".go") && !strings.Contains(line, "//") {
				continue
			}
			if re.MatchString(line) {
				t.Errorf("%s:%d cites a tracker number: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
