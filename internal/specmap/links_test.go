package specmap

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is the anchor GitHub gives a heading.
func slug(h string) string {
	s := strings.ToLower(strings.TrimSpace(h))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// anchors lists the anchors of a Markdown file's headings.
func anchors(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRe.FindAllSubmatch(b, -1) {
		s := slug(string(m[1]))
		for n := 0; ; n++ { // a repeated heading gets -1, -2 …
			k := s
			if n > 0 {
				k += "-" + string(rune('0'+n))
			}
			if !out[k] {
				out[k] = true
				break
			}
		}
	}
	return out
}

// TestDocsLinksResolve: every relative link in the README and docs/ names
// a file of the repository and, with a #fragment, a heading in it — the
// README is the door, and a door to nowhere is worse than none.
func TestDocsLinksResolve(t *testing.T) {
	root, _ := filepath.Abs("../..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	if len(files) < 5 {
		t.Fatalf("only %d docs found", len(files))
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range linkRe.FindAllSubmatch(b, -1) {
			link := string(m[1])
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
				if !strings.HasPrefix(target, root) {
					continue // outside the repository (../shared/spec)
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %s: no such file", rel, link)
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s: link %s: %v", rel, link, err)
				continue
			}
			if !anchors(tb)[frag] {
				t.Errorf("%s: link %s: no heading with that anchor", rel, link)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d links checked: the scan is broken", checked)
	}
}
