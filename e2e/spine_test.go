package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoHappyPathFrameByFrame: the demo agent answers through one real
// tool call (tsh call clock in bwrap); every frame is durable and the
// socket frames equal the log lines. spec: P1 P5 X8 X7
func TestDemoHappyPathFrameByFrame(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.tool("clock", "#!/bin/sh\necho 2026-12-02 12:00:00\n")
	w.mustCtx("agent", "create", "demo", "--exec", binDir+"/demo-agent")
	c := w.dial("demo")
	c.send(sendReq("msg-1", "what time is it?"))
	got := c.until("done", 20*time.Second)
	want := []string{"user", "start", "delta", "tool_call", "tool_result", "delta", "assistant", "done"}
	if !reflect.DeepEqual(types(got), want) {
		t.Fatalf("frames %v, want %v", types(got), want)
	}
	run := got[0].Run
	for i, f := range got {
		if f.Run != run || f.Session != "default" || f.Seq != int64(i+1) {
			t.Errorf("frame %d: run %q session %q seq %d", i, f.Run, f.Session, f.Seq)
		}
	}
	if got[0].Text != "what time is it?" || got[0].ID != "msg-1" || got[1].Op != "send" {
		t.Errorf("user/start: %+v %+v", got[0], got[1])
	}
	if tc := got[3]; tc.Name != "tsh" || !reflect.DeepEqual(tc.Args, []string{"call", "clock"}) {
		t.Errorf("tool_call %+v", tc)
	}
	if tr := got[4]; tr.Status != "ok" || tr.Content != "2026-12-02 12:00:00\n" || tr.CallID != "call-1" {
		t.Errorf("tool_result %+v", tr)
	}
	if !strings.Contains(got[6].Text, "2026-12-02 12:00:00") || got[7].Status != "ok" || got[7].ID != "msg-1" {
		t.Errorf("conclusion %+v %+v", got[6], got[7])
	}
	// The log holds exactly the frames sent, byte for byte.
	ev := w.events("demo", "default")
	if len(ev) != len(got) {
		t.Fatalf("log has %d frames, socket sent %d", len(ev), len(got))
	}
	for i := range ev {
		if ev[i].raw != got[i].raw {
			t.Errorf("line %d differs:\nlog  %s\nsock %s", i, ev[i].raw, got[i].raw)
		}
	}
	// messages.jsonl: user, normalized tool result, assistant conclusion (X7).
	b, _ := os.ReadFile(filepath.Join(w.sessionDir("demo", "default"), "messages.jsonl"))
	var roles []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m struct{ Role string }
		json.Unmarshal([]byte(l), &m)
		roles = append(roles, m.Role)
	}
	if !reflect.DeepEqual(roles, []string{"user", "tool", "assistant"}) {
		t.Errorf("messages.jsonl roles %v", roles)
	}
}

