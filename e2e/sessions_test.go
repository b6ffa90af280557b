package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sessionRow is one line of `ctx agent sessions --json`.
type sessionRow struct {
	Session      string `json:"session"`
	Scope        string `json:"scope"`
	State        string `json:"state"`
	LastActivity string `json:"last_activity"`
	Runs         int    `json:"runs"`
	Title        string `json:"title"`
	ActiveRun    string `json:"active_run"`
	Approval     *struct{ Name string }
	Usage        map[string]int64 `json:"usage"`
	raw          string
}

func (w *world) sessionsJSON(agent string) map[string]sessionRow {
	w.t.Helper()
	out := w.mustCtx("agent", "sessions", agent, "--json")
	rows := map[string]sessionRow{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r sessionRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			w.t.Fatalf("sessions --json line %q: %v", line, err)
		}
		r.raw = line
		rows[r.Scope+"/"+r.Session] = r
	}
	return rows
}

// historyKinds runs `ctx agent history --json` and returns its entries.
func (w *world) historyJSON(args ...string) []map[string]any {
	w.t.Helper()
	out := w.mustCtx(append([]string{"agent", "history"}, append(args, "--json")...)...)
	var entries []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			w.t.Fatalf("history --json line %q: %v", line, err)
		}
		entries = append(entries, e)
	}
	return entries
}

func kinds(es []map[string]any) string {
	var k []string
	for _, e := range es {
		k = append(k, e["kind"].(string))
	}
	return strings.Join(k, ",")
}

