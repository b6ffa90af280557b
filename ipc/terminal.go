package ipc

import "github.com/cortexfs/ctx/internal/termres"

// System-socket ops for terminals (besides ping). A4 applies: the owner or uid 0.
const (
	OpTerminalStart  = "terminal.start"
	OpTerminalStop   = "terminal.stop"
	OpTerminalStatus = "terminal.status"
)

// TerminalRequest is a terminal op on the system socket:
//
//	{"op":"terminal.start","agent":"a","session":"default","workspace":"/abs/dir"}
//	{"op":"terminal.stop","agent":"a","session":"default"}
//	{"op":"terminal.status","agent":"a","session":"default"}
type TerminalRequest struct {
	Op        string `json:"op"`
	Agent     string `json:"agent"`
	Session   string `json:"session,omitempty"`
	Workspace string `json:"workspace,omitempty"`
}

// TerminalReply answers a terminal op: {"type":"terminal",...} or an error
// frame ({"type":"error","code":...,"message":...}).
type TerminalReply struct {
	Type     string           `json:"type"` // "terminal" or "error"
	Code     string           `json:"code,omitempty"`
	Message  string           `json:"message,omitempty"`
	Status   *termres.Status  `json:"status,omitempty"`
	Already  bool             `json:"already,omitempty"`
	Cleanup  *termres.Receipt `json:"cleanup,omitempty"`
	Launcher string           `json:"launcher,omitempty"`
}

// Wire codes of terminal ops (added to interfaces.md's list in the README).
const (
	CodeNotRunning   = "not_running"
	CodeTerminalBusy = CodeBusy // the same code as a busy session
	CodeStartFailed  = "terminal_failed"
)
