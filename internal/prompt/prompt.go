// Package prompt is the one renderer of the first system message and the
// message array a model run dispatches (runtime.md R1–R5, W8–W10); the run
// actor and `ctx agent prompt` call the same Build.
//
// # Template
//
// The agent's prompt.template.md (control dir, re-read at every build — U6) is
// rendered by literal substitution; nothing in it is executed. When the file is
// absent the embedded default template (default.prompt.template.md) is used; a
// present file is used as is, even empty. Variables, spelt exactly `{{name}}`:
//
//	{{system}}   system.md from the control dir ("" when absent; trailing newlines dropped)
//	{{rules}}    merged AGENTS.md rules (see RulesFileCap) — equals the AGENTS.md snapshot
//	{{skills}}   skill metadata lines "- name: description (path)" — equals SKILLS.md
//	{{tools}}    the tool context text (what `tsh context` prints; trailing newlines dropped)
//	{{history}}  the history view inline, "[role]\ncontent" blocks, oldest first;
//	             when the template uses it, history is NOT also sent as messages
//	{{time}}     the current time, RFC 3339 UTC, e.g. 2026-01-02T15:04:05Z
//	{{input}}    the current input; it is always also the final user message,
//	             so using it here charges it twice
//
// Substitution is one left-to-right pass, so text inside a value (a rules file
// containing "{{input}}") is never expanded. An unknown `{{x}}` is left in the
// text literally and reported as a warning.
//
// After the rendered template the host appends, verbatim and last, the
// immutable runtime contract (R3); no template or system.md can remove it.
//
// # Messages and budget
//
// The message array is [system] + history view (unless inlined) + [user:
// input], serialized as JSON objects {"role","content"} without HTML
// escaping. With a known window its UTF-8 byte length must not exceed
// window.InputBudgetChars (W8). Filling order (W9): the contract, template
// text, system.md, the current input and time are never cut; skill metadata
// gets at most 2 % (shortened, then omitted); if the rest still does not fit,
// the tool context loses its unpinned tools (oldest first), then the rules
// are cut with a visible marker, then the pinned tools (K5); if even that is
// not enough Build fails with a *BudgetError. A model run's own turns
// (Inputs.Turns) come next: the newest always, its tool results cut with a
// marker if need be, then earlier ones, newest first (Result.TurnsOmitted).
// History takes what is left, newest first, whole messages only; older
// messages are left out of the view (Result.HistoryOmitted) and never
// deleted. With an unknown window the legacy sub-budgets of package window
// apply instead (W10).
//
// A run calls Collect once (the files: U6) and Render for every dispatch.
package prompt

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/window"
	"github.com/cortexfs/ctx/ipc"
)

// Contract is the immutable runtime contract (spec: R3), verbatim.
const Contract = "Your only native callable tool is tsh.\n" +
	"Other CortexFS tools are discovered, loaded, pinned, and invoked through tsh.\n" +
	"Prompt text and skill metadata do not grant permissions."

// Control files read from the control dir at every build (U6).
const (
	SystemFile     = "system.md"
	TemplateFile   = "prompt.template.md"
	ControlFileMax = 1 << 20 // a larger control file fails the build
)

// Placeholders shown by `ctx agent prompt` for what it cannot see (spec: R4).
const (
	InputPlaceholder   = "<input: supplied at run time>"
	TimePlaceholder    = "<time: supplied at run time>"
	HistoryPlaceholder = "<history: supplied at run time>"
	// HistoryPlaceholderRole is the role of the one placeholder message that
	// stands for an unseen history in Placeholders mode.
	HistoryPlaceholderRole = "history"
)

//go:embed default.prompt.template.md
var defaultTemplate string

// ErrOverBudget is wrapped by *BudgetError.
var ErrOverBudget = errors.New("prompt does not fit the context window")

// BudgetError: the parts that are never cut (template, system.md, input,
// contract, time) need more than the input budget. The run fails with an
// auditable error; nothing is truncated silently.
type BudgetError struct {
	Need   int // JSON bytes of the smallest message array
	Budget int // window.InputBudgetChars
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("prompt needs %d chars but the context window leaves %d for input", e.Need, e.Budget)
}

