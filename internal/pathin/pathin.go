// Package pathin decides, in one place, whether a path is inside a
// directory. The test is lexical on cleaned paths: a
// caller for whom symlinks matter passes resolved paths (EvalSymlinks,
// safefs.RealPath), as every caller in ctx does where authority depends
// on the answer.
package pathin

import (
	"path/filepath"
	"strings"
)

// Inside reports whether p is dir or below it. Both must be absolute, or
// both relative; otherwise the answer is false.
func Inside(p, dir string) bool {
	_, ok := Rel(dir, p)
	return ok
}

// Rel returns p relative to dir ("." when they are the same) when p is dir
// or below it; ok is false otherwise (also when one path is absolute and
// the other is not).
func Rel(dir, p string) (rel string, ok bool) {
	if filepath.IsAbs(p) != filepath.IsAbs(dir) {
		return "", false
	}
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	switch {
	case p == dir:
		return ".", true
	case dir == "/":
		return p[1:], true
	case dir == ".":
		if p == ".." || strings.HasPrefix(p, "../") {
			return "", false
		}
		return p, true
	case strings.HasPrefix(p, dir+"/"):
		return p[len(dir)+1:], true
	}
	return "", false
}
