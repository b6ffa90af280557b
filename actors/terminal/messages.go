package terminal

import "github.com/cortexfs/ctx/internal/sandbox"

// Start asks for the terminal of the actor's (agent, session) to be running
// with Workspace (an absolute host directory) bound at /workspace.
// Answered with *StartResponse.
type Start struct{ Workspace string }

// StartResponse: the terminal's status once it runs; Already when a live
// terminal was found (its workspace is the one it was started with).
type StartResponse struct {
	Status  Status
	Already bool
	Err     error
}

// Stop asks for the live terminal to be stopped. Answered with
// *StopResponse once the process has ended and the cleanup receipt is written.
type Stop struct{}

// StopResponse carries the cleanup receipt.
type StopResponse struct {
	Cleanup Receipt
	Err     error
}

// StatusRequest asks for the status; answered with *StatusResponse.
type StatusRequest struct{}

// StatusResponse is the resource's status.
type StatusResponse struct {
	Status Status
	Err    error
}

// adopted: the launch receipt found at start was checked (err wraps ErrGone
// when its process is gone).
type adopted struct {
	rec   Receipt
	err   error
	none  bool      // there was no (readable) launch receipt: nothing to adopt
	shell *shellPin // its sandboxed process, pinned again (nil: not found)
}

// drop: the actor stopped before it got the message; the pin is let go of.
func (m *adopted) drop() { m.shell.release() }

// launched: a start finished (the launch receipt and agent.start event are
// written when err is nil).
type launched struct {
	rec   Receipt
	held  *sandbox.Held
	shell *shellPin
	err   error
}

// drop: the actor stopped before it got the message. The terminal lives on
// (the next actor adopts it); its pin is let go of, not used.
func (m *launched) drop() { m.shell.release() }

// ended: the process of rec is gone.
type ended struct {
	rec  Receipt
	exit Exit
	gone bool // found gone at adoption
}

// finished: the cleanup of an ended generation is recorded.
type finished struct {
	cleanup Receipt
	err     error // what of the end could not be recorded
}

// stopFailed: the launcher could not request the stop.
type stopFailed struct{ err error }
