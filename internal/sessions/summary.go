package sessions

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// Session states. They are derived from events.jsonl and
// from whether a daemon answers; the log is the truth (runs of a session
// are sequential, and each ends with its done frame).
const (
	// StateIdle: the daemon is up and the last run ended.
	StateIdle = "idle"
	// StateRunning: the daemon is up and the log ends inside a run (its
	// user or start frame is there, its done is not).
	StateRunning = "running"
	// StateWaitingApproval: running, and an approval_request of that run
	// has no approval (nor tool_result) yet: someone must answer it.
	StateWaitingApproval = "waiting-approval"
	// StatePassivated: no daemon is running, so the session is held by its
	// files alone; the next request reopens it from its log.
	StatePassivated = "passivated"
	// StateInterrupted: passivated, and the log ends inside a run: the
	// daemon that ran it is gone. The daemon concludes that run with an
	// `interrupted` error when it next starts (runtime.md L4).
	StateInterrupted = "interrupted"
)

// StateOf derives a session's state from its log and the daemon's presence.
func StateOf(openRun, waitingApproval, daemonUp bool) string {
	switch {
	case !daemonUp && openRun:
		return StateInterrupted
	case !daemonUp:
		return StatePassivated
	case waitingApproval:
		return StateWaitingApproval
	case openRun:
		return StateRunning
	}
	return StateIdle
}

// Approval is a tool call waiting for the person's answer.
type Approval struct {
	Run  string   `json:"run"`
	ID   string   `json:"id"`
	Name string   `json:"name"`
	Args []string `json:"args"`
}

// Summary is one line of `ctx agent sessions`.
type Summary struct {
	Session string `json:"session"`
	Scope   string `json:"scope"`
	State   string `json:"state"`
	// LastActivity is the ts of the last frame ("" for an empty log).
	LastActivity string `json:"last_activity"`
	Runs         int    `json:"runs"`
	// Title is the first user message, on one line, cut to TitleRunes.
	Title string `json:"title"`
	// ActiveRun is the run the log ends inside, if any.
	ActiveRun string    `json:"active_run,omitempty"`
	Approval  *Approval `json:"approval,omitempty"`
	// Since is the ts the active run began; ToolCalls counts its tool
	// calls so far; InFlight names the call it waits on (no result yet).
	Since     string `json:"since,omitempty"`
	ToolCalls int    `json:"tool_calls,omitempty"`
	InFlight  string `json:"in_flight,omitempty"`
	// Usage sums the usage fields of the done frames that carry one;
	// UsageRuns says how many did. Both are absent when none did: no
	// number is made up.
	Usage     map[string]int64 `json:"usage,omitempty"`
	UsageRuns int              `json:"usage_runs,omitempty"`
	// UsageByModel sums the done frames' usage_by_model: the usage of
	// each candidate that answered, which a price table can price.
	// UnattributedRuns counts runs with usage but no model named for it
	// (an executable agent's, or a log written before usage_by_model):
	// their cost cannot be told.
	UsageByModel     map[string]map[string]int64 `json:"usage_by_model,omitempty"`
	UnattributedRuns int                         `json:"unattributed_runs,omitempty"`
	// CostUSD is set by a client holding a price table (ctx agent
	// sessions) when every run's usage is priced; never by a guess.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// SkippedLines counts unreadable lines; TornTail a partial last line.
	SkippedLines int  `json:"skipped_lines,omitempty"`
	TornTail     bool `json:"torn_tail,omitempty"`
}

// TitleRunes bounds a session's title.
const TitleRunes = 60

// summarizer folds frames into a Summary in constant memory (only the
// open run's pending approvals are kept).
type summarizer struct {
	s        Summary
	lastRun  string
	open     string
	pending  map[string]*Approval // call id -> request, for the open run
	titleSet bool
	since    string // ts of the open run's first frame
	calls    int    // tool calls of the open run
	inFlight string // the open run's call without a result, as a command
	flightID string
}

