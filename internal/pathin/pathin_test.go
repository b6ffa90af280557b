package pathin

import (
	"path/filepath"
	"testing"
)

func TestRel(t *testing.T) {
	for _, c := range []struct {
		dir, p, rel string
		ok          bool
	}{
		{"/a", "/a", ".", true},
		{"/a", "/a/b/c", "b/c", true},
		{"/a", "/ab", "", false},
		{"/a/", "/a/b", "b", true},
		{"/a", "/a/../b", "", false},
		{"/a", "/a/b/../c", "c", true},
		{"/", "/x/y", "x/y", true},
		{"/", "/", ".", true},
		{"/a", "a/b", "", false},
		{"a", "/a/b", "", false},
		{"a", "a/b", "b", true},
		{".", "b", "b", true},
		{".", "../b", "", false},
		{"/a/b", "/a", "", false},
	} {
		rel, ok := Rel(c.dir, c.p)
		if rel != c.rel || ok != c.ok {
			t.Errorf("Rel(%q, %q) = %q %v, want %q %v", c.dir, c.p, rel, ok, c.rel, c.ok)
		}
		if Inside(c.p, c.dir) != c.ok {
			t.Errorf("Inside(%q, %q) != %v", c.p, c.dir, c.ok)
		}
	}
}

// FuzzRel: Rel agrees with filepath.Rel on absolute paths, and joining the
// answer back gives the cleaned path.
func FuzzRel(f *testing.F) {
	f.Add("/a", "/a/b")
	f.Add("/", "/x")
	f.Add("/a", "/ab")
	f.Fuzz(func(t *testing.T, dir, p string) {
		if !filepath.IsAbs(dir) || !filepath.IsAbs(p) {
			return
		}
		rel, ok := Rel(dir, p)
		want, err := filepath.Rel(dir, p)
		wantOK := err == nil && filepath.IsLocal(want) || want == "."
		if ok != wantOK {
			t.Fatalf("Rel(%q, %q) ok=%v, filepath.Rel says %q %v", dir, p, ok, want, err)
		}
		if ok && filepath.Join(dir, rel) != filepath.Clean(p) {
			t.Fatalf("Join(%q, %q) != %q", dir, rel, filepath.Clean(p))
		}
	})
}
