package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// controlWorkspace is a workspace holding a copy of the attack binary, so
// that an agent step (which sees no tool file) can run it too.
func controlWorkspace(t *testing.T, w *world) string {
	t.Helper()
	ws := w.workspace()
	b, err := os.ReadFile(binDir + "/attack")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "attack"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// systemMD writes the agent's system.md and returns a check that it is
// still byte-identical.
func systemMD(t *testing.T, w *world, agent, content string) (path string) {
	t.Helper()
	path = filepath.Join(w.root, "agent", agent+".d", "system.md")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deltaText joins a run's delta frames.
func deltaText(fs []frame) string {
	var b strings.Builder
	for _, f := range fs {
		if f.Type == "delta" {
			b.WriteString(f.Text)
		}
	}
	return b.String()
}

// TestSecurityHostControlSocketDenied: with `deny tool agent.update` in the
// agent's policy, nothing inside a run can rewrite system.md by speaking
// the control-socket protocol directly: not the agent step itself, not a
// tool process, not a `bash` tool call (the standard toolset's). The view
// is the authority: the socket is absent from it (README
// "Self-iteration"; docs/walls.md "The control socket"). The tool itself
// is refused by the same verdict. spec: U2 V3
func TestSecurityHostControlSocketDenied(t *testing.T) {
	w := newStdWorld(t)
	w.start()
	installAttack(t, w)
	w.agent("a", map[string]string{"tools": "attack\nbash\n", "policy": "allow tool *\ndeny tool agent.update\n"})
	sys := systemMD(t, w, "a", "ORIGINAL system.md\n")
	ws := controlWorkspace(t, w)
	os.WriteFile(filepath.Join(ws, "ctl.sh"), []byte("#!/bin/sh\nexec /ctx/tool/attack ctl-update system.md PWNED-bash\n"), 0o755)
	const sock = "socket:/run/cortexfs/control.sock="

	// The agent step itself.
	c := w.dial("a")
	c.send(sendReq("step-1", "run /workspace/attack ctl-update system.md PWNED-step", "workspace", ws))
	out := deltaText(c.until("done", 30*time.Second))
	if !strings.Contains(out, sock+"absent") {
		t.Errorf("agent step: the control socket is in the view:\n%s", out)
	}
	// A tool process.
	tr, _ := callTool(t, w, "a", ws, "attack", "ctl-update", "system.md", "PWNED-tool")
	if !strings.Contains(tr.Content, sock+"absent") {
		t.Errorf("tool: the control socket is in the view:\n%s", tr.Content)
	}
	// A bash tool call.
	tr, _ = callTool(t, w, "a", ws, "bash", "/workspace/ctl.sh")
	if !strings.Contains(tr.Content, sock+"absent") {
		t.Errorf("bash: the control socket is in the view:\n%s", tr.Content)
	}
	// The tool itself: refused by the same verdict.
	tr, _ = callTool(t, w, "a", ws, "tsh", "call", "agent.update", "--control", "system.md", "--file", "/workspace/ctl.sh")
	if tr.Status != "denied" || tr.Layer != "agent-policy" {
		t.Errorf("tsh call agent.update: %s", tr.raw)
	}
	if got := mustRead(t, sys); got != "ORIGINAL system.md\n" {
		t.Errorf("system.md changed: %q", got)
	}
}

// TestSecurityHostControlSocketPolicyChangedMidRun: a sandbox started
// while agent.update was allowed has the socket; the policy then denies
// it. An update that arrives afterwards is refused (EPERM) by the host's
// own check of the same verdict, and system.md stays byte-identical: the
// socket never grants more than a call of agent.update would. spec: V3 U2
func TestSecurityHostControlSocketPolicyChangedMidRun(t *testing.T) {
	w := newWorld(t)
	w.start()
	installAttack(t, w)
	w.agent("a", map[string]string{"tools": "attack\n", "policy": "allow tool *\n"})
	sys := systemMD(t, w, "a", "ORIGINAL system.md\n")
	ws := w.workspace()

	c := w.dial("a")
	c.send(sendReq("late-1", "tool attack ctl-update --wait /workspace/go system.md PWNED-late", "workspace", ws))
	waitFor(t, "the tool to run", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(ws, "go.ready"))
		return err == nil
	})
	w.writeControl("a", "policy", "allow tool *\ndeny tool agent.update\n")
	os.WriteFile(filepath.Join(ws, "go"), nil, 0o644)
	fs := c.until("done", 90*time.Second)
	var content string
	for _, f := range fs {
		if f.Type == "tool_result" {
			content = f.Content
		}
	}
	if !strings.Contains(content, "socket:/run/cortexfs/control.sock=present") || !strings.Contains(content, `"errno":"EPERM"`) {
		t.Errorf("the update after the policy changed was not refused with EPERM:\n%s", content)
	}
	if got := mustRead(t, sys); got != "ORIGINAL system.md\n" {
		t.Errorf("system.md changed: %q", got)
	}
}