func (z *summarizer) frame(f *Frame) {
	if f.TS != "" {
		z.s.LastActivity = f.TS
	}
	switch f.Type {
	case ipc.TypeUser, ipc.TypeStart:
		if f.Run == "" {
			return
		}
		if f.Run != z.lastRun {
			z.lastRun = f.Run
			z.s.Runs++
			z.pending = nil
			z.since, z.calls, z.inFlight, z.flightID = f.TS, 0, "", ""
		}
		z.open = f.Run
		if f.Type == ipc.TypeUser && !z.titleSet {
			z.s.Title, z.titleSet = Title(f.Text), true
		}
	case ipc.TypeToolCall:
		if f.Run == z.open && z.open != "" {
			z.calls++
			z.inFlight, z.flightID = Command(f.Name, f.Args), f.CallID
		}
		if !z.titleSet && f.Run == z.open {
			// A tsh op has no user message: its tool call names it.
			z.s.Title, z.titleSet = Title("tsh "+f.Name+" "+strings.Join(f.Args, " ")), true
		}
	case ipc.TypeApprovalRequest:
		if f.Run == z.open && z.open != "" {
			if z.pending == nil {
				z.pending = map[string]*Approval{}
			}
			z.pending[f.ID] = &Approval{Run: f.Run, ID: f.ID, Name: f.Name, Args: f.Args}
		}
	case ipc.TypeApproval:
		delete(z.pending, f.ID)
	case ipc.TypeToolResult:
		delete(z.pending, f.CallID)
		if f.CallID == z.flightID {
			z.inFlight, z.flightID = "", ""
		}
	case ipc.TypeDone:
		if f.Run == z.open {
			z.open, z.pending = "", nil
		}
		if t := f.Tokens(); t != nil {
			if z.s.Usage == nil {
				z.s.Usage = map[string]int64{}
			}
			for k, v := range t {
				z.s.Usage[k] += v
			}
			z.s.UsageRuns++
			if len(f.UsageByModel) == 0 {
				z.s.UnattributedRuns++
			}
		}
		for m, u := range f.UsageByModel {
			if u == nil {
				continue
			}
			if z.s.UsageByModel == nil {
				z.s.UsageByModel = map[string]map[string]int64{}
			}
			AddUsage(z.s.UsageByModel, m, u)
		}
	}
}

func (z *summarizer) finish(daemonUp bool) Summary {
	s := z.s
	s.ActiveRun = z.open
	if z.open != "" {
		s.Since, s.ToolCalls, s.InFlight = z.since, z.calls, Clean(z.inFlight)
	}
	for _, a := range z.pending {
		if s.Approval == nil || a.ID < s.Approval.ID {
			s.Approval = a // one, chosen the same way every time
		}
	}
	s.State = StateOf(z.open != "", s.Approval != nil, daemonUp)
	return s
}

// Summarize reads one session directory.
func Summarize(dir, session, scope string, daemonUp bool) (Summary, error) {
	z := summarizer{s: Summary{Session: session, Scope: scope}}
	st, err := ScanDir(dir, z.frame)
	if err != nil {
		return Summary{}, err
	}
	s := z.finish(daemonUp)
	s.SkippedLines, s.TornTail = st.Skipped, st.Torn
	return s, nil
}

// ErrNotFound means the agent has no such session.
var ErrNotFound = errors.New("no such session")

// Scopes lists both scopes, private first.
var Scopes = []string{layout.ScopePrivate, layout.ScopeShared}

// Names lists the session names of an agent in one scope, sorted. Entries
// that are not valid session names (the .trash directory) are left out.
func Names(l layout.Layout, agent, scope string) ([]string, error) {
	ents, err := os.ReadDir(l.SessionsDir(agent, scope))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", agent, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && layout.CheckName("session", e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// List summarizes every session of the agent, both scopes, the most
// recently active first.
func List(l layout.Layout, agent string, daemonUp bool) ([]Summary, error) {
	var out []Summary
	for _, scope := range Scopes {
		names, err := Names(l, agent, scope)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			s, err := Summarize(l.SessionDir(agent, scope, n), n, scope, daemonUp)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].LastActivity != out[j].LastActivity {
			return out[i].LastActivity > out[j].LastActivity // RFC 3339 UTC sorts as text
		}
		if out[i].Scope != out[j].Scope {
			return out[i].Scope < out[j].Scope
		}
		return out[i].Session < out[j].Session
	})
	return out, nil
}

// Title is text on one line (runs of white space become one space,
// control and format characters are dropped) cut to TitleRunes with an
// ellipsis.
func Title(text string) string {
	var rs []rune
	space := false
	for _, r := range text {
		switch {
		case unicode.IsSpace(r):
			space = len(rs) > 0
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			continue
		}
		if space {
			rs, space = append(rs, ' '), false
		}
		rs = append(rs, r)
		if len(rs) > TitleRunes {
			return string(rs[:TitleRunes-1]) + "…"
		}
	}
	return string(rs)
}

// AddUsage adds u to the usage of model in by.
func AddUsage(by map[string]map[string]int64, model string, u *ipc.Usage) {
	t := by[model]
	if t == nil {
		t = map[string]int64{}
		by[model] = t
	}
	t["input"] += u.Input
	t["output"] += u.Output
	if u.CacheRead != 0 {
		t["cache_read"] += u.CacheRead
	}
	if u.CacheWrite != 0 {
		t["cache_write"] += u.CacheWrite
	}
}
