// Package ident checks the short names ctx accepts — agent, tool, session
// and MCP server names, request ids — without regexp. A pattern such as
// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$` compiles, at package init, into a
// program of hundreds of instructions (over 2,000 allocations), and the
// ctx client pays every such init before any command runs.
package ident

// Class is a set of bytes.
type Class [256]bool

// NewClass makes the class of ranges, written as in a regexp bracket
// expression: "A-Za-z0-9._-" (a '-' first or last is itself).
func NewClass(ranges string) *Class {
	var c Class
	for i := 0; i < len(ranges); i++ {
		if i+2 < len(ranges) && ranges[i+1] == '-' {
			for b := int(ranges[i]); b <= int(ranges[i+2]); b++ {
				c[b] = true
			}
			i += 2
			continue
		}
		c[ranges[i]] = true
	}
	return &c
}

// Has reports whether b is in c.
func (c *Class) Has(b byte) bool { return c[b] }

// Valid reports whether s is one byte of first followed by at most max
// bytes of rest (max < 0: any number).
func Valid(s string, first, rest *Class, max int) bool {
	if s == "" || !first[s[0]] || (max >= 0 && len(s)-1 > max) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest[s[i]] {
			return false
		}
	}
	return true
}
