// Package cli implements the ctx command line (interfaces.md "CLI"): one
// struct per command, each with Run; dependencies are bound by kong.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// Exit codes: the one table (internal/exitcode, interfaces.md).
const (
	ExitOK          = exitcode.OK
	ExitRunError    = exitcode.RunError
	ExitUsage       = exitcode.Usage
	ExitUnavailable = exitcode.Unavailable
	ExitCancelled   = exitcode.Cancelled
)

// ExitError carries the process exit code.
type ExitError = exitcode.Error

// Exit wraps err with a code.
func Exit(code int, err error) error { return exitcode.With(code, err) }

// Env is what every command gets (bound with kong.Bind).
type Env struct {
	Ctx    context.Context
	Layout layout.Layout
	Stdin  *os.File
	Stdout io.Writer
	Stderr io.Writer
}

// CodeOf maps an error to the exit code.
func CodeOf(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, agentdef.ErrNoSuchAgent), errors.Is(err, agentdef.ErrInvalid), errors.Is(err, layout.ErrBadName),
		errors.Is(err, agentdef.ErrExists):
		return ExitUsage
	case errors.Is(err, client.ErrNoDaemon), errors.Is(err, ipc.ErrUnavailable):
		return ExitUnavailable
	}
	return ExitRunError
}

// connect ensures the daemon and dials the agent.
func connect(env *Env, agent string) (*client.Conn, error) {
	if err := layout.CheckName("agent", agent); err != nil {
		return nil, Exit(ExitUsage, err)
	}
	if !client.AgentExists(env.Layout, agent) {
		return nil, Exit(ExitUsage, fmt.Errorf("no such agent: %s", agent))
	}
	if c, err := client.DialAgentOnce(env.Ctx, env.Layout, agent); err == nil {
		return c, nil // the common case: the daemon is up; no extra ping
	}
	if err := client.EnsureDaemon(env.Ctx, env.Layout); err != nil {
		return nil, Exit(ExitUnavailable, err)
	}
	c, err := client.DialAgent(env.Ctx, env.Layout, agent)
	if err != nil {
		return nil, Exit(ExitUnavailable, err)
	}
	return c, nil
}

// CLI is the kong model.
type CLI struct {
	Version  kong.VersionFlag `help:"Print ctx's version and exit." short:"V"`
	Init     InitCmd          `cmd:"" help:"Create CTX_ROOT and install tsh and ctxterm under it. Example: ctx init"`
	Daemon   DaemonCmd        `cmd:"" help:"Run the per-user daemon in the foreground. Example: ctx daemon"`
	Agent    AgentCmd         `cmd:"" help:"Manage agents and talk to them. Example: ctx agent send demo hello"`
	Acp      AcpCmd           `cmd:"" name:"acp" help:"Serve an agent over the Agent Client Protocol on stdin/stdout, for an editor. Example: ctx acp demo"`
	Mcp      McpCmd           `cmd:"" name:"mcp" help:"MCP servers as tsh tools (SERVER.TOOL). Example: ctx mcp add fs -- mcp-server-filesystem /workspace"`
	Terminal TerminalCmd      `cmd:"" help:"Terminal resources of agent sessions. Example: ctx terminal status demo"`
	Provider ProviderCmd      `cmd:"" help:"Model providers: declare one, store its key, list them, test one. Example: ctx provider add anthropic"`
	Doctor   DoctorCmd        `cmd:"" help:"Check that this machine can run ctx safely; name the fix for each failure. Example: ctx doctor"`
	Logs     LogsCmd          `cmd:"" help:"Print the daemon's log (the journal when the systemd unit runs it). Example: ctx logs -f"`
	Ps       PsCmd            `cmd:"" help:"What is running now: active runs across agents and live terminals. Example: ctx ps"`
	Units    UnitsCmd         `cmd:"" name:"install-units" help:"Write the systemd user units (socket activation). Example: ctx install-units"`
	Compl    ComplCmd         `cmd:"" name:"completion" help:"Print a shell completion script. Example: source <(ctx completion bash)"`
	Cands    CandsCmd         `cmd:"" name:"__complete" hidden:"" help:"Completion candidates for the shell scripts."`
}

