package runprep

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/models"
	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/window"
	"github.com/cortexfs/ctx/ipc"
)

const (
	sonnet = "anthropic/claude-sonnet-4-5" // 200000
	gpt4o  = "openai/gpt-4o"               // 128000
	nobody = "acme/unlisted-model"         // unknown
)

func newLayout(t *testing.T) layout.Layout {
	t.Helper()
	dir := t.TempDir()
	l := layout.Layout{Root: filepath.Join(dir, "root"), Runtime: filepath.Join(dir, "run"), UID: os.Getuid()}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	return l
}

// define creates an agent (models nil = executable) and sets its window file
// by hand; window "-" removes the file.
func define(t *testing.T, l layout.Layout, name string, candidates []string, win string) *agentdef.Def {
	t.Helper()
	o := agentdef.CreateOptions{Models: candidates}
	if candidates == nil {
		exe := filepath.Join(t.TempDir(), "agent")
		if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		o.Exec = exe
	}
	if err := agentdef.Create(l, name, o); err != nil {
		t.Fatal(err)
	}
	wpath := filepath.Join(l.AgentControl(name), window.WindowFile)
	if win == "-" {
		if err := os.Remove(wpath); err != nil {
			t.Fatal(err)
		}
	} else if err := os.WriteFile(wpath, []byte(win), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := agentdef.Load(l, name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPrepareWindow covers W2 and W4–W7 per candidate. spec: W2 W4 W5 W6 W7 W10
func TestPrepareWindow(t *testing.T) {
	type want struct {
		model    string
		selected int
		tokens   uint32
		known    bool
		skipped  []string // models of Prepared.Skipped
		err      error    // errors.Is target; nil = success
		errText  string   // substring of the error
		unusable []string // for a *WindowError: the candidates marked unusable
	}
	cases := []struct {
		name       string
		candidates []string // nil = executable agent without .d/model
		window     string
		skip       int
		want       want
	}{
		{"auto known", []string{sonnet}, "auto\n", 0, want{model: sonnet, tokens: 200000, known: true}},
		{"auto unknown model", []string{nobody}, "auto\n", 0, want{model: nobody}},
		{"explicit within limit", []string{sonnet}, "150000\n", 0, want{model: sonnet, tokens: 150000, known: true}},
		{"explicit equal to limit", []string{gpt4o}, "128000\n", 0, want{model: gpt4o, tokens: 128000, known: true}},
		{"explicit over first, fallback fits", []string{gpt4o, sonnet}, "150000\n", 0,
			want{model: sonnet, selected: 1, tokens: 150000, known: true, skipped: []string{gpt4o}}},
		{"explicit unknown first, fallback fits", []string{nobody, gpt4o}, "1000\n", 0,
			want{model: gpt4o, selected: 1, tokens: 1000, known: true, skipped: []string{nobody}}},
		{"auto follows the candidate", []string{gpt4o, sonnet}, "auto\n", 1,
			want{model: sonnet, selected: 1, tokens: 200000, known: true}},
		{"no candidate usable", []string{gpt4o, nobody}, "150000\n", 0,
			want{err: window.ErrInvariant, errText: "no model candidate is usable", unusable: []string{gpt4o, nobody}}},
		{"every candidate tried", []string{gpt4o}, "auto\n", 1, want{err: window.ErrInvariant, errText: "every model candidate"}},
		{"zero", []string{sonnet}, "0\n", 0, want{err: window.ErrInvalid, errText: "set demo window auto"}},
		{"no LF", []string{sonnet}, "auto", 0, want{err: window.ErrInvalid}},
		{"two lines", []string{sonnet}, "auto\nauto\n", 0, want{err: window.ErrInvalid}},
		{"overflow", []string{sonnet}, "4294967296\n", 0, want{err: window.ErrInvalid}},
		{"empty", []string{sonnet}, "", 0, want{err: window.ErrInvalid}},
		{"missing file", []string{sonnet}, "-", 0, want{err: window.ErrInvalid, errText: "missing"}},
		{"exec without model, auto", nil, "auto\n", 0, want{selected: -1}},
		{"exec without model, explicit", nil, "1000\n", 0, want{err: window.ErrInvariant, errText: "without .d/model"}},
		{"exec with model", []string{gpt4o}, "auto\n", 0, want{model: gpt4o, tokens: 128000, known: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			def := define(t, l, "demo", tc.candidates, tc.window)
			wfile := filepath.Join(def.Control, "window")
			before, _ := os.ReadFile(wfile)
			p, err := Prepare(Input{Layout: l, Def: def, Input: "hi", Time: time.Unix(0, 0), Skip: tc.skip})
			if after, _ := os.ReadFile(wfile); string(after) != string(before) {
				t.Errorf("window file rewritten: %q → %q", before, after) // spec: W5 — never reset
			}
			if tc.want.err != nil {
				var we *WindowError
				if !errors.As(err, &we) || !errors.Is(err, ErrWindowInvalid) || !errors.Is(err, tc.want.err) {
					t.Fatalf("err = %v, want a *WindowError wrapping %v", err, tc.want.err)
				}
				if ipc.Code(err) != ipc.CodeWindowInvalid {
					t.Errorf("wire code %q", ipc.Code(err))
				}
				if !strings.Contains(err.Error(), wfile) || !strings.Contains(err.Error(), tc.want.errText) {
					t.Errorf("error %q: want the file %s and %q", err, wfile, tc.want.errText)
				}
				var unusable []string
				for _, c := range we.Candidates {
					if !c.Usable && c.Reason != "skipped" {
						unusable = append(unusable, c.Model)
						if c.Reason == "" {
							t.Errorf("candidate %s: no reason", c.Model)
						}
					}
				}
				if !reflect.DeepEqual(unusable, tc.want.unusable) {
					t.Errorf("unusable %v, want %v", unusable, tc.want.unusable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Model != tc.want.model || p.Selected != tc.want.selected || p.Tokens != tc.want.tokens || p.Known != tc.want.known {
				t.Errorf("got model %q #%d tokens %d known %v, want %+v", p.Model, p.Selected, p.Tokens, p.Known, tc.want)
			}
			var skipped []string
			for _, c := range p.Skipped {
				skipped = append(skipped, c.Model)
				if c.Usable || c.Reason == "" {
					t.Errorf("skipped candidate %+v", c)
				}
			}
			if !reflect.DeepEqual(skipped, tc.want.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tc.want.skipped)
			}
			// spec: W7 W10 — both variables exactly when known.
			if tc.want.known {
				want := map[string]string{window.EnvTokens: itoa(tc.want.tokens), window.EnvChars: itoa(4 * tc.want.tokens)}
				if !reflect.DeepEqual(p.Env, want) {
					t.Errorf("env %v, want %v", p.Env, want)
				}
				if p.Prompt.BudgetChars != int(window.InputBudgetChars(tc.want.tokens)) {
					t.Errorf("budget %d", p.Prompt.BudgetChars)
				}
			} else {
				if p.Env != nil {
					t.Errorf("env %v for an unknown window", p.Env)
				}
				if p.Prompt.BudgetChars != -1 {
					t.Errorf("budget %d for an unknown window", p.Prompt.BudgetChars)
				}
			}
			if !strings.HasSuffix(p.Prompt.System, prompt.Contract) { // spec: R3
				t.Errorf("system does not end with the contract")
			}
			if !strings.HasPrefix(p.PromptHash(), "sha256:") || len(p.PromptHash()) != len("sha256:")+64 {
				t.Errorf("hash %q", p.PromptHash())
			}
		})
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// TestPrepareModelTable: a user models.tsv extends the table; a malformed
// one fails with window_invalid naming it. spec: W4
func TestPrepareModelTable(t *testing.T) {
	l := newLayout(t)
	def := define(t, l, "demo", []string{nobody}, "5000\n")
	if _, err := Prepare(Input{Layout: l, Def: def}); !errors.Is(err, ErrWindowInvalid) {
		t.Fatalf("unknown model with explicit window: %v", err)
	}
	tsv := filepath.Join(l.Root, models.UserFile)
	os.WriteFile(tsv, []byte(nobody+"\t8000\n"), 0o644)
	p, err := Prepare(Input{Layout: l, Def: def})
	if err != nil || p.Tokens != 5000 || !p.Known {
		t.Fatalf("after models.tsv: %+v %v", p, err)
	}
	os.WriteFile(tsv, []byte("not a table\n"), 0o644)
	_, err = Prepare(Input{Layout: l, Def: def})
	if !errors.Is(err, ErrWindowInvalid) || !errors.Is(err, models.ErrMalformed) || !strings.Contains(err.Error(), tsv) {
		t.Fatalf("malformed models.tsv: %v", err)
	}
}

// TestPrepareBudget: a window too small for the parts never cut is a
// *BudgetError with wire code limit_exceeded. spec: W8
func TestPrepareBudget(t *testing.T) {
	l := newLayout(t)
	def := define(t, l, "demo", []string{sonnet}, "100\n")
	_, err := Prepare(Input{Layout: l, Def: def, Input: "hi"})
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrLimitExceeded) || !errors.Is(err, prompt.ErrOverBudget) {
		t.Fatalf("err = %v, want a *BudgetError", err)
	}
	if ipc.Code(err) != ipc.CodeLimitExceeded || be.Model != sonnet || be.Tokens != 100 {
		t.Errorf("code %q, %+v", ipc.Code(err), be)
	}
}

// TestPromptHashMatchesRun: `ctx agent prompt` (placeholders) and a run
// (real input and time) with the same definition, session and workspace
// record the same hash; the run dispatches the real input. spec: R4
func TestPromptHashMatchesRun(t *testing.T) {
	l := newLayout(t)
	def := define(t, l, "demo", []string{sonnet}, "auto\n")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Be terse.\n"), 0o644)
	os.WriteFile(filepath.Join(def.Control, "system.md"), []byte("You are demo.\n"), 0o644)
	hist := []Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "answer"}}
	base := Input{Layout: l, Def: def, Workspace: ws, ToolContext: "Tools loaded through tsh:\n- clock\n", History: hist}

	cli := base
	cli.Placeholders = true
	pc, err := Prepare(cli)
	if err != nil {
		t.Fatal(err)
	}
	run := base
	run.Input, run.Time = "what time is it", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pr, err := Prepare(run)
	if err != nil {
		t.Fatal(err)
	}
	if pc.PromptHash() != pr.PromptHash() {
		t.Errorf("hash of prompt %s != hash of run %s", pc.PromptHash(), pr.PromptHash())
	}
	msgs := pr.Prompt.Messages()
	if last := msgs[len(msgs)-1]; last.Content != "what time is it" {
		t.Errorf("run input %q", last.Content)
	}
	if cm := pc.Prompt.Messages(); cm[len(cm)-1].Content != prompt.InputPlaceholder {
		t.Errorf("prompt input %q", cm[len(cm)-1].Content)
	}
	if !strings.Contains(pr.Prompt.System, "Be terse.") || !strings.Contains(pr.Prompt.System, "You are demo.") ||
		!strings.Contains(pr.Prompt.System, "/workspace/AGENTS.md") || !strings.Contains(pr.Prompt.System, "- clock") {
		t.Errorf("system lacks rules, system.md or tools:\n%s", pr.Prompt.System)
	}
	// A different history is a different prompt.
	run.History = hist[:1]
	if p2, _ := Prepare(run); p2.PromptHash() == pr.PromptHash() {
		t.Error("hash ignores the history")
	}
}

// TestPrepareCwd: the view cwd maps back to the host for the project rule
// chain; a cwd outside the agent's files gives no project rules.
func TestPrepareCwd(t *testing.T) {
	l := newLayout(t)
	def := define(t, l, "demo", []string{sonnet}, "auto\n")
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("root rule\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "sub", "AGENTS.md"), []byte("sub rule\n"), 0o644)
	home := l.AgentHome("demo")
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, "AGENTS.md"), []byte("home rule\n"), 0o644)
	for _, tc := range []struct {
		ws, cwd string
		want    []string
		not     []string
	}{
		{ws, "", []string{"root rule"}, []string{"sub rule", "home rule"}},
		{ws, "/workspace/sub", []string{"root rule", "sub rule"}, []string{"home rule"}},
		{"", "", []string{"home rule"}, []string{"root rule"}},
		{ws, "/home/agent", []string{"home rule"}, []string{"root rule"}},
		{ws, "/etc", nil, []string{"root rule", "home rule"}},
	} {
		p, err := Prepare(Input{Layout: l, Def: def, Workspace: tc.ws, Cwd: tc.cwd})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tc.want {
			if !strings.Contains(p.Prompt.Rules, s) {
				t.Errorf("ws %q cwd %q: rules lack %q: %q", tc.ws, tc.cwd, s, p.Prompt.Rules)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(p.Prompt.Rules, s) {
				t.Errorf("ws %q cwd %q: rules hold %q", tc.ws, tc.cwd, s)
			}
		}
	}
}

// TestSnapshotsBestEffort: snapshots land in the session directory; an
// unwritable one is reported, never fatal. spec: R5
func TestSnapshotsBestEffort(t *testing.T) {
	l := newLayout(t)
	def := define(t, l, "demo", []string{sonnet}, "auto\n")
	os.WriteFile(filepath.Join(l.UserHome(), "AGENTS.md"), []byte("global rule\n"), 0o644)
	sess := l.SessionDir("demo", layout.ScopePrivate, "default")
	os.MkdirAll(sess, 0o700)
	p, err := Prepare(Input{Layout: l, Def: def, SessionDir: sess})
	if err != nil || p.SnapshotErr != nil {
		t.Fatalf("%v / %v", err, p.SnapshotErr)
	}
	if b, _ := os.ReadFile(filepath.Join(sess, prompt.RulesSnapshot)); string(b) != p.Prompt.Rules || !strings.Contains(string(b), "global rule") {
		t.Errorf("AGENTS.md snapshot %q", b)
	}
	p, err = Prepare(Input{Layout: l, Def: def, SessionDir: filepath.Join(sess, "missing")})
	if err != nil || p.SnapshotErr == nil {
		t.Fatalf("missing session dir: err %v, snapshot err %v", err, p.SnapshotErr)
	}
}

func TestHistoryAndToolContext(t *testing.T) {
	got := History([]store.Message{
		{Role: "user", Text: "q"}, {Role: "tool", Name: "tsh", Content: "out"},
		{Role: "error", Code: "denied", Text: "no"}, {Role: "assistant", Text: "a"},
	})
	want := []Message{{Role: "user", Content: "q"}, {Role: "tool", Content: "out"}, {Role: "assistant", Content: "a"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("History = %v", got)
	}

	dir := t.TempDir()
	if h, err := ReadHistory(filepath.Join(dir, "nope")); err != nil || h != nil {
		t.Errorf("missing session: %v %v", h, err)
	}
	os.WriteFile(filepath.Join(dir, store.MessagesFile), []byte(
		`{"role":"user","run":"r1","seq":1,"ts":"t","text":"q"}`+"\n"+
			`{"role":"assistant","run":"r1","seq":5,"ts":"t","text":"a"}`+"\n"+
			`{"role":"user","run":"r2","se`), 0o600) // torn last line
	h, err := ReadHistory(dir)
	if err != nil || !reflect.DeepEqual(h, []Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}) {
		t.Errorf("ReadHistory = %v, %v", h, err)
	}
	os.WriteFile(filepath.Join(dir, store.MessagesFile), []byte("garbage\n"), 0o600)
	if _, err := ReadHistory(dir); err == nil {
		t.Error("corrupt messages.jsonl accepted")
	}

	if s, err := ToolContext(dir); err != nil || s != "" {
		t.Errorf("no tools.json: %q %v", s, err)
	}
	if _, err := toolctx.UpdateState(filepath.Join(dir, toolctx.StateFileName), func(s *toolctx.State) error {
		s.Load(toolctx.Loaded{Name: "clock", Description: "tells the time", Path: "/ctx/tool/clock"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s, err := ToolContext(dir); err != nil || !strings.Contains(s, "- clock: tells the time") {
		t.Errorf("ToolContext = %q, %v", s, err)
	}
}

func TestHostPath(t *testing.T) {
	l := layout.Layout{Root: "/r", UID: 7}
	for _, tc := range []struct{ ws, view, want string }{
		{"/w", "/workspace", "/w"},
		{"/w", "/workspace/a/b", "/w/a/b"},
		{"", "/workspace/a", ""},
		{"/w", "/workspaces", ""},
		{"/w", "/home/agent/x", "/r/home/7/agent/demo/x"},
		{"/w", "/ctx/tool", "/r/tool"},
		{"/w", "/tmp", ""},
	} {
		if got := hostPath(l, "demo", tc.ws, tc.view); got != tc.want {
			t.Errorf("hostPath(%q, %q) = %q, want %q", tc.ws, tc.view, got, tc.want)
		}
	}
}

// TestRenderPerCandidateW6: a later dispatch is rendered with the window of
// the candidate it goes to — a fallback with a 1,000-token window gets a
// message array within its own 3,000-char budget, with history left out —
// and a candidate ruled out by the window is refused with its reason.
// spec: W6 W8
func TestRenderPerCandidateW6(t *testing.T) {
	l := newLayout(t)
	if err := os.WriteFile(filepath.Join(l.Root, models.UserFile), []byte("acme/tiny\t1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	def := define(t, l, "fb", []string{sonnet, "acme/tiny"}, "auto\n")
	var hist []Message
	for i := 0; i < 6; i++ {
		hist = append(hist, Message{Role: "user", Content: strings.Repeat("q", 1500)}, Message{Role: "assistant", Content: strings.Repeat("a", 1500)})
	}
	p, err := Prepare(Input{Layout: l, Def: def, History: hist, Input: "now", Time: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Prompt.HistoryOmitted != 0 {
		t.Fatalf("the first candidate has room for all history: %d omitted", p.Prompt.HistoryOmitted)
	}
	res, err := p.Render(p.Candidates[1], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, b := len(res.JSON()), int(window.InputBudgetChars(1000)); n > b || res.HistoryOmitted == 0 {
		t.Fatalf("fallback render: %d bytes against %d, %d omitted", n, b, res.HistoryOmitted)
	}
	// An explicit window the fallback cannot hold makes it unusable.
	def = define(t, l, "fb2", []string{sonnet, "acme/tiny"}, "150000\n")
	p, err = Prepare(Input{Layout: l, Def: def, Input: "now", Time: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(p.Candidates[1], nil, nil); err == nil || !strings.Contains(err.Error(), "acme/tiny") {
		t.Fatalf("unusable candidate rendered: %v", err)
	}
}
