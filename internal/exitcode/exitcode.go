// Package exitcode is the one table of the exit statuses ctx, ctxd and tsh
// end with (interfaces.md "CLI": 0 done ok · 1 the run ended in error or
// was denied · 2 usage or invalid input · 3 daemon or socket unavailable ·
// 130 cancelled; tsh adds the shell's 126 and 127), and the error that
// carries one up to main.
package exitcode

import "fmt"

// The pinned statuses.
const (
	OK          = 0
	RunError    = 1   // the run ended in error or was denied; an operation failed
	Usage       = 2   // usage or invalid input (an invalid control file, a bad name)
	Unavailable = 3   // the daemon or its socket is unavailable
	NotAllowed  = 126 // tsh: a tool found but not allowed or not executable
	NotFound    = 127 // tsh: no such tool on CTX_PATH
	Cancelled   = 130 // the run was cancelled (Ctrl+C, SIGINT)
	// LostLease ends a cluster node that lost its lease or passed its
	// ownership deadline (interfaces.md "Cluster (phase 1)"): EX_TEMPFAIL,
	// so its service manager starts it again as a new member.
	LostLease = 75
)

// Error carries the process exit status of err.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// With wraps err with an exit status.
func With(code int, err error) error { return &Error{Code: code, Err: err} }
