package run

import (
	"sync/atomic"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/internal/runprep"
	"github.com/cortexfs/ctx/ipc"
)

// Spec is one run: the props' input, fixed when the session starts it.
type Spec struct {
	Agent   string
	RunID   string
	ReqID   string
	Op      string // send | tsh
	Digest  string // the request's payload digest (recorded in start, P4)
	Session string
	Scope   string
	Input   string
	// Images are the images the input attaches (references into the
	// session's blob store, read when a model request is built).
	Images    []ipc.Image
	Args      []string // tsh op
	Workspace string
	Cwd       string
	// History is history_messages for the envelope: a JSON array string of
	// earlier runs' conversation, already bounded (X5).
	History string
	// HistoryMsgs is the same history as prompt messages, for the prompt
	// builder (runprep): the view `ctx agent prompt` renders too (R4).
	HistoryMsgs []runprep.Message
	// Attempts counts incarnations: a restarted run actor finds it above 1
	// and concludes the run as interrupted instead of running it again
	// (L4: a run never inherits a previous run's authority).
	Attempts *atomic.Int32
}

// Emit asks the session to append a frame of this run (sent to the parent).
type Emit struct {
	Frame *ipc.Frame
}

// Concluded tells the run its done frame is durable (X12): end every
// process (SIGTERM, grace, SIGKILL), record nothing more, then stop.
type Concluded struct{}

// Cancel asks the run to stop: cancelled + done, then Concluded follows.
type Cancel struct{}

// ApprovalNeeded asks the session to emit the approval_request frame and
// wait for the requesting connection's answer (A2). Sent to the parent.
type ApprovalNeeded struct {
	Run, CallID, Name string
	Args              []string
	MCP               *ipc.MCPCall // an MCP tool call: server, tool, arguments, hints
}

// ApprovalAnswer is the session's answer: decision is allow_once, deny,
// timeout, eof, malformed or mismatch.
type ApprovalAnswer struct {
	CallID, Decision string
	Reason           string // a deny's: it reaches the model as the call's result
}

// internal continuations

type defLoaded struct {
	def   *agentdef.Def
	err   error
	prep  *runprep.Prepared
	perr  error
	audit *audit
	// disp is a model run's dispatcher (providers.json re-read for the
	// run), or derr why it has none.
	disp *provider.Dispatcher
	derr error
}

// audited carries the run's host-code changes and the conclusion that
// waited for them.
// diskLow: the disk reserve watcher stops this run (its writable
// directories grow while CTX_ROOT's filesystem is below the reserve).
type diskLow struct{ msg string }

type audited struct {
	warnings   []string
	incomplete []string // directories whose end-of-run check a cut-short walk left partial
	f          *ipc.Frame
	status     string
}

// NoImagesError is the refusal of a send with images to an executable
// (sdk-envelope-v1) agent: its envelope has no place for them.
func NoImagesError(agent string) error {
	return ipc.Errorf(ipc.CodeBadRequest, "agent %s runs an executable; it takes no image input", agent)
}