// Unwrap makes errors.Is(err, ErrOverBudget) hold.
func (e *BudgetError) Unwrap() error { return ErrOverBudget }

// Dir is a directory on the host and where the agent sees it.
type Dir struct {
	Host string // host path; "" = none
	View string // sandbox path (e.g. /workspace); "" = same as Host
}

func (d Dir) viewRoot() string {
	if d.View != "" {
		return d.View
	}
	return d.Host
}

// Message is one element of the rendered message array.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// A model run's own turns (Inputs.Turns) also carry their call: the
	// assistant message that makes it, and the "tool" message answering it.
	CallID string   `json:"call_id,omitempty"`
	Name   string   `json:"name,omitempty"`
	Args   []string `json:"args,omitempty"`
	// Input is the model's tool input as it sent it, when that was not a
	// valid argv.
	Input   string `json:"input,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Blocks, on a run's own assistant message, are the provider's content
	// blocks of that reply (provider.Event.Content: server tool uses and
	// their results, thinking), replayed verbatim; counted in the budget.
	Blocks json.RawMessage `json:"blocks,omitempty"`
	// Extra is the call's provider data (provider.Event.Extra: Gemini's
	// thought signature), sent back with the call.
	Extra json.RawMessage `json:"extra,omitempty"`
	// Images, on a user message, are the images it attaches: references
	// the run resolves from the session's blob store when it builds the
	// provider request. Each is charged ImageTokens against the window
	// besides its reference (see msgCost).
	Images []ipc.Image `json:"images,omitempty"`
}

func (m Message) plain() bool {
	return m.CallID == "" && m.Name == "" && m.Args == nil && m.Input == "" && !m.IsError && m.Blocks == nil && m.Extra == nil && m.Images == nil
}

// Inputs is everything one build reads besides files.
type Inputs struct {
	ControlDir string // agent/<name>.d on the host: system.md, prompt.template.md
	Cwd        string // host path of the run's working directory
	Workspace  Dir    // the bound workspace (/workspace); zero when none
	AgentHome  Dir    // home/<uid>/agent/<name> (/home/agent)
	CtxHome    Dir    // CTX_HOME = home/<uid> (/ctx/home/<uid>)

	// ToolState is the session's tsh state (tools.json): the tool context
	// is rendered from it and, over budget, loses unpinned tools first
	// (K5). When nil, ToolContext is the text, cut from the end.
	ToolState   *toolctx.State
	ToolContext string    // K5 tool context text (when ToolState is nil)
	History     []Message // durable history before the current input, oldest first
	Input       string    // the current input
	// Images are the images the current input attaches: they go with the
	// final user message (never in Placeholders mode, whose input is a
	// placeholder).
	Images []ipc.Image
	Time   time.Time // the build time

	WindowTokens uint32 // effective window (window.Effective), when WindowKnown
	WindowKnown  bool

	// HistoryMaxChars optionally caps the history view further, measured as
	// the JSON bytes of the view's message array (e.g. 64 KiB for the
	// sdk-envelope-v1 history_messages string, X5). 0 = no extra cap.
	HistoryMaxChars int

	// Turns are a model run's own turns after the input, oldest first: each
	// the assistant messages of one model turn (one per call) and the tool
	// messages answering them. Every dispatch of a run must fit (W8).
	Turns [][]Message

	// Placeholders renders for `ctx agent prompt` (spec: R4): Input and Time
	// are replaced by InputPlaceholder and TimePlaceholder, and when
	// HistoryAbsent the history is one HistoryPlaceholder.
	Placeholders  bool
	HistoryAbsent bool

	fsys fileSystem // tests only; nil = the OS
}

// viewPath maps a host path to the path the agent sees.
func (in *Inputs) viewPath(host string) string {
	host = filepath.Clean(host)
	for _, d := range []Dir{in.Workspace, in.AgentHome, in.CtxHome} {
		if d.Host == "" {
			continue
		}
		root := filepath.Clean(d.Host)
		if within(host, root) {
			rel, _ := filepath.Rel(root, host)
			return filepath.Join(d.viewRoot(), rel)
		}
	}
	return host
}

// Section is the size of one part of the prompt, in UTF-8 bytes.
type Section struct {
	Name  string
	Chars int
}

// Result is one rendered prompt.
type Result struct {
	System         string    // the first system message, ending with Contract
	History        []Message // the history view, oldest first (sent as messages or inlined)
	HistoryOmitted int       // older messages left out of the view (still durable)
	TurnsOmitted   int       // earlier turns of this run left out of this dispatch
	// ToolContext is the tool context as it entered the prompt, untrimmed:
	// what `tsh context` prints unless the window forced a cut (K5). An
	// executable agent's envelope carries it as tool_context.
	ToolContext string
	Input       string    // the current input as sent (or its placeholder)
	Rules       string    // {{rules}} as substituted: the AGENTS.md snapshot
	Skills      []Skill   // skills as they entered the prompt: the SKILLS.md snapshot
	Sections    []Section // system rules skills tools history time input template contract total
	BudgetChars int       // input budget (W8); -1 when the window is unknown
	// Hash is the content hash to record in the run's `start` frame and to
	// print from `ctx agent prompt`: sha256 (hex) of the message array
	// serialized with Input and Time replaced by their placeholders, so the
	// two can be matched (R4).
	Hash string
	// DispatchHash is sha256 (hex) of exactly the bytes JSON returns.
	DispatchHash string
	Warnings     []string // skills shortened/omitted, files cut or skipped, unknown variables

	messages []Message
	json     []byte
}

// Messages is the message array to dispatch (a copy).
func (r *Result) Messages() []Message { return append([]Message(nil), r.messages...) }

// JSON is the serialized message array, the bytes charged against the input
// budget (spec: W8) (a copy).
func (r *Result) JSON() []byte { return bytes.Clone(r.json) }

// assembly holds one build's parts.
type assembly struct {
	parts       []part
	occ         map[string]int
	vals        map[string]string
	hist        []Message
	turns       [][]Message // the run's own turns, after the input
	images      []ipc.Image // the current input's images
	placeholder bool        // history is the placeholder
}

func (a *assembly) inline() bool { return a.occ["history"] > 0 }

func (a *assembly) messages() []Message {
	vals := a.vals
	if a.inline() {
		switch {
		case a.placeholder:
			vals["history"] = HistoryPlaceholder
		default:
			vals["history"] = renderHistory(a.hist)
		}
	}
	msgs := make([]Message, 0, len(a.hist)+3)
	msgs = append(msgs, Message{Role: "system", Content: withContract(render(a.parts, vals))})
	if !a.inline() {
		if a.placeholder {
			msgs = append(msgs, Message{Role: HistoryPlaceholderRole, Content: HistoryPlaceholder})
		}
		msgs = append(msgs, a.hist...)
	}
	msgs = append(msgs, Message{Role: "user", Content: vals["input"], Images: a.images})
	for _, t := range a.turns {
		msgs = append(msgs, t...)
	}
	return msgs
}

// Sources are the files one build reads: system.md, the template, the
// merged rules and the skill metadata. A run collects them once, at its start
// (U6: a control file changed during a run takes effect at the next run), and
// renders every dispatch from them with the window, tool context and turns of
// that moment.
type Sources struct {
	system, tmpl string
	rules        string
	skills       []Skill
	warnings     []string
}

// Collect reads the sources of a build (R1, R2; control files are re-read on
// every call, U6). It fails only when a control file cannot be read.
func Collect(in Inputs) (*Sources, error) {
	fsys := in.fsys
	if fsys == nil {
		// spec: V2 — discovery stays inside the directories the agent's view
		// shows; no symlink below them is followed (see osFS).
		fsys = osFS{roots: []string{in.Workspace.Host, in.AgentHome.Host, in.CtxHome.Host}}
	}
	// spec: U6 — system.md and prompt.template.md are read at every build.
	system, _, err := readControl(fsys, in.ControlDir, SystemFile)
	if err != nil {
		return nil, err
	}
	tmpl, ok, err := readControl(fsys, in.ControlDir, TemplateFile)
	if err != nil {
		return nil, err
	}
	if !ok {
		tmpl = defaultTemplate
	}
	src := &Sources{system: strings.TrimRight(system, "\n"), tmpl: tmpl}
	var ws []string
	src.rules, ws = collectRules(fsys, &in) // spec: R1
	src.warnings = append(src.warnings, ws...)
	src.skills, ws = collectSkills(fsys, &in) // spec: R2
	src.warnings = append(src.warnings, ws...)
	return src, nil
}

// Build renders the prompt (R1) within the budget (W8–W10): Collect, then
// Render. It fails only when a control file cannot be read, or with a
// *BudgetError; everything else degrades with a warning.
func Build(in Inputs) (*Result, error) {
	src, err := Collect(in)
	if err != nil {
		return nil, err
	}
	return src.Render(in)
}

// toolSource renders the tool context at a size: from the session's tsh
// state when there is one — eviction drops unpinned tools first, oldest
// first, and pinned ones only as a last resort (spec: K5) — else by cutting
// the given text.
type toolSource struct {
	state *toolctx.State
	text  string
}

// at renders the context within n UTF-8 bytes (never more), untrimmed.
func (t toolSource) at(n int) string {
	if n <= 0 {
		return ""
	}
	if t.state != nil {
		return toolctx.ContextText(*t.state, n)
	}
	return cutText(clean(t.text), n, "tool context")
}

// full is the context before any window cut: what `tsh context` prints.
func (t toolSource) full() string {
	if t.state != nil {
		return toolctx.ContextText(*t.state, toolctx.DefaultContextBudget)
	}
	return clean(t.text)
}

// floor is the size eviction alone reaches: every pinned tool kept.
func (t toolSource) floor() int {
	if t.state != nil {
		return len(toolctx.ContextPinned(*t.state))
	}
	return 0
}

func promptTools(s string) string { return strings.TrimRight(s, "\n") }

// Render renders one message array from the sources (R1) within the budget
// (W8–W10). With in.Turns (a model run's own calls and results after the
// input) the whole array still fits: what no longer fits is left out oldest
// first — history, then the run's earlier turns — and the newest turn's tool
// results are cut with a visible marker before the render fails.
func (s *Sources) Render(in Inputs) (*Result, error) {
	r := &Result{BudgetChars: -1}
	r.Warnings = append(r.Warnings, s.warnings...)
	warn := func(format string, a ...any) { r.Warnings = append(r.Warnings, fmt.Sprintf(format, a...)) }

	system, rules := s.system, s.rules
	ts := toolSource{state: in.ToolState, text: in.ToolContext}
	toolText := ts.full()
	input := clean(in.Input)
	now := in.Time.UTC().Format(time.RFC3339)
	if in.Placeholders { // spec: R4
		input, now = InputPlaceholder, TimePlaceholder
	}
	hist := make([]Message, len(in.History))
	for i, m := range in.History {
		hist[i] = Message{Role: clean(m.Role), Content: clean(m.Content), Images: m.Images}
	}

	budget := -1
	skillCap := window.LegacySkillsChars
	histCap := -1
	if in.WindowKnown && in.WindowTokens > 0 {
		budget = int(window.InputBudgetChars(in.WindowTokens)) // spec: W8
		skillCap = int(window.SkillBudget(uint32(budget)))     // spec: W9
		r.BudgetChars = budget
	} else {
		// spec: W10 — legacy sub-budgets, no total claimed.
		histCap = window.LegacyHistoryChars
		legacy := func(s string, max int, what string) string {
			if len(s) <= max {
				return s
			}
			warn("%s: %d bytes over the %d-byte budget for an unknown window; cut", what, len(s)-max, max)
			return cutText(s, max, what)
		}
		system = legacy(system, window.LegacySystemChars, SystemFile)
		rules = legacy(rules, window.LegacyRulesChars, "rules")
		if len(toolText) > window.LegacyToolsChars {
			warn("tool context: %d bytes over the %d-byte budget for an unknown window; unpinned tools evicted first", len(toolText)-window.LegacyToolsChars, window.LegacyToolsChars)
			toolText = ts.at(window.LegacyToolsChars)
		}
	}
	if in.HistoryMaxChars > 0 && (histCap < 0 || in.HistoryMaxChars < histCap) {
		histCap = in.HistoryMaxChars
	}
	skills, ws := fitSkills(s.skills, skillCap) // spec: R2 W9
	r.Warnings = append(r.Warnings, ws...)

	parts, unknown := parseTemplate(s.tmpl)
	for _, u := range unknown {
		warn("template: unknown variable {{%s}} left as text", u)
	}
	a := &assembly{
		parts: parts,
		occ:   map[string]int{},
		vals: map[string]string{
			"system": system, "rules": rules, "skills": RenderSkills(skills),
			"tools": promptTools(toolText), "time": now, "input": input,
		},
		placeholder: in.Placeholders && in.HistoryAbsent,
	}
	if !in.Placeholders {
		a.images = in.Images
	}
	for _, p := range parts {
		if p.v != "" {
			a.occ[p.v]++
		}
	}
	turns := cleanTurns(in.Turns)

	if budget >= 0 {
		if n := len(turns); n > 0 {
			// The newest turn at its smallest is reserved before the
			// fixed parts are sized: the model must see its last results.
			a.turns = [][]Message{cutTurn(turns[n-1], 0)}
		}
		note := ""
		if ts.state != nil {
			note = " (unpinned tools evicted first; pinned kept)"
		}
		stages := []stage{
			{key: "tools", label: "tool context", lo: ts.floor(), hi: len(toolText), at: ts.at, orig: toolText, note: note},
			{key: "rules", label: "rules", lo: 0, hi: len(rules), orig: rules,
				at: func(n int) string { return cutText(rules, n, "rules") }},
		}
		if ts.floor() > 0 {
			stages = append(stages, stage{key: "tools", label: "tool context (pinned tools)", lo: 0, hi: ts.floor(), at: ts.at, orig: toolText})
		}
		chosen, err := fitFixed(a, budget, stages, warn)
		if err != nil {
			return nil, err
		}
		if t, ok := chosen["tools"]; ok {
			toolText = t
		}
	}
	omitted, err := selectTurns(a, turns, budget, warn)
	if err != nil {
		return nil, err
	}
	r.TurnsOmitted = omitted
	if !a.placeholder {
		a.hist, r.HistoryOmitted = selectHistory(a, hist, budget, histCap)
	}

	msgs := a.messages()
	data, err := marshal(msgs)
	if err != nil {
		return nil, err
	}
	if need := len(data) + imageCharge(msgs); budget >= 0 && need > budget { // spec: W8 — never dispatch over budget
		return nil, &BudgetError{Need: need, Budget: budget}
	}
	r.messages, r.json = msgs, data
	r.System, r.History, r.Input = msgs[0].Content, a.hist, input
	r.Rules, r.Skills = a.vals["rules"], skills
	r.ToolContext = toolText
	r.DispatchHash = hashHex(data)
	r.Hash = r.DispatchHash
	if !in.Placeholders {
		canon := *a
		canon.vals = maps(a.vals)
		canon.vals["input"], canon.vals["time"] = InputPlaceholder, TimePlaceholder
		canon.images = nil // as `ctx agent prompt` renders it
		cdata, err := marshal(canon.messages())
		if err != nil {
			return nil, err
		}
		r.Hash = hashHex(cdata)
	}

	histChars := 0
	if a.inline() {
		histChars = len(a.vals["history"])
	} else {
		for _, m := range a.hist {
			histChars += len(m.Content)
		}
	}
	literal := 0
	for _, p := range parts {
		literal += len(p.lit)
	}
	r.Sections = []Section{
		{"system", len(a.vals["system"])},
		{"rules", len(a.vals["rules"])},
		{"skills", len(a.vals["skills"])},
		{"tools", len(a.vals["tools"])},
		{"history", histChars},
		{"time", len(now)},
		{"input", len(input)},
		{"template", literal},
		{"contract", len(Contract)},
		{"total", len(data)},
	}
	return r, nil
}