// AgentCmd groups the agent commands. spec: S2 — chat (send, chat, resume,
// cancel) speaks only to the agent socket; watch and attach only to the
// terminal's ctxterm socket; tools run through tsh inside the sandbox.
type AgentCmd struct {
	Create        AgentCreateCmd   `cmd:"" help:"Create an agent. Example: ctx agent create demo --exec ./demo-agent"`
	List          AgentListCmd     `cmd:"" help:"List agents. Example: ctx agent list"`
	Show          AgentShowCmd     `cmd:"" help:"Show an agent's definition. Example: ctx agent show demo"`
	Rm            AgentRmCmd       `cmd:"" help:"Remove an agent's definition (sessions are kept). Example: ctx agent rm demo"`
	Get           AgentGetCmd      `cmd:"" help:"Print a control file. Example: ctx agent get demo window"`
	Set           AgentSetCmd      `cmd:"" help:"Validate and atomically replace a control file. Example: ctx agent set demo approval ask"`
	Send          SendCmd          `cmd:"" help:"Send one message and print the answer. Example: ctx agent send demo what time is it"`
	Chat          ChatCmd          `cmd:"" help:"Interactive chat. Example: ctx agent chat demo"`
	Resume        ResumeCmd        `cmd:"" help:"Print a session's history and follow its active run. Example: ctx agent resume demo"`
	Sessions      SessionsCmd      `cmd:"" help:"List the agent's sessions with their state, runs and title (no daemon needed). Example: ctx agent sessions demo"`
	History       HistoryCmd       `cmd:"" help:"Print a session's transcript from its log (no daemon needed). Example: ctx agent history demo --session default"`
	RmSession     RmSessionCmd     `cmd:"" name:"rm-session" help:"Remove a session's files (refused while a run is active). Example: ctx agent rm-session demo old"`
	RenameSession RenameSessionCmd `cmd:"" name:"rename-session" help:"Give a session another name (refused while a run is active). Example: ctx agent rename-session demo default bugfix"`
	Cancel        CancelCmd        `cmd:"" help:"Cancel the active run of a session. Example: ctx agent cancel demo"`
	Diff          DiffCmd          `cmd:"" help:"What a run changed in its workspace (any tool, bash included). Example: ctx agent diff demo"`
	Undo          UndoCmd          `cmd:"" help:"Put back what a run changed in its workspace. Example: ctx agent undo demo"`
	Tsh           TshCmd           `cmd:"" help:"Run one tsh command through the runtime (no model). Example: ctx agent tsh demo -- list"`
	Prompt        PromptCmd        `cmd:"" help:"Print the prompt the next run would send. Example: ctx agent prompt demo"`
	Start         StartCmd         `cmd:"" help:"Start the agent's persistent terminal. Example: ctx agent start demo"`
	Stop          StopCmd          `cmd:"" help:"Stop the agent's persistent terminal. Example: ctx agent stop demo"`
	Watch         WatchCmd         `cmd:"" help:"Watch the agent's terminal (read-only). Example: ctx agent watch demo"`
	Attach        AttachCmd        `cmd:"" help:"Attach to the agent's terminal (read-write). Example: ctx agent attach demo"`
}

// TerminalCmd groups the terminal resource commands.
type TerminalCmd struct {
	Create TerminalCreateCmd `cmd:"" help:"Start an agent session's terminal and record the resource. Example: ctx terminal create demo"`
	Status TerminalStatusCmd `cmd:"" help:"Show terminal resources. Example: ctx terminal status demo"`
	Watch  WatchCmd          `cmd:"" help:"Watch a terminal (read-only). Example: ctx terminal watch demo"`
	Attach AttachCmd         `cmd:"" help:"Attach to a terminal (read-write). Example: ctx terminal attach demo"`
}
