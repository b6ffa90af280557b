package ipc

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cortexfs/ctx/internal/layout"
)

// Wire error codes (interfaces.md "Socket frames"; extras listed in the README).
const (
	CodeBadRequest         = "bad_request"
	CodeTooLarge           = "too_large"
	CodeUnknownAgent       = "unknown_agent"
	CodeBadName            = "bad_name"
	CodeIDConflict         = "id_conflict"
	CodeBusy               = "busy"
	CodeInvalidAgentOutput = "invalid_agent_output"
	CodeLimitExceeded      = "limit_exceeded"
	CodeInterrupted        = "interrupted"
	CodeDenied             = "denied"
	CodeWindowInvalid      = "window_invalid"
	CodeModelUnavailable   = "model_unavailable"
	CodeSandboxUnavailable = "sandbox_unavailable"
	// Additions.
	CodeAgentInvalid   = "agent_invalid"   // a control file of the definition is invalid
	CodeAgentFailed    = "agent_failed"    // the agent process could not be started
	CodeNotFound       = "not_found"       // cancel: no such active run
	CodeSessionCorrupt = "session_corrupt" // events.jsonl has a corrupt line in the middle
	CodeSlowClient     = "slow_client"     // this connection could not keep up and is dropped
	CodeInternal       = "internal"
	// CodeAgentTimeout: an acp-v1 agent did not answer initialize or
	// session/new within CTX_ACP_TIMEOUT.
	CodeAgentTimeout = "agent_timeout"
	CodeShuttingDown = "shutting_down" // the daemon is stopping: the request was not started, nothing recorded
	// CodeResourceExhausted: the machine ran out of descriptors, disk or
	// memory; nothing is corrupt and a later request may succeed.
	CodeResourceExhausted = "resource_exhausted"
	// CodeImageUnavailable: an image the message attaches could not be
	// read from the session's blob store as it was sent (missing, changed,
	// not an image, too large); the run fails, naming it.
	CodeImageUnavailable = "image_unavailable"
	// CodeNoImages: the agent takes no image input (an acp-v1 agent that
	// does not advertise promptCapabilities.image).
	CodeNoImages = "no_image_input"
	// CodeWorkspaceNotShared: a cluster node refuses a workspace outside
	// every shared prefix of its cluster file, before anything is recorded
	// (interfaces.md "Cluster (phase 1)").
	CodeWorkspaceNotShared = "workspace_not_shared"
	// CodeNotOwner: a cluster node was handed a session (by another node's
	// front door) that a third node owns now. The front door asks again;
	// a client sees it only when the owners keep moving (docs/cluster.md).
	CodeNotOwner = "not_owner"
)

// done statuses (interfaces.md: done's status).
const (
	StatusOK        = "ok"
	StatusError     = "error"
	StatusCancelled = "cancelled"
)

// Code maps an error to its wire code (STYLE habit 11: one function).
// The machine running out of a resource wins (nothing is wrong with the
// request, and a later one may succeed); then a code the error carries
// (WithCode, Errorf, a typed error's WireCode), so the code chosen where
// the error arose is the one sent; then the classes.
func Code(err error) string {
	if err == nil {
		return ""
	}
	if Exhausted(err) {
		return CodeResourceExhausted
	}
	var c interface{ WireCode() string }
	if errors.As(err, &c) {
		return c.WireCode()
	}
	switch {
	case errors.Is(err, ErrTooLarge):
		return CodeTooLarge
	case errors.Is(err, layout.ErrBadName):
		return CodeBadName
	case errors.Is(err, ErrBadRequest):
		return CodeBadRequest
	}
	return CodeInternal
}

// CodedError carries an explicit wire code.
type CodedError struct {
	C   string
	Err error
}

func (e *CodedError) Error() string    { return e.Err.Error() }
func (e *CodedError) Unwrap() error    { return e.Err }
func (e *CodedError) WireCode() string { return e.C }

// WithCode wraps err with a wire code.
func WithCode(code string, err error) error { return &CodedError{C: code, Err: err} }

// Errorf is an error carrying a wire code: ErrorFrame(run, Errorf(code, …))
// is how an error frame with a chosen code is built (one mapping, Code).
func Errorf(code, format string, args ...any) error {
	return &CodedError{C: code, Err: fmt.Errorf(format, args...)}
}

// ErrorFrame builds an error frame for err.
func ErrorFrame(run string, err error) *Frame {
	return &Frame{Type: TypeError, Run: run, Code: Code(err), Message: err.Error()}
}

// Exhausted reports whether err is the machine running out of a resource —
// descriptors (EMFILE, ENFILE), disk (ENOSPC, EDQUOT) or memory (ENOMEM) —
// rather than anything wrong with the data.
func Exhausted(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