// TestSecurityHostControlSocketAsk: with .d/approval ask, an update that
// arrives on the control socket — from the agent step, or from a tool the
// person approved — is approved like any call: one approval_request on
// the requester's connection, recorded with its answer, before anything
// is written. deny, no answer (timeout) and a closed connection (eof)
// leave system.md byte-identical; allow_once writes it. spec: A2 A3 U4
func TestSecurityHostControlSocketAsk(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_APPROVAL_TIMEOUT=3s")
	installAttack(t, w)
	w.agent("a", map[string]string{"tools": "attack\n", "approval": "ask\n"})
	const orig = "ORIGINAL system.md\n"
	sys := systemMD(t, w, "a", orig)
	ws := controlWorkspace(t, w)

	// update sends input and answers the update's approval_request with
	// decision ("" = no answer, "close" = close the connection); a tool
	// call's own approval is answered allow_once first.
	update := func(id, input, decision string) (req frame, out []frame) {
		t.Helper()
		c := w.dial("a")
		c.send(sendReq(id, input, "workspace", ws))
		for {
			fs := c.until("approval_request", 30*time.Second)
			out = append(out, fs...)
			req = fs[len(fs)-1]
			if req.Name == "agent.update" {
				break
			}
			c.send(map[string]string{"op": "approve", "run": req.Run, "id": req.ID, "decision": "allow_once"})
		}
		if !strings.HasPrefix(req.ID, "update:attack-") || len(req.Args) != 4 || req.Args[1] != "system.md" || !strings.HasPrefix(req.Args[3], "NEW-") {
			t.Errorf("approval_request of the update: %s", req.raw)
		}
		switch decision {
		case "":
		case "close":
			c.c.Close()
			time.Sleep(500 * time.Millisecond)
			return req, out
		default:
			c.send(map[string]string{"op": "approve", "run": req.Run, "id": req.ID, "decision": decision})
		}
		return req, append(out, c.until("done", 30*time.Second)...)
	}
	recorded := func(req frame) string {
		t.Helper()
		saw := false
		for _, f := range w.events("a", "default") {
			if f.Type == "approval_request" && f.ID == req.ID && f.Run == req.Run {
				saw = true
			}
			if f.Type == "approval" && f.ID == req.ID && f.Run == req.Run {
				if !saw {
					t.Errorf("approval %s recorded without its request", f.raw)
				}
				return f.Decision
			}
		}
		return ""
	}

	for _, tc := range []struct{ name, input, decision, recorded string }{
		{"step-deny", "run /workspace/attack ctl-update system.md NEW-step-deny", "deny", "deny"},
		{"tool-deny", "tool attack ctl-update system.md NEW-tool-deny", "deny", "deny"},
		{"step-timeout", "run /workspace/attack ctl-update system.md NEW-step-timeout", "", "timeout"},
		{"step-eof", "run /workspace/attack ctl-update system.md NEW-step-eof", "close", "eof"},
	} {
		req, out := update(tc.name, tc.input, tc.decision)
		if tc.decision == "close" {
			waitFor(t, "the eof to be recorded", 20*time.Second, func() bool { return recorded(req) != "" })
		} else if text := deltaText(out) + contentOf(out); !strings.Contains(text, `"errno":"EPERM"`) {
			t.Errorf("%s: the update was not refused:\n%s", tc.name, text)
		}
		if d := recorded(req); d != tc.recorded {
			t.Errorf("%s: recorded decision %q, want %q", tc.name, d, tc.recorded)
		}
		if got := mustRead(t, sys); got != orig {
			t.Fatalf("%s: system.md changed: %q", tc.name, got)
		}
	}
	// Wait until the eof run is over before the next request.
	waitFor(t, "the eof run's done", 30*time.Second, func() bool {
		ev := w.events("a", "default")
		return ev[len(ev)-1].Type == "done"
	})
	// A flood: twelve updates at once, unanswered. At most eight are asked
	// (and recorded); the rest are refused unasked; nothing is written.
	req, out := update("step-flood", "run /workspace/attack ctl-update --repeat 12 system.md NEW-flood", "")
	asked := 0
	for _, f := range w.events("a", "default") {
		if f.Type == "approval_request" && f.Run == req.Run && f.Name == "agent.update" {
			asked++
		}
	}
	text := deltaText(out)
	if asked != 8 || strings.Count(text, "denied by approval: limit") != 4 || strings.Contains(text, `"ok":true`) {
		t.Errorf("flood: %d asked, want 8; answers:\n%s", asked, text)
	}
	if got := mustRead(t, sys); got != orig {
		t.Fatalf("flood: system.md changed: %q", got)
	}
	req, out = update("step-allow", "run /workspace/attack ctl-update system.md NEW-allowed", "allow_once")
	if text := deltaText(out); !strings.Contains(text, `{"ok":true}`) {
		t.Errorf("allow_once: %s", text)
	}
	if d := recorded(req); d != "allow_once" {
		t.Errorf("allow_once recorded as %q", d)
	}
	if got := mustRead(t, sys); got != "NEW-allowed" {
		t.Errorf("system.md after allow_once: %q", got)
	}
}

// contentOf joins a run's tool_result contents.
func contentOf(fs []frame) string {
	var b strings.Builder
	for _, f := range fs {
		if f.Type == "tool_result" {
			b.WriteString(f.Content)
		}
	}
	return b.String()
}
