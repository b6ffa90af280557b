// Package fileerr is the error of a line-oriented control file: it names
// file:line (or the file alone) and wraps the sentinel of the file's kind,
// so callers test it with errors.Is (policy.ErrInvalid, tshrc.ErrInvalid).
package fileerr

import "fmt"

// Error is a refusal of a control file's content.
type Error struct {
	File string
	Line int // 0 when the error concerns the whole file
	Msg  string
	Kind error // what Unwrap returns: the file kind's sentinel
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }
