// Package runprep prepares one run of an agent: it resolves the context
// window per model candidate (runtime.md W4–W7), renders the prompt through
// package prompt (R1–R5, W8–W10) and computes the agent's window environment;
// the run actor and `ctx agent prompt` call the same Prepare (R4).
//
// # Window resolution
//
// The `window` control file is parsed on every call (W2) and never rewritten;
// a missing or invalid file is a *WindowError (wire code window_invalid).
// The `model` file lists candidates, preferred first. Each candidate from
// Input.Skip onwards is re-checked (W6, window.ForCandidate): with `auto` it
// is usable and its window is its known limit, or unknown; with an explicit
// number it is usable only when its limit is known and not below the number.
// The first usable candidate is selected; the unusable ones before it are
// returned in Prepared.Skipped, one `candidate` frame (status `unusable`)
// each. When no candidate is usable the error is a *WindowError listing them.
//
// An executable agent without `.d/model` has no candidate, so its window is
// unknown (interfaces.md "Model agents": "without one its window is
// unknown"). An explicit number there is not honoured: W5 makes an explicit
// number valid only when the model's limit is known, `ctx agent create` and
// `ctx agent set` refuse that state (window.SetWindowAndModel), and a hand
// edit into it fails the run with window_invalid rather than claim a limit
// no model backs — the file is left as it is.
//
// The model-limit table is models.Load(CTX_ROOT): the built-in table and the
// user's models.tsv. A malformed models.tsv fails the run with window_invalid
// too, since no limit can be trusted until it is fixed.
//
// # Prompt
//
// The selected window feeds prompt.Build; its Hash (Prepared.PromptHash) is
// what a run records in its `start` frame and `ctx agent prompt` prints. Both
// derive the same inputs from the same definition, session and workspace:
// control dir, the view cwd mapped back to the host, the workspace, agent
// home and CTX_HOME, the session's history (History) and tool context
// (ToolContext). For executable agents the history view is further capped at
// the envelope's 64 KiB (X5) so the hash matches what the agent is sent.
//
// Snapshots (R5) are written best effort into the session directory after a
// successful build; their error is returned in Prepared.SnapshotErr and never
// fails the run.
package runprep

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cortexfs/ctx/internal/pathin"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/models"
	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/window"
	"github.com/cortexfs/ctx/ipc"
)

// Message is one history message, the format prompt.Build takes.
type Message = prompt.Message

// Input is everything one preparation reads besides files.
type Input struct {
	Layout layout.Layout
	Def    *agentdef.Def // loaded for this run (control files are re-read per run, U6)

	SessionDir string // host session directory; "" = none (no snapshots)
	Workspace  string // host directory bound at /workspace; "" = none
	// Cwd is the request's working directory inside the view; "" means the
	// default, resolved exactly as the sandbox does (sandbox.View.WorkDir).
	Cwd string

	// ToolState is the session's tsh state (see ToolState): the tool
	// context is rendered from it, unpinned tools evicted first (K5). When
	// nil, ToolContext is used as text.
	ToolState   *toolctx.State
	ToolContext string      // the session's tool context text (see ToolContext)
	History     []Message   // durable history before Input, oldest first (see History)
	Input       string      // the current input
	Images      []ipc.Image // the images the input attaches (references)
	Time        time.Time   // the build time

	// Placeholders renders for `ctx agent prompt` (spec: R4): the input and
	// time become explicit placeholders. HistoryAbsent additionally shows the
	// history as a placeholder, for a caller that cannot read it.
	Placeholders  bool
	HistoryAbsent bool

	// Skip is the number of leading candidates already tried and failed at
	// the provider (W6 status `failed`); they are not considered again.
	Skip int
}

// Candidate is one model candidate as checked for this run (W6).
type Candidate struct {
	Model  string
	Tokens uint32 // effective window with this candidate, when Known
	Known  bool
	Usable bool
	Reason string // why the candidate is unusable; "" when usable
}

// Prepared is the outcome of Prepare.
type Prepared struct {
	// Model is the selected candidate; "" for an executable agent without
	// `.d/model`. Selected is its index in Candidates (-1 when none).
	Model    string
	Selected int
	// Tokens is the effective window (W4) when Known.
	Tokens uint32
	Known  bool
	// Env holds CTX_CONTEXT_WINDOW_TOKENS and CTX_CONTEXT_WINDOW_CHARS
	// exactly when the window is known, and is nil when it is not (W7, W10).
	Env map[string]string
	// Candidates are all of the definition's candidates, in order, each
	// checked against the window (those before Input.Skip are not checked
	// and reported with Reason "skipped").
	Candidates []Candidate
	// Skipped are the unusable candidates between Input.Skip and Selected:
	// emit one `candidate` frame with status `unusable` for each (W6).
	Skipped []Candidate
	// Prompt is the rendered prompt: Messages(), Sections, Warnings, Hash.
	Prompt *prompt.Result
	// SnapshotErr is the best-effort snapshot write error (R5), for the log.
	SnapshotErr error

	src *prompt.Sources // what the build read, for Render
	pin prompt.Inputs
}

// Render renders one later dispatch of this run from the sources read by
// Prepare (U6: control files are not re-read within a run): with the
// window of candidate c (W6 — the candidate's own budget), the tool context
// as it is now (tools; nil keeps the one Prepare used) and
// the run's own turns so far (W8: every dispatch fits).
// An unusable candidate is an error naming its reason; a prompt that cannot
// fit is a *BudgetError.
func (p *Prepared) Render(c Candidate, tools *toolctx.State, turns [][]Message) (*prompt.Result, error) {
	if !c.Usable && c.Model != "" {
		return nil, fmt.Errorf("candidate %s: %s", c.Model, c.Reason)
	}
	in := p.pin
	in.WindowTokens, in.WindowKnown = c.Tokens, c.Known
	if tools != nil {
		in.ToolState, in.ToolContext = tools, ""
	}
	in.Turns = turns
	res, err := p.src.Render(in)
	var be *prompt.BudgetError
	if errors.As(err, &be) {
		return nil, &BudgetError{Model: c.Model, Tokens: c.Tokens, Err: be} // spec: W8
	}
	return res, err
}

// Selection is the candidate Prepare selected, as a Candidate (for an
// executable agent without `.d/model`: the unknown window).
func (p *Prepared) Selection() Candidate {
	return Candidate{Model: p.Model, Tokens: p.Tokens, Known: p.Known, Usable: true}
}

// PromptHash is the content hash as recorded in a run's `start` frame and
// printed by `ctx agent prompt`: "sha256:" and the hex digest.
func (p *Prepared) PromptHash() string { return "sha256:" + p.Prompt.Hash }

// Error classes. Both typed errors below also carry their wire code
// (WireCode), so ipc.Code and ipc.ErrorFrame map them without a switch.
var (
	// ErrWindowInvalid: the window cannot be determined honestly — the
	// `window` file is missing or invalid (W2), no candidate satisfies the
	// invariant (W5, W6), or models.tsv is malformed. Wire code window_invalid.
	ErrWindowInvalid = errors.New("window invalid")
	// ErrLimitExceeded: the parts of the prompt that are never cut do not fit
	// the input budget (W8, W9). Wire code limit_exceeded.
	ErrLimitExceeded = errors.New("prompt exceeds the context window")
	// ErrPrompt: a prompt control file (system.md, prompt.template.md) could
	// not be read. Wire code agent_invalid.
	ErrPrompt = errors.New("prompt control file unusable")
)

// WindowError says why a run cannot use its window. It never comes with a
// changed control file.
type WindowError struct {
	Agent string
	// File is the host path of the file to fix: the window control file, or
	// $CTX_ROOT/models.tsv.
	File string
	// Candidates, when the cause is that no candidate is usable (W6): emit a
	// `candidate` frame with status `unusable` for each one with !Usable.
	Candidates []Candidate
	Err        error // wraps window.ErrInvalid, window.ErrInvariant or models.ErrMalformed
}

func (e *WindowError) Error() string {
	fix := ""
	if filepath.Base(e.File) == window.WindowFile {
		fix = fmt.Sprintf(" (fix it with: ctx agent set %s window auto)", e.Agent)
	}
	return fmt.Sprintf("%s: %v%s", e.File, e.Err, fix)
}

// Unwrap makes errors.Is hold for ErrWindowInvalid and for the cause.
func (e *WindowError) Unwrap() []error { return []error{ErrWindowInvalid, e.Err} }

// WireCode is window_invalid.
func (e *WindowError) WireCode() string { return ipc.CodeWindowInvalid }

// BudgetError: the prompt does not fit the selected window (W8).
type BudgetError struct {
	Model  string
	Tokens uint32
	Err    *prompt.BudgetError
}

func (e *BudgetError) Error() string {
	m := ""
	if e.Model != "" {
		m = " of " + e.Model
	}
	return fmt.Sprintf("%v (window %d tokens%s)", e.Err, e.Tokens, m)
}

// Unwrap makes errors.Is hold for ErrLimitExceeded and prompt.ErrOverBudget.
func (e *BudgetError) Unwrap() []error { return []error{ErrLimitExceeded, e.Err} }

// WireCode is limit_exceeded.
func (e *BudgetError) WireCode() string { return ipc.CodeLimitExceeded }

type promptError struct{ err error }

func (e *promptError) Error() string    { return e.err.Error() }
func (e *promptError) Unwrap() []error  { return []error{ErrPrompt, e.err} }
func (e *promptError) WireCode() string { return ipc.CodeAgentInvalid }

// Prepare resolves the window and renders the prompt for one run. It reads
// the `window` control file from in.Def (never writes it), the model-limit
// table, and the prompt's control and rule files; it writes only the R5
// snapshots. Errors are a *WindowError, a *BudgetError, or wrap ErrPrompt.
func Prepare(in Input) (*Prepared, error) {
	def := in.Def
	if def == nil {
		return nil, errors.New("runprep: no definition")
	}
	p, err := resolveWindow(in)
	if err != nil {
		return nil, err
	}
	if p.Known {
		p.Env = window.Env(p.Tokens) // spec: W7
	} // spec: W10 — unknown: neither variable

	viewCwd := sandbox.View{Layout: in.Layout, Def: def, Workspace: in.Workspace, Cwd: in.Cwd}.WorkDir()
	pin := prompt.Inputs{
		ControlDir:    def.Control,
		Cwd:           hostPath(in.Layout, def.Name, in.Workspace, viewCwd),
		AgentHome:     prompt.Dir{Host: in.Layout.AgentHome(def.Name), View: layout.SandboxHome},
		CtxHome:       prompt.Dir{Host: in.Layout.UserHome(), View: layout.SandboxRoot + "/home/" + strconv.Itoa(in.Layout.UID)},
		ToolState:     in.ToolState,
		ToolContext:   in.ToolContext,
		History:       in.History,
		Input:         in.Input,
		Images:        in.Images,
		Time:          in.Time,
		WindowTokens:  p.Tokens,
		WindowKnown:   p.Known,
		Placeholders:  in.Placeholders, // spec: R4
		HistoryAbsent: in.Placeholders && in.HistoryAbsent,
	}
	if in.Workspace != "" {
		pin.Workspace = prompt.Dir{Host: in.Workspace, View: layout.SandboxWorkspace}
	}
	if def.Kind == agentdef.KindExec {
		// spec: X5 — history_messages is at most 64 KiB; the hash must
		// describe the history the agent is actually sent.
		pin.HistoryMaxChars = envelope.MaxContext
	}
	src, err := prompt.Collect(pin) // spec: R1 R4 — the one renderer
	if err != nil {
		return nil, &promptError{fmt.Errorf("agent %q: %w", def.Name, err)}
	}
	p.src, p.pin = src, pin
	res, err := p.Render(p.Selection(), nil, nil)
	if err != nil {
		return nil, err
	}
	p.Prompt = res
	if in.SessionDir != "" {
		p.SnapshotErr = prompt.WriteSnapshots(in.SessionDir, res.Rules, res.Skills) // spec: R5 — best effort
	}
	return p, nil
}

// resolveWindow applies W2 and W4–W6 to the definition.
func resolveWindow(in Input) (*Prepared, error) {
	def := in.Def
	wfile := filepath.Join(def.Control, window.WindowFile)
	if def.Window == nil { // spec: W1 — every agent has a window file
		return nil, &WindowError{Agent: def.Name, File: wfile,
			Err: fmt.Errorf("window: control file is missing: %w", window.ErrInvalid)}
	}
	v, err := window.Parse(def.Window) // spec: W2 — a hand edit is reported, never rewritten
	if err != nil {
		return nil, &WindowError{Agent: def.Name, File: wfile, Err: err}
	}
	p := &Prepared{Selected: -1}
	if len(def.Models) == 0 {
		// An executable agent without .d/model: no candidate, window unknown.
		if err := window.CheckInvariant(v, 0, false); err != nil { // spec: W5
			return nil, &WindowError{Agent: def.Name, File: wfile,
				Err: fmt.Errorf("%w; an agent without .d/model has no known limit", err)}
		}
		return p, nil
	}
	table, err := models.Load(in.Layout.Root)
	if err != nil {
		return nil, &WindowError{Agent: def.Name, File: filepath.Join(in.Layout.Root, models.UserFile), Err: err}
	}
	p.Candidates = make([]Candidate, len(def.Models))
	for i, m := range def.Models {
		c := Candidate{Model: m}
		if i < in.Skip {
			c.Reason = "skipped"
			p.Candidates[i] = c
			continue
		}
		tokens, known, err := window.ForCandidate(v, m, table) // spec: W6
		if err != nil {
			c.Reason = err.Error()
		} else {
			c.Usable, c.Tokens, c.Known = true, tokens, known
		}
		p.Candidates[i] = c
	}
	for i := max(in.Skip, 0); i < len(p.Candidates); i++ {
		c := p.Candidates[i]
		if !c.Usable {
			p.Skipped = append(p.Skipped, c)
			continue
		}
		p.Selected, p.Model, p.Tokens, p.Known = i, c.Model, c.Tokens, c.Known
		return p, nil
	}
	why := "no model candidate is usable with window " + v.String()
	if in.Skip >= len(def.Models) {
		why = "every model candidate has been tried"
	}
	return nil, &WindowError{Agent: def.Name, File: wfile, Candidates: p.Candidates,
		Err: fmt.Errorf("%s: %w", why, window.ErrInvariant)}
}

// hostPath maps a view path to the host: /workspace/… to the workspace,
// /home/agent/… to the agent home, /ctx/… to CTX_ROOT. Anything else is not
// part of the agent's own view of files, and maps to "" (no project rules).
func hostPath(l layout.Layout, agent, workspace, view string) string {
	view = filepath.Clean(view)
	under := func(root string) (string, bool) {
		rel, ok := pathin.Rel(root, view)
		if rel == "." {
			rel = ""
		}
		return rel, ok
	}
	if workspace != "" {
		if rel, ok := under(layout.SandboxWorkspace); ok {
			return filepath.Join(workspace, rel)
		}
	}
	if rel, ok := under(layout.SandboxHome); ok {
		return filepath.Join(l.AgentHome(agent), rel)
	}
	if h, ok := l.HostPath(view); ok {
		return h
	}
	return ""
}