// TestSendCLIExitCodesAndOutput: send prints the assistant text, exit 0;
// an unknown agent exits 2; no daemon with CTX_NO_AUTOSTART exits 3. spec: S4
func TestSendCLIExitCodesAndOutput(t *testing.T) {
	w := newWorld(t)
	r := w.ctx("", "", "agent", "send", "nope", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, "no such agent") {
		t.Errorf("unknown agent: %d %q", r.code, r.stderr)
	}
	w.agent("a", nil)
	r = w.ctx("", "", "agent", "send", "a", "echo", "hi")
	if r.code != 3 || !strings.Contains(r.stderr, "ctx daemon") {
		t.Errorf("no daemon: %d %q", r.code, r.stderr)
	}
	w.start()
	r = w.ctx("", "", "agent", "send", "a", "echo", "hello", "world")
	if r.code != 0 || r.stdout != "echo: hello world\n" {
		t.Errorf("send: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.ctx("", "from stdin", "agent", "send", "a", "-")
	if r.code != 0 || r.stdout != "unknown mode\n" {
		t.Errorf("send -: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.ctx("", "", "agent", "send", "a", "bad", "json")
	if r.code != 1 || !strings.Contains(r.stderr, "invalid_agent_output") {
		t.Errorf("run error: %d %q", r.code, r.stderr)
	}
	r = w.ctx("", "", "agent", "send", "--json", "a", "echo", "x")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 5 || !strings.Contains(r.stdout, `"type":"assistant"`) {
		t.Errorf("--json: %d %q", r.code, r.stdout)
	}
}

// TestEnvelopeAndEnvironmentCaptured: the agent's stdin is exactly one
// envelope line with the seven fields; step 1 carries the previous host
// result; the environment is .d/env plus runtime CTX_* and HOME — nothing of
// the daemon's (no PATH, no secret). spec: X2 X3 X4 X10 X11 B4 D9
func TestEnvelopeAndEnvironmentCaptured(t *testing.T) {
	w := newWorld(t)
	w.start("PROVIDER_SECRET=sk-daemon-secret", "ANTHROPIC_API_KEY=sk-ant-secret")
	w.agent("cap", map[string]string{"env": "FOO=bar baz $HOME\n"})
	ws := t.TempDir()
	c := w.dial("cap")
	c.send(sendReq("m1", "capture", "workspace", ws))
	got := c.until("done", 20*time.Second)
	if got[len(got)-1].Status != "ok" {
		t.Fatalf("run failed: %v", got)
	}
	var toolResult frame
	for _, f := range got {
		if f.Type == "tool_result" {
			toolResult = f
		}
	}
	for step := 0; step <= 1; step++ {
		raw, err := os.ReadFile(filepath.Join(ws, "envelope-"+string(rune('0'+step))+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if raw[len(raw)-1] != '\n' || strings.Count(string(raw), "\n") != 1 {
			t.Errorf("step %d: stdin is not one line + LF: %q", step, raw)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !reflect.DeepEqual(keys, []string{"history_messages", "input", "observation", "run", "schema", "step", "tool_context"}) {
			t.Errorf("step %d: fields %v", step, keys)
		}
		if string(m["schema"]) != `"cortexfs.agent-invocation/v1"` || string(m["run"]) != `"`+got[0].Run+`"` || string(m["step"]) != string(rune('0'+step)) {
			t.Errorf("step %d: schema/run/step %s %s %s", step, m["schema"], m["run"], m["step"])
		}
		if string(m["history_messages"]) != `"[]"` {
			t.Errorf("step %d: history_messages %s", step, m["history_messages"])
		}
		if step == 0 && string(m["observation"]) != "null" {
			t.Errorf("step 0 observation %s", m["observation"])
		}
		if step == 1 {
			var o map[string]any
			json.Unmarshal(m["observation"], &o)
			want := map[string]any{"tool_call_id": "call-cap", "name": "tsh", "status": toolResult.Status, "content": toolResult.Content, "truncated": false}
			if !reflect.DeepEqual(o, want) {
				t.Errorf("observation %v, want %v", o, want)
			}
		}
		envb, _ := os.ReadFile(filepath.Join(ws, "env-"+string(rune('0'+step))+".txt"))
		env := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(envb)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			env[k] = v
		}
		allowed := map[string]bool{"CTX_ROOT": true, "CTX_HOME": true, "CTX_AGENT": true, "CTX_AGENT_SUBJECT": true, "CTX_PATH": true,
			"CTX_SESSION": true, "CTX_RUN": true, "CTX_STEP": true, "HOME": true, "PWD": true, "FOO": true}
		for k := range env {
			if !allowed[k] {
				t.Errorf("step %d: unexpected variable %s", step, k)
			}
		}
		if env["FOO"] != "bar baz $HOME" || env["HOME"] != "/home/agent" || env["CTX_AGENT"] != "cap" || env["CTX_ROOT"] != "/ctx" {
			t.Errorf("step %d: env %v", step, env)
		}
		if strings.Contains(string(envb), "secret") {
			t.Errorf("a daemon secret leaked into the agent: %s", envb)
		}
	}
}

// TestCallAndStartBounds: 8 tool calls pass, the 9th is refused with
// limit_exceeded before it runs. spec: X6
func TestCallAndStartBounds(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("b", nil)
	c := w.dial("b")
	c.send(sendReq("ok8", "calls 8"))
	got := c.until("done", 60*time.Second)
	if d := got[len(got)-1]; d.Status != "ok" || got[len(got)-2].Text != "made 8 calls" {
		t.Fatalf("8 calls: %v", types(got))
	}
	c.send(sendReq("no9", "calls 9"))
	got = c.until("done", 60*time.Second)
	calls, results := 0, 0
	for _, f := range got {
		switch f.Type {
		case "tool_call":
			calls++
		case "tool_result":
			results++
		}
	}
	e := got[len(got)-2]
	if calls != 8 || results != 8 || e.Type != "error" || e.Code != "limit_exceeded" || got[len(got)-1].Status != "error" {
		t.Fatalf("9 calls: %d calls %d results, end %+v", calls, results, e)
	}
}

// TestReplayedCallIDRefused: reusing a call id in a run is invalid output,
// refused before authorization (the second call never runs). spec: X6 X9
func TestReplayedCallIDRefused(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("r", nil)
	c := w.dial("r")
	c.send(sendReq("m", "reuse"))
	got := c.until("done", 20*time.Second)
	n := 0
	for _, f := range got {
		if f.Type == "tool_call" {
			n++
		}
	}
	e := got[len(got)-2]
	if n != 1 || e.Code != "invalid_agent_output" || !strings.Contains(e.Message, "already used") {
		t.Fatalf("got %d calls, end %+v", n, e)
	}
}

// TestInvalidAgentOutput: each X9 violation gives exactly one error
// conclusion, and nothing the agent claimed is recorded as a result. spec: X9 X7 A3
func TestInvalidAgentOutput(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("x", nil)
	c := w.dial("x")
	for _, kind := range []string{"result", "approval", "done", "json", "two-calls", "after-call", "exit", "unknown-field"} {
		c.send(sendReq("bad-"+kind, "bad "+kind))
		got := c.until("done", 20*time.Second)
		errs := 0
		for _, f := range got {
			if f.Type == "error" {
				errs++
				if f.Code != "invalid_agent_output" {
					t.Errorf("%s: code %s", kind, f.Code)
				}
			}
			if f.Type == "tool_result" || f.Type == "approval" || f.Type == "assistant" || f.Type == "tool_call" {
				t.Errorf("%s: recorded %s from invalid output", kind, f.Type)
			}
		}
		if errs != 1 || got[len(got)-1].Status != "error" {
			t.Errorf("%s: %d error frames, frames %v", kind, errs, types(got))
		}
	}
}

// TestRequestIDReplay: a repeated id streams the stored frames marked
// replay and runs nothing — also after a daemon restart; a different
// payload under the same id is refused. spec: P4
func TestRequestIDReplay(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("p", nil)
	c := w.dial("p")
	c.send(sendReq("same", "echo once"))
	first := c.until("done", 20*time.Second)
	n := len(w.events("p", "default"))
	c.send(sendReq("same", "echo once"))
	again := c.until("done", 10*time.Second)
	if len(again) != len(first) {
		t.Fatalf("replay has %d frames, first %d", len(again), len(first))
	}
	for i := range again {
		if !again[i].Replay || again[i].Seq != first[i].Seq || again[i].Text != first[i].Text {
			t.Errorf("replayed frame %d: %s", i, again[i].raw)
		}
	}
	if len(w.events("p", "default")) != n {
		t.Error("replay appended to the log")
	}
	c.send(sendReq("same", "echo different"))
	if f := c.must(5 * time.Second); f.Type != "error" || f.Code != "id_conflict" {
		t.Errorf("conflict: %s", f.raw)
	}
	w.stop()
	w.start()
	c = w.dial("p")
	c.send(sendReq("same", "echo once"))
	after := c.until("done", 10*time.Second)
	if len(after) != len(first) || !after[0].Replay {
		t.Errorf("after restart: %v", types(after))
	}
	if len(w.events("p", "default")) != n {
		t.Error("replay after restart appended to the log")
	}
	// CLI: the same id replays and prints the same answer.
	dir := t.TempDir() // the workspace is part of the request
	r1 := w.ctx(dir, "", "agent", "send", "--id", "cli-1", "p", "echo", "cli")
	r2 := w.ctx(dir, "", "agent", "send", "--id", "cli-1", "p", "echo", "cli")
	if r1.stdout != "echo: cli\n" || r2.stdout != r1.stdout || r2.code != 0 {
		t.Errorf("cli replay: %q %q", r1.stdout, r2.stdout)
	}
}

// TestRequestIDReplayWhileRunning: the same id on a second connection while
// the first is running attaches to the live run; it never starts a second. spec: P4
func TestRequestIDReplayWhileRunning(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("s", nil)
	a, b := w.dial("s"), w.dial("s")
	a.send(sendReq("live", "sleep 1"))
	a.until("delta", 10*time.Second)
	b.send(sendReq("live", "sleep 1"))
	ga := a.until("done", 20*time.Second)
	gb := b.until("done", 20*time.Second)
	if ga[len(ga)-1].Status != "ok" || gb[len(gb)-1].Status != "ok" || !gb[0].Replay {
		t.Fatalf("a %v b %v", types(ga), types(gb))
	}
	starts := 0
	for _, f := range w.events("s", "default") {
		if f.Type == "start" {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("%d runs started for one id", starts)
	}
}

// TestCancelTrapsSIGTERMAndSetsidGrandchild: cancel ends the run at once
// (cancelled, done); the agent ignores SIGTERM and has a setsid grandchild,
// yet after the grace period nothing of the sandbox is alive and no zombie
// is left. Nothing printed after the cancel is recorded. spec: X12 X6 A5
func TestCancelTrapsSIGTERMAndSetsidGrandchild(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("t", nil)
	marker := "ctx-e2e-marker-" + filepath.Base(w.root[:len(w.root)-5])
	c := w.dial("t")
	c.send(sendReq("trap", "trap "+marker))
	c.until("delta", 10*time.Second)
	waitFor(t, "the grandchild", 5*time.Second, func() bool { return len(procsWith(marker)) >= 1 })
	sandbox := childrenOf(w.daemon.Process.Pid)
	if len(sandbox) == 0 {
		t.Fatal("no sandbox process under the daemon")
	}
	r := w.ctx("", "", "agent", "cancel", "t")
	if r.code != 0 || !strings.Contains(r.stdout, "cancelled run-") {
		t.Fatalf("cancel: %d %q %q", r.code, r.stdout, r.stderr)
	}
	got := c.until("done", 10*time.Second)
	if got[len(got)-2].Type != "cancelled" || got[len(got)-1].Status != "cancelled" {
		t.Fatalf("frames %v", types(got))
	}
	waitFor(t, "the sandbox to die", 10*time.Second, func() bool {
		for _, pid := range sandbox {
			if _, err := os.Stat("/proc/" + itoa(pid)); err == nil {
				return false
			}
		}
		return len(procsWith(marker)) == 0
	})
	// No zombie children of the daemon.
	waitFor(t, "no zombies", 5*time.Second, func() bool {
		for _, pid := range childrenOf(w.daemon.Process.Pid) {
			if b, _ := os.ReadFile("/proc/" + itoa(pid) + "/stat"); strings.Contains(string(b), ") Z ") {
				return false
			}
		}
		return true
	})
	ev := w.events("t", "default")
	if last := ev[len(ev)-1]; last.Type != "done" || last.Status != "cancelled" {
		t.Errorf("log ends with %s", last.raw)
	}
	// The session serves the next request.
	c.send(sendReq("after", "echo after"))
	if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
		t.Errorf("after cancel: %v", types(got))
	}
}

// TestDaemonSIGKILLMidRun: the log stays intact, the interrupted run is
// concluded by the next daemon, its sandbox is gone, and a new send works. spec: L4 X7
func TestDaemonSIGKILLMidRun(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("k", nil)
	marker := "ctx-e2e-kill-" + filepath.Base(w.root[:len(w.root)-5])
	c := w.dial("k")
	c.send(sendReq("doomed", "trap "+marker))
	c.until("delta", 10*time.Second)
	w.kill()
	waitFor(t, "the sandbox to die with the daemon", 10*time.Second, func() bool { return len(procsWith(marker)) == 0 })
	w.start()
	waitFor(t, "the interrupted run to be concluded", 10*time.Second, func() bool {
		ev := w.events("k", "default")
		return ev[len(ev)-1].Type == "done"
	})
	ev := w.events("k", "default")
	n := len(ev)
	if ev[n-2].Type != "error" || ev[n-2].Code != "interrupted" || ev[n-1].Status != "error" || ev[n-1].ID != "doomed" {
		t.Fatalf("log ends %s / %s", ev[n-2].raw, ev[n-1].raw)
	}
	for i, f := range ev {
		if f.Seq != int64(i+1) {
			t.Fatalf("seq %d at line %d", f.Seq, i+1)
		}
	}
	r := w.ctx("", "", "agent", "send", "k", "echo", "alive")
	if r.code != 0 || r.stdout != "echo: alive\n" {
		t.Fatalf("send after restart: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestRunActorPanicRestartsWithoutAuthority: a fault injected into the run
// actor at its tool call (test build) makes the supervisor restart it; the
// new incarnation does not run the call, it concludes the run as
// interrupted; the daemon keeps serving. spec: L4 X7
func TestRunActorPanicRestartsWithoutAuthority(t *testing.T) {
	w := newWorld(t)
	w.ctxBin = binDir + "/fault/ctx"
	w.start("CTX_FAULT=run.tool_call")
	w.tool("mark", "#!/bin/sh\ntouch /workspace/tool-ran\n")
	w.agent("f", map[string]string{"tools": "mark\n"})
	ws := t.TempDir()
	c := w.dial("f")
	c.send(sendReq("boom", "tool mark", "workspace", ws))
	got := c.until("done", 20*time.Second)
	e := got[len(got)-2]
	if e.Type != "error" || e.Code != "interrupted" || got[len(got)-1].Status != "error" {
		t.Fatalf("frames %v end %+v", types(got), e)
	}
	if _, err := os.Stat(filepath.Join(ws, "tool-ran")); err == nil {
		t.Fatal("the tool ran although its run crashed before authorizing it")
	}
	c.send(sendReq("next", "echo still here"))
	if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
		t.Fatalf("next run: %v", types(got))
	}
}

// TestBadInputTable: every bad request gets its error frame, the connection
// stays usable (except an over-long line, which closes it), nothing is
// recorded, and other clients are served. spec: P2
func TestBadInputTable(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("b", nil)
	big := strings.Repeat("x", 512<<10+1)
	cases := []struct {
		name, line, code string
	}{
		{"not json", `this is not json`, "bad_request"},
		{"no op", `{"id":"x"}`, "bad_request"},
		{"unknown op", `{"op":"explode"}`, "bad_request"},
		{"unknown field", `{"op":"send","id":"a","session":"default","input":"x","colour":"red"}`, "bad_request"},
		{"send without id", `{"op":"send","session":"default","input":"x"}`, "bad_request"},
		{"send without input", `{"op":"send","id":"a","session":"default"}`, "bad_request"},
		{"bad session name", `{"op":"send","id":"a","session":"../../etc","input":"x"}`, "bad_name"},
		{"bad scope", `{"op":"send","id":"a","session":"s","scope":"public","input":"x"}`, "bad_request"},
		{"relative workspace", `{"op":"send","id":"a","session":"s","input":"x","workspace":"tmp"}`, "bad_request"},
		{"missing workspace", `{"op":"send","id":"a","session":"s","input":"x","workspace":"/nonexistent/dir"}`, "bad_request"},
		{"relative cwd", `{"op":"send","id":"a","session":"s","input":"x","cwd":"work"}`, "bad_request"},
		{"input too large", `{"op":"send","id":"a","session":"s","input":"` + big + `"}`, "too_large"},
		{"tsh without args", `{"op":"tsh","id":"a","session":"s"}`, "bad_request"},
		{"approve with nothing pending", `{"op":"approve","run":"r","id":"c","decision":"allow_once"}`, "bad_request"},
		{"cancel unknown run", `{"op":"cancel","session":"s","id":"run-9"}`, "not_found"},
		{"invalid utf-8", "{\"op\":\"ping\",\"id\":\"\xff\"}", "bad_request"},
		// A ping that once started a run, and its kin.
		{"case-variant op", `{"op":"ping","OP":"send","id":"a","session":"s","input":"x"}`, "bad_request"},
		{"duplicate op", `{"op":"ping","op":"send","id":"a","session":"s","input":"x"}`, "bad_request"},
		{"duplicate input", `{"op":"send","id":"a","session":"s","input":"x","input":"y"}`, "bad_request"},
		{"case-variant session", `{"op":"send","id":"a","session":"s","Session":"t","input":"x"}`, "bad_request"},
		// An explicit empty session is not "default".
		{"empty session", `{"op":"send","id":"a","session":"","input":"x"}`, "bad_name"},
		// A cwd that cannot exist in the view is refused before recording.
		{"cwd without workspace", `{"op":"send","id":"a","session":"s","input":"x","cwd":"/srv/project"}`, "bad_request"},
		{"workspace cwd without workspace", `{"op":"send","id":"a","session":"s","input":"x","cwd":"/workspace/src"}`, "bad_request"},
		{"missing home cwd", `{"op":"send","id":"a","session":"s","input":"x","cwd":"/home/agent/nope"}`, "bad_request"},
		{"missing workspace cwd", `{"op":"send","id":"a","session":"s","input":"x","workspace":"` + t.TempDir() + `","cwd":"/workspace/nope"}`, "bad_request"},
	}
	c := w.dial("b")
	for _, tc := range cases {
		c.send(tc.line)
		f := c.must(5 * time.Second)
		if f.Type != "error" || f.Code != tc.code {
			t.Errorf("%s: got %s", tc.name, f.raw)
		}
		c.send(`{"op":"ping"}`)
		if f := c.must(5 * time.Second); f.Type != "pong" {
			t.Errorf("%s: connection not usable after: %s", tc.name, f.raw)
		}
	}
	for _, sess := range []string{"s", "t", "default"} {
		if _, err := os.Stat(w.sessionDir("b", sess) + "/events.jsonl"); err == nil {
			if ev := w.events("b", sess); len(ev) != 0 {
				t.Errorf("bad requests recorded in %s: %v", sess, ev)
			}
		}
	}
	// A line over 1 MiB: error, then the connection is closed.
	c.send(`{"op":"send","id":"a","session":"s","input":"` + strings.Repeat("y", 1<<20) + `"}`)
	if f := c.must(5 * time.Second); f.Code != "too_large" {
		t.Errorf("over-long line: %s", f.raw)
	}
	if _, err := c.next(5 * time.Second); err == nil {
		t.Error("connection stayed open after an over-long line")
	}
	// Others are still served.
	r := w.ctx("", "", "agent", "send", "b", "echo", "ok")
	if r.code != 0 {
		t.Errorf("daemon stopped serving: %d %s", r.code, r.stderr)
	}
}

// TestBusyQueue: sends wait their turn behind an active run, at most 16;
// the 17th is refused busy; the queued ones run in order.
func TestBusyQueue(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("q", nil)
	a := w.dial("q")
	a.send(sendReq("first", "sleep 30"))
	a.until("delta", 10*time.Second)
	var waiting []*client
	for i := 0; i < 16; i++ {
		c := w.dial("q")
		c.send(sendReq("w"+itoa(i), "echo "+itoa(i)))
		waiting = append(waiting, c)
	}
	time.Sleep(200 * time.Millisecond)
	c := w.dial("q")
	c.send(sendReq("w-too-many", "echo x"))
	if f := c.must(5 * time.Second); f.Code != "busy" {
		t.Fatalf("17th: %s", f.raw)
	}
	w.mustCtx("agent", "cancel", "q")
	for i, c := range waiting {
		got := c.until("done", 30*time.Second)
		if got[0].Type != "user" || got[len(got)-2].Text != "echo: "+itoa(i) {
			t.Errorf("queued %d: %v", i, types(got))
		}
	}
}

// TestSlowClientDropped: a client that never reads is dropped with a reason
// while the run completes and stays durable; other clients are served.
func TestSlowClientDropped(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("sp", nil)
	slow := w.dial("sp")
	slow.send(sendReq("spew", "spew 30000"))
	waitFor(t, "the run to finish", 60*time.Second, func() bool {
		ev, err := os.ReadFile(w.sessionDir("sp", "default") + "/events.jsonl")
		return err == nil && strings.Contains(string(ev), `"type":"done"`)
	})
	r := w.ctx("", "", "agent", "send", "sp", "echo", "fine")
	if r.code != 0 {
		t.Fatalf("others not served: %s", r.stderr)
	}
	// What the slow client got ends before done (with slow_client when the
	// reason still fit in its socket buffer), and the daemon logged the drop.
	var last frame
	for {
		f, err := slow.next(5 * time.Second)
		if err != nil {
			break
		}
		last = f
	}
	if last.Type == "done" {
		t.Errorf("the slow client got the whole stream")
	}
	if !strings.Contains(w.log.String(), "dropped a client") {
		t.Errorf("drop not logged:\n%s", w.log.String())
	}
}

// TestSlowSendReattaches: `ctx agent send` whose output nobody reads for a
// while falls behind a flood and is dropped (slow_client); it follows the
// run again with the same id (P4: replayed, not run twice) and prints the
// whole answer exactly once, exit 0. spec: P4 P2
func TestSlowSendReattaches(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("sp", nil)
	const n = 30000
	cmd := exec.Command(w.ctxBin, "agent", "send", "--id", "flood-1", "sp", "spew", itoa(n))
	cmd.Env, cmd.Dir = w.env(), t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Nobody reads its stdout until the run is over and the drop logged.
	waitFor(t, "the run to finish and the client to be dropped", 90*time.Second, func() bool {
		ev, err := os.ReadFile(w.sessionDir("sp", "default") + "/events.jsonl")
		return err == nil && strings.Contains(string(ev), `"type":"done"`) && strings.Contains(w.log.String(), "dropped a client")
	})
	got, err := io.ReadAll(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ctx agent send: %v\n%s", err, stderr.String())
	}
	want := strings.Repeat(strings.Repeat("x", 99)+"\n", n)
	if string(got) != want {
		t.Errorf("printed %d bytes (%d lines), want %d (%d lines)", len(got), strings.Count(string(got), "\n"), len(want), n)
	}
	starts := 0
	for _, f := range w.events("sp", "default") {
		if f.Type == "start" {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("the request ran %d times", starts)
	}
	// The 3 MB reply's assistant frame keeps its first 1 MiB, and says so.
	evs := w.events("sp", "default")
	if a := lastOf(evs, "assistant"); len(a.Text) != 1<<20 || !strings.Contains(lastOf(evs, "warning").Message, "keeps the first") {
		t.Errorf("assistant of %d bytes, warning %q", len(a.Text), lastOf(evs, "warning").Message)
	}
}

// TestResumeFollowsActiveRun: resume streams history, caught_up, then the
// live run to its done. spec: P2
func TestResumeFollowsActiveRun(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("re", nil)
	w.mustCtx("agent", "send", "re", "echo", "one")
	a := w.dial("re")
	a.send(sendReq("two", "sleep 1"))
	a.until("delta", 10*time.Second)
	b := w.dial("re")
	b.send(map[string]any{"op": "resume", "session": "default"})
	got := b.until("caught_up", 10*time.Second)
	cu := got[len(got)-1]
	if cu.ActiveRun == nil || *cu.ActiveRun == "" || got[0].Type != "user" || got[0].Text != "echo one" {
		t.Fatalf("resume: %v %s", types(got), cu.raw)
	}
	live := b.until("done", 10*time.Second)
	if live[len(live)-1].Run != *cu.ActiveRun || live[len(live)-1].Status != "ok" {
		t.Fatalf("live: %v", types(live))
	}
	r := w.ctx("", "", "agent", "resume", "re")
	if r.code != 0 || !strings.Contains(r.stdout, "> echo one") || !strings.Contains(r.stdout, "echo: one") {
		t.Errorf("resume CLI: %d %q", r.code, r.stdout)
	}
}

// TestSocketModesAndNewDefinitions: sockets are 0600 in 0700 directories;
// a definition created while the daemon runs is served within a second;
// removing it removes its socket but keeps its sessions. spec: A4 L6
func TestSocketModesAndNewDefinitions(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("late", nil)
	sock := filepath.Join(w.run, "agent", "late.sock")
	waitFor(t, "the new agent's socket", 2*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
	for p, want := range map[string]os.FileMode{sock: 0o600, w.run + "/system.sock": 0o600, w.run: 0o700, filepath.Dir(sock): 0o700} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v", p, st.Mode().Perm(), err)
		}
	}
	w.mustCtx("agent", "send", "late", "echo", "x")
	w.mustCtx("agent", "rm", "late")
	waitFor(t, "the socket to go", 3*time.Second, func() bool { _, err := os.Stat(sock); return err != nil })
	if _, err := os.Stat(w.sessionDir("late", "default") + "/events.jsonl"); err != nil {
		t.Errorf("session deleted with the definition: %v", err)
	}
}

// TestAgentShScript: agent.sh resolves ctx and execs ctx agent. spec: S7 D1
func TestAgentShScript(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("sh", nil)
	b, err := os.ReadFile("../agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "socket") || strings.Contains(string(b), "nc ") || strings.Contains(string(b), "{\"op\"") {
		t.Error("agent.sh contains protocol code")
	}
	cmd := execCmd(w, "../agent.sh", "sh", "echo", "via", "agent.sh")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "echo: via agent.sh\n" {
		t.Fatalf("agent.sh: %v %q", err, out)
	}
}

func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == itoa(pid) {
			// Not the daemon's reaper (ctxd reap): it lives as long as the
			// daemon and is no sandbox.
			cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if args := strings.Split(string(cl), "\x00"); len(args) > 1 && args[1] == "reap" {
				continue
			}
			n, _ := atoi(e.Name())
			out = append(out, n)
		}
	}
	return out
}

var _ = syscall.SIGTERM

// TestDaemonSIGTERMCancelsRuns: SIGTERM to the daemon cancels the active
// run (SIGTERM→grace→SIGKILL to the agent) — it ends cancelled, not
// interrupted — and the client following it gets cancelled and done before
// its connection closes; a request waiting behind it is told the daemon is
// shutting down and nothing of it is recorded. spec: X12
func TestDaemonSIGTERMCancelsRuns(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("st", nil)
	a := w.dial("st")
	a.send(sendReq("long", "sleep 30"))
	a.until("delta", 10*time.Second)
	b := w.dial("st")
	b.send(sendReq("queued", "echo later"))
	time.Sleep(200 * time.Millisecond) // queued behind the active run
	_ = w.daemon.Process.Signal(syscall.SIGTERM)
	got := a.until("done", 15*time.Second)
	if d := got[len(got)-1]; d.Status != "cancelled" || d.ID != "long" {
		t.Errorf("the follower saw %v ending %s", types(got), d.raw)
	}
	sawCancelled := false
	for _, f := range got {
		sawCancelled = sawCancelled || f.Type == "cancelled"
	}
	if !sawCancelled {
		t.Errorf("no cancelled frame before done: %v", types(got))
	}
	if f := b.must(10 * time.Second); f.Type != "error" || f.Code != "shutting_down" {
		t.Errorf("the waiting request got %s", f.raw)
	}
	select {
	case <-w.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the daemon did not exit")
	}
	w.daemon = nil
	ev := w.events("st", "default")
	if last := ev[len(ev)-1]; last.Type != "done" || last.Status != "cancelled" {
		t.Errorf("the log ends %s", last.raw)
	}
	for _, f := range ev {
		if f.ID == "queued" || strings.Contains(f.Text, "later") {
			t.Errorf("the waiting request was recorded: %s", f.raw)
		}
	}
	if pids := procsWith(binDir + "/testagent"); len(pids) > 0 {
		t.Errorf("agent processes left: %v", pids)
	}
}

// TestRequestIDConflictTsh: a tsh request that reuses an id with other args
// is id_conflict — live, while queued, and after a daemon restart — and
// never replays the first result. spec: P4
func TestRequestIDConflictTsh(t *testing.T) {
	w := newWorld(t)
	w.start()
	w.agent("dg", nil)
	c := w.dial("dg")
	c.send(map[string]any{"op": "tsh", "id": "same", "session": "s", "args": []string{"list"}})
	c.until("done", 10*time.Second)
	c.send(map[string]any{"op": "tsh", "id": "same", "session": "s", "args": []string{"context"}})
	if f := c.must(5 * time.Second); f.Code != "id_conflict" {
		t.Errorf("reused id with other args: %s", f.raw)
	}
	// Queued behind an active run: the same id with another payload.
	a := w.dial("dg")
	a.send(sendReq("busy", "sleep 30", "session", "q"))
	a.until("delta", 10*time.Second)
	b := w.dial("dg")
	b.send(map[string]any{"op": "tsh", "id": "waiting", "session": "q", "args": []string{"list"}})
	time.Sleep(100 * time.Millisecond)
	b.send(map[string]any{"op": "tsh", "id": "waiting", "session": "q", "args": []string{"context"}})
	if f := b.must(5 * time.Second); f.Code != "id_conflict" {
		t.Errorf("queued id reused with other args: %s", f.raw)
	}
	w.ctx("", "", "agent", "cancel", "dg", "--session", "q")
	w.stop()
	w.start()
	c = w.dial("dg")
	c.send(map[string]any{"op": "tsh", "id": "same", "session": "s", "args": []string{"context"}})
	if f := c.must(5 * time.Second); f.Code != "id_conflict" {
		t.Errorf("after a restart: %s", f.raw)
	}
}
