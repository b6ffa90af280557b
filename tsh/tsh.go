// Package tsh is the agent's tool shell (spec: S6, K1–K6): it resolves
// tools only through CTX_PATH, checks every layer, executes exactly the
// checked file, and keeps the session's loaded/pinned tool context.
package tsh

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/toolpath"
)

// Exit statuses of tsh itself (a successful `tsh call` exits with the tool's).
const (
	ExitOK         = exitcode.OK
	ExitError      = exitcode.RunError // an operation failed (e.g. unpin of a tool not loaded)
	ExitUsage      = exitcode.Usage    // usage or configuration error (invalid .tshrc)
	ExitNotAllowed = exitcode.NotAllowed
	ExitNotFound   = exitcode.NotFound
)

// Execer runs a checked tool. Replace (non-interactive `call`) replaces the
// process image and returns only on failure; Run (the interactive prompt)
// starts a child and returns its exit status.
type Execer interface {
	Replace(t *toolpath.Tool, argv, env []string) error
	Run(t *toolpath.Tool, argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// Shell is one tsh invocation. Build it with New; tests replace fields.
type Shell struct {
	Env      Env
	Environ  []string // passed to tools as is (the sandbox made it the allowlist)
	Identity toolpath.Identity
	Stdin    io.Reader
	Stdout   io.Writer
	Stderr   io.Writer
	Exec     Execer
	// Budget is the tool-context budget of `tsh context` (DefaultContextBudget).
	Budget int

	interactive bool
	// childIn, childOut, childErr are the real terminal streams a tool gets
	// at the interactive prompt (Stdout/Stderr then write through the line editor).
	childIn  io.Reader
	childOut io.Writer
	childErr io.Writer
}

// New builds a Shell over the process environment and standard streams.
func New() (*Shell, error) {
	id, err := toolpath.CurrentIdentity()
	if err != nil {
		return nil, err
	}
	return &Shell{
		Env:      Env{Getenv: os.Getenv},
		Environ:  os.Environ(),
		Identity: id,
		Stdin:    os.Stdin,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Exec:     fdExecer{},
		Budget:   toolctx.DefaultContextBudget,
	}, nil
}

const usage = `usage:
  tsh list                     visible tools with descriptions
  tsh which NAME               the path NAME resolves to
  tsh call NAME [ARGS...]      run a tool (exits with its status)
  tsh load NAME...             add tools to the tool context
  tsh pin NAME                 load and protect from eviction
  tsh unpin NAME               remove the protection
  tsh unload NAME              remove from the tool context
  tsh context                  print the tool context text
  tsh                          interactive prompt (on a terminal)
`

// Run executes one command line (args without the program name) and returns
// the exit status. With no arguments and a terminal on stdin, it starts the
// interactive prompt.
func (s *Shell) Run(args []string) int {
	if len(args) == 0 {
		if isTerminal(s.Stdin) {
			return s.Prompt()
		}
		fmt.Fprint(s.Stderr, usage)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "list":
		return s.noArgs(cmd, rest, s.list)
	case "context":
		return s.noArgs(cmd, rest, s.context)
	case "which":
		return s.oneArg(cmd, rest, s.which)
	case "pin":
		return s.oneArg(cmd, rest, s.pin)
	case "unpin":
		return s.oneArg(cmd, rest, s.unpin)
	case "unload":
		return s.oneArg(cmd, rest, s.unload)
	case "load":
		if len(rest) == 0 {
			return s.usageError("load needs at least one NAME")
		}
		return s.load(rest)
	case "call":
		if len(rest) == 0 {
			return s.usageError("call needs a NAME")
		}
		return s.call(rest[0], rest[1:])
	case "help", "-h", "--help":
		fmt.Fprint(s.Stdout, usage)
		return ExitOK
	}
	return s.usageError(fmt.Sprintf("unknown command %q (tsh is not a host shell; run tools with tsh call NAME)", cmd))
}

func (s *Shell) usageError(msg string) int {
	fmt.Fprintf(s.Stderr, "tsh: %s\n", msg)
	if !s.interactive {
		fmt.Fprint(s.Stderr, usage)
	}
	return ExitUsage
}

func (s *Shell) noArgs(cmd string, rest []string, f func() int) int {
	if len(rest) != 0 {
		return s.usageError(cmd + " takes no arguments")
	}
	return f()
}

func (s *Shell) oneArg(cmd string, rest []string, f func(string) int) int {
	if len(rest) != 1 {
		return s.usageError(cmd + " takes exactly one NAME")
	}
	return f(rest[0])
}

// fail prints err and maps it to an exit status.
func (s *Shell) fail(err error) int {
	fmt.Fprintf(s.Stderr, "tsh: %v\n", err)
	switch {
	case errors.Is(err, ErrConfig):
		return ExitUsage
	case toolpath.LayerOf(err) != "":
		return toolpath.ExitCode(err)
	}
	return ExitError
}

// Resolve finds name on the search path and checks every layer tsh can see:
// the filesystem layers (toolpath) and, inside an agent view, the agent and
// tool policies (internal/policy). The caller owns the returned tool.
func (s *Shell) Resolve(name string) (*toolpath.Tool, error) {
	dirs, err := s.Env.SearchPath(s.Identity.UID)
	if err != nil {
		return nil, err
	}
	t, err := toolpath.Resolve(name, dirs, s.Identity)
	if err != nil {
		return nil, err
	}
	if d := s.decide(t.Name, t.Dir); !d.Allowed {
		t.Close()
		return nil, &toolpath.Refusal{Tool: name, Layer: d.Layer, Reason: d.Reason, Path: t.Path}
	}
	return t, nil
}

// decide applies the policies (spec: V3). Standalone (no agent view) there is
// no agent and no label, so policies do not apply; the filesystem layers do.
// Inside an agent view the agent policy and label come from
// CTX_ROOT/agent/<agent>.d/ when the view shows them; an unreadable or
// invalid file fails closed.
func (s *Shell) decide(tool, dir string) policy.Decision {
	if !s.Env.InAgentView() {
		return policy.Decision{Allowed: true, Reason: "standalone session"}
	}
	ctl := s.Env.agentControl()
	if ctl == "" {
		return policy.Decision{Layer: policy.LayerAgent, Reason: fmt.Sprintf("CTX_AGENT %q is not a valid agent name", s.Env.Getenv("CTX_AGENT"))}
	}
	// The runtime shows agent/<name>.d (policy, label) in every view; if it
	// is missing, the policy layer cannot be checked: fail closed.
	if st, err := os.Lstat(ctl); err != nil || !st.IsDir() {
		return policy.Decision{Layer: policy.LayerAgent, Reason: "agent control directory " + ctl + " is not visible, failing closed"}
	}
	label, err := policy.ReadLabel(filepath.Join(ctl, "label"))
	if err != nil {
		return policy.Decision{Layer: policy.LayerTool, Reason: "invalid label, failing closed: " + err.Error()}
	}
	return policy.DecideFiles(filepath.Join(ctl, "policy"), filepath.Join(dir, tool+".d", "policy"), tool, label)
}

func (s *Shell) list() int {
	dirs, err := s.Env.SearchPath(s.Identity.UID)
	if err != nil {
		return s.fail(err)
	}
	entries, err := toolpath.List(dirs, s.Identity)
	if err != nil {
		return s.fail(err)
	}
	for _, e := range entries {
		if e.Err != nil || !s.decide(e.Name, e.Dir).Allowed {
			continue // only tools this session could call are listed
		}
		if d := toolctx.Summary(e.Meta.Description); d != "" { // the first line; `load` adds the rest to the context
			fmt.Fprintf(s.Stdout, "%s\t%s\n", e.Name, d)
		} else {
			fmt.Fprintf(s.Stdout, "%s\n", e.Name)
		}
	}
	s.listMCP() // SERVER.TOOL of the declared MCP servers
	return ExitOK
}

// visibleNames lists the callable tool names (for completion).
func (s *Shell) visibleNames() []string {
	dirs, err := s.Env.SearchPath(s.Identity.UID)
	if err != nil {
		return nil
	}
	entries, _ := toolpath.List(dirs, s.Identity)
	var names []string
	for _, e := range entries {
		if e.Err == nil {
			names = append(names, e.Name)
		}
	}
	return names
}

func (s *Shell) which(name string) int {
	if t, ok, err := s.mcpTool(name); ok {
		if err != nil {
			return s.fail(err)
		}
		server, _, _ := strings.Cut(t.Name, ".")
		fmt.Fprintf(s.Stdout, "mcp:%s\n", server)
		return ExitOK
	}
	t, err := s.Resolve(name)
	if err != nil {
		return s.fail(err)
	}
	defer t.Close()
	fmt.Fprintln(s.Stdout, t.Path)
	return ExitOK
}

func (s *Shell) call(name string, args []string) int {
	if _, ok, _ := s.mcpTool(name); ok {
		// The host calls MCP servers; a tsh inside the sandbox cannot.
		s.fail(fmt.Errorf("%s is an MCP tool: the runtime calls it for a tool_call (tsh call %s … from the agent or ctx agent tsh), not from the terminal", name, name))
		return ExitNotAllowed
	}
	t, err := s.Resolve(name) // spec: K3, K4, V3 — every layer before exec
	if err != nil {
		return s.fail(err)
	}
	defer t.Close()
	argv := append([]string{name}, args...)
	if s.interactive {
		code, err := s.Exec.Run(t, argv, s.Environ, s.childIn, s.childOut, s.childErr)
		if err != nil {
			return s.fail(err)
		}
		return code
	}
	err = s.Exec.Replace(t, argv, s.Environ)
	s.fail(fmt.Errorf("exec %s: %w", t.Path, err))
	return ExitNotAllowed // found but could not be executed (e.g. ENOEXEC)
}

func (s *Shell) statePath() (string, error) { return s.Env.StatePath(s.Identity.UID) }

func (s *Shell) update(fn func(*toolctx.State) error) int {
	p, err := s.statePath()
	if err != nil {
		return s.fail(err)
	}
	if _, err := toolctx.UpdateState(p, fn); err != nil {
		return s.fail(err)
	}
	return ExitOK
}

// loaded resolves name (all layers) and returns its context entry. Loading a
// tool that could not run is refused: the context lists only callable tools.
func (s *Shell) loaded(name string) (toolctx.Loaded, error) {
	if t, ok, err := s.mcpTool(name); ok { // An MCP tool, with its compact schema
		if err != nil {
			return toolctx.Loaded{}, err
		}
		server, _, _ := strings.Cut(t.Name, ".")
		return toolctx.Loaded{Name: name, Description: t.ContextDescription(), Path: "mcp:" + server}, nil
	}
	t, err := s.Resolve(name)
	if err != nil {
		return toolctx.Loaded{}, err
	}
	defer t.Close()
	m, err := t.Meta()
	if err != nil {
		fmt.Fprintf(s.Stderr, "tsh: warning: %v\n", err) // metadata never decides authority
	}
	return toolctx.Loaded{Name: name, Description: m.Description, Path: t.Path}, nil
}

func (s *Shell) load(names []string) int {
	var add []toolctx.Loaded
	for _, n := range names {
		l, err := s.loaded(n)
		if err != nil {
			return s.fail(err) // nothing is loaded when one name fails
		}
		add = append(add, l)
	}
	return s.update(func(st *toolctx.State) error {
		for _, l := range add {
			st.Load(l)
		}
		return nil
	})
}

func (s *Shell) pin(name string) int {
	l, err := s.loaded(name)
	if err != nil {
		return s.fail(err)
	}
	l.Pinned = true
	return s.update(func(st *toolctx.State) error {
		if i := st.Find(name); i >= 0 {
			return st.Pin(name) // keep its load order
		}
		st.Load(l)
		return nil
	})
}

func (s *Shell) unpin(name string) int {
	if err := layout.CheckName("tool", name); err != nil {
		return s.fail(err)
	}
	return s.update(func(st *toolctx.State) error { return st.Unpin(name) })
}

func (s *Shell) unload(name string) int {
	if err := layout.CheckName("tool", name); err != nil {
		return s.fail(err)
	}
	return s.update(func(st *toolctx.State) error { return st.Unload(name) })
}

func (s *Shell) context() int {
	p, err := s.statePath()
	if err != nil {
		return s.fail(err)
	}
	st, err := toolctx.ReadState(p)
	if err != nil {
		return s.fail(err)
	}
	io.WriteString(s.Stdout, toolctx.ContextText(st, s.Budget)) // spec: K5 — exactly the tool_context text
	return ExitOK
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTerminalFd(int(f.Fd()))
}