// TestSessionsHistoryRmSession: two agents, several sessions in both
// scopes, one run waiting for approval and one running, against a real
// daemon; then the same commands with the daemon stopped and after a
// crash.
func TestSessionsHistoryRmSession(t *testing.T) {
	w, ws := approvalWorld(t, "60s") // agent ap: tool mark, approval ask
	w.agent("demo", map[string]string{"tools": "mark\n", "approval": "auto\n"})

	mustIn := func(dir string, args ...string) string {
		t.Helper()
		r := w.ctx(dir, "", args...)
		if r.code != 0 {
			t.Fatalf("ctx %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	mustIn(ws, "agent", "send", "demo", "echo", "hello", "world")
	time.Sleep(20 * time.Millisecond) // distinct last activities: the order is checked
	mustIn(ws, "agent", "send", "demo", "--session", "work", "tool", "mark")
	mustIn(ws, "agent", "send", "demo", "--session", "work", "echo", "second", "run")
	mustIn(ws, "agent", "send", "demo", "--scope", "shared", "--session", "team", "echo", "shared", "hi")

	// A run waiting for approval (the asking connection stays open).
	asked := w.dial("ap")
	asked.send(sendReq("a1", "tool mark", "workspace", ws, "session", "pending"))
	ar := asked.until("approval_request", 10*time.Second)
	apRun := ar[len(ar)-1].Run
	// A running run.
	sleeper := w.dial("demo")
	sleeper.send(sendReq("s1", "sleep 60", "session", "sleepy"))
	for {
		f := sleeper.must(10 * time.Second)
		if f.Type == "delta" {
			break
		}
		if f.Type == "error" || f.Type == "done" {
			t.Fatalf("the sleeping run ended: %s", f.raw)
		}
	}

	rows := w.sessionsJSON("demo")
	want := map[string]struct {
		state string
		runs  int
		title string
	}{
		"private/default": {"idle", 1, "echo hello world"},
		"private/work":    {"idle", 2, "tool mark"},
		"shared/team":     {"idle", 1, "echo shared hi"},
		"private/sleepy":  {"running", 1, "sleep 60"},
	}
	if len(rows) != len(want) {
		t.Fatalf("sessions of demo: %v", rows)
	}
	for k, wt := range want {
		r := rows[k]
		if r.State != wt.state || r.Runs != wt.runs || r.Title != wt.title || r.LastActivity == "" {
			t.Errorf("%s: %s; want state %s runs %d title %q", k, r.raw, wt.state, wt.runs, wt.title)
		}
		if strings.Contains(r.raw, `"usage"`) {
			t.Errorf("%s: usage invented (no done frame carries one): %s", k, r.raw)
		}
	}
	if rows["private/sleepy"].ActiveRun == "" {
		t.Errorf("running session without active_run: %s", rows["private/sleepy"].raw)
	}
	// ctx ps: both active runs, across agents, with state and the call
	// in flight.
	ps := w.mustCtx("ps", "--json")
	t.Logf("ctx ps --json:\n%s", ps)
	if !strings.Contains(ps, `"agent":"demo","session":"sleepy"`) || !strings.Contains(ps, `"state":"running"`) ||
		!strings.Contains(ps, `"agent":"ap","session":"pending","scope":"private","run":"`+apRun+`","state":"waiting-approval"`) ||
		!strings.Contains(ps, `"in_flight":"mark"`) || strings.Contains(ps, `"session":"default"`) {
		t.Errorf("ctx ps --json:\n%s", ps)
	}
	if text := w.mustCtx("ps"); !strings.Contains(text, "AGENT") || !strings.Contains(text, "sleepy") || !strings.Contains(text, "waiting-approval") {
		t.Errorf("ctx ps:\n%s", text)
	}
	apRows := w.sessionsJSON("ap")
	if p := apRows["private/pending"]; p.State != "waiting-approval" || p.ActiveRun != apRun || p.Approval == nil || p.Approval.Name != "mark" {
		t.Errorf("pending: %s", p.raw)
	}
	// The text form: newest first (the running and waiting sessions are the
	// most recent), the approval's call named.
	text := w.mustCtx("agent", "sessions", "demo")
	t.Logf("ctx agent sessions demo:\n%s", text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "SESSION") || !strings.HasPrefix(lines[1], "sleepy") || !strings.HasPrefix(lines[4], "default") {
		t.Errorf("sessions text:\n%s", text)
	}
	apText := w.mustCtx("agent", "sessions", "ap")
	t.Logf("ctx agent sessions ap:\n%s", apText)
	if !strings.Contains(apText, "waiting-approval (mark)") {
		t.Errorf("sessions ap:\n%s", apText)
	}

	// history: the transcript rendered, and as JSON.
	h := w.mustCtx("agent", "history", "demo", "--session", "work")
	t.Logf("ctx agent history demo --session work:\n%s", h)
	for _, s := range []string{"> tool mark\n", "  tool mark → ok: ran\n", "ok:ran\n", "> echo second run\n", "echo: second run\n", "  (ok · "} {
		if !strings.Contains(h, s) {
			t.Errorf("history lacks %q:\n%s", s, h)
		}
	}
	if k := kinds(w.historyJSON("demo", "--session", "work")); k != "run,user,tool,assistant,done,run,user,assistant,done" {
		t.Errorf("history --json kinds %s", k)
	}
	hp := w.mustCtx("agent", "history", "ap", "--session", "pending")
	if !strings.Contains(hp, "  tool mark → waiting-approval\n") || !strings.HasSuffix(hp, "  (waiting-approval …)\n") {
		t.Errorf("history of the waiting run:\n%s", hp)
	}
	es := w.historyJSON("demo", "--scope", "shared", "--session", "team")
	if k := kinds(es); k != "run,user,assistant,done" || es[2]["text"] != "echo: shared hi" {
		t.Errorf("shared history: %v", es)
	}

	// rm-session refuses while a run is active or waiting; nothing is removed.
	for _, tc := range [][]string{{"demo", "sleepy"}, {"ap", "pending"}} {
		r := w.ctx("", "", "agent", "rm-session", tc[0], tc[1])
		if r.code != 1 || !strings.Contains(r.stderr, "active run") {
			t.Errorf("rm-session %v: exit %d %s%s", tc, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(w.sessionDir(tc[0], tc[1]), "events.jsonl")); err != nil {
			t.Errorf("a refused removal removed %v: %v", tc, err)
		}
	}
	if r := w.ctx("", "", "agent", "rm-session", "demo", "nosuch"); r.code != 2 {
		t.Errorf("rm-session of no session: exit %d %s", r.code, r.stderr)
	}
	// An idle session goes; the next send to its name starts a new one.
	if out := w.mustCtx("agent", "rm-session", "demo", "default"); !strings.Contains(out, "removed private session default of agent demo") {
		t.Errorf("rm-session: %q", out)
	}
	if _, err := os.Stat(w.sessionDir("demo", "default")); !os.IsNotExist(err) {
		t.Fatalf("session directory still there: %v", err)
	}
	trash := filepath.Join(filepath.Dir(w.sessionDir("demo", "default")), ".trash")
	if ents, _ := os.ReadDir(trash); len(ents) != 0 {
		t.Errorf("trash not emptied: %v", ents)
	}
	if _, ok := w.sessionsJSON("demo")["private/default"]; ok {
		t.Error("a removed session is still listed")
	}
	mustIn(ws, "agent", "send", "demo", "echo", "fresh")
	if r := w.sessionsJSON("demo")["private/default"]; r.Runs != 1 || r.Title != "echo fresh" {
		t.Errorf("the session after removal: %s", r.raw)
	}
	if h := w.mustCtx("agent", "history", "demo"); strings.Contains(h, "hello") || !strings.Contains(h, "echo: fresh") {
		t.Errorf("history after removal:\n%s", h)
	}
	w.mustCtx("agent", "rm-session", "demo", "team", "--scope", "shared")
	if _, ok := w.sessionsJSON("demo")["shared/team"]; ok {
		t.Error("the shared session is still listed")
	}

	// End the two open runs, start one more, and stop the daemon.
	asked.send(map[string]any{"op": "approve", "run": apRun, "id": "t1", "decision": "deny"})
	asked.until("done", 15*time.Second)
	w.mustCtx("agent", "cancel", "demo", "--session", "sleepy")
	sleeper.until("done", 15*time.Second)
	w.stop()

	// Without a daemon (CTX_NO_AUTOSTART=1: a command that needed one would
	// exit 3): every session is passivated, history reads the files.
	rows = w.sessionsJSON("demo")
	for k, r := range rows {
		if r.State != "passivated" {
			t.Errorf("%s with no daemon: %s", k, r.raw)
		}
	}
	if len(rows) != 3 {
		t.Errorf("sessions with no daemon: %v", rows)
	}
	if h := w.mustCtx("agent", "history", "ap", "--session", "pending"); !strings.Contains(h, "  tool mark → denied (approval: deny)") {
		t.Errorf("history with no daemon:\n%s", h)
	}
	if _, err := os.Stat(filepath.Join(w.run, "system.sock")); err == nil {
		t.Error("a daemon was started")
	}
	// rm-session without a daemon removes the files itself.
	w.mustCtx("agent", "rm-session", "demo", "sleepy")
	if _, ok := w.sessionsJSON("demo")["private/sleepy"]; ok {
		t.Error("sleepy still listed")
	}

	// A daemon killed inside a run leaves the log open: interrupted, until
	// the next daemon concludes it.
	w.start()
	c := w.dial("demo")
	c.send(sendReq("k1", "sleep 60", "session", "cut"))
	c.until("delta", 10*time.Second)
	w.kill()
	if r := w.sessionsJSON("demo")["private/cut"]; r.State != "interrupted" || r.ActiveRun == "" {
		t.Errorf("after a crash: %s", r.raw)
	}
	if h := w.mustCtx("agent", "history", "demo", "--session", "cut"); !strings.Contains(h, "(interrupted: no daemon is running") {
		t.Errorf("history after a crash:\n%s", h)
	}
	w.start()
	waitFor(t, "the interrupted run to be concluded", 10*time.Second, func() bool {
		return w.sessionsJSON("demo")["private/cut"].State == "idle"
	})
	if h := w.mustCtx("agent", "history", "demo", "--session", "cut"); !strings.Contains(h, "error interrupted:") {
		t.Errorf("history after the restart:\n%s", h)
	}
}

// TestLogsFromAutostartedDaemon: a daemon a client started logs to
// daemon.log; `ctx logs` prints its tail and -f follows it.
func TestLogsFromAutostartedDaemon(t *testing.T) {
	w := newWorld(t)
	w.agent("one", nil)
	auto := w.env("CTX_NO_AUTOSTART=0") // the last value wins: the client may start a daemon
	send := exec.Command(w.ctxBin, "agent", "send", "one", "echo", "hi")
	send.Env, send.Dir = auto, t.TempDir()
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send with autostart: %v\n%s", err, out)
	}
	t.Cleanup(func() { stopDaemonOf(t, w.root) })
	if r := w.ctx("", "", "logs", "-n", "0"); r.code != 0 || !strings.Contains(r.stdout, `agent=one`) {
		t.Fatalf("ctx logs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := w.ctx("", "", "logs", "-n", "1"); r.code != 0 || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("ctx logs -n 1: exit %d %q", r.code, r.stdout)
	}
	f := exec.Command(w.ctxBin, "logs", "-f", "-n", "1")
	f.Env = w.env()
	var out syncBuffer
	f.Stdout, f.Stderr = &out, &out
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { f.Process.Kill(); f.Wait() }()
	w.agent("two", nil) // the daemon serves it within a second and says so
	waitFor(t, "the followed log to show agent two", 10*time.Second, func() bool {
		return strings.Contains(out.String(), "agent=two")
	})
}

// TestExecAgentReportsUsage: an executable agent's optional usage lines
// are summed into the done frame (and under its .d/model into
// usage_by_model, which a price table turns into cost); an agent that
// reports none gets no usage field.
func TestExecAgentReportsUsage(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("u", map[string]string{"model": "anthropic/claude-sonnet-4-5\n"})
	c := w.dial("u")
	c.send(sendReq("u1", "usage"))
	got := c.until("done", 20*time.Second)
	d := got[len(got)-1]
	if d.Status != "ok" || !strings.Contains(d.raw, `"usage":{"input":1500,"output":150,"cache_read":10}`) ||
		!strings.Contains(d.raw, `"usage_by_model":{"anthropic/claude-sonnet-4-5":{"input":1500,"output":150,"cache_read":10}}`) {
		t.Errorf("done: %s", d.raw)
	}
	c.send(sendReq("u2", "echo none"))
	got = c.until("done", 20*time.Second)
	if d := got[len(got)-1]; strings.Contains(d.raw, "usage") {
		t.Errorf("usage invented: %s", d.raw)
	}
	// after the tool_call nothing may follow, usage included (X9)
}
