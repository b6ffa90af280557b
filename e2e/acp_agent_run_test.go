package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// spec: X6 — an acp-v1 run as real agents need it: a PATH, ACP's
// resource-not-found, a raisable call bound that counts a reported call
// and its terminal once, reported calls recorded with what the agent said,
// and an idle bound on a prompt.

// TestACPRunPath: an agent that spawns its own shell finds `ls` (it got
// the terminal's PATH), and .d/env may still set PATH.
func TestACPRunPath(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	fs := w.follow("acpa", sendReq("msg-1", "shell"), 60*time.Second)
	if got := lastOf(fs, "assistant").Text; !strings.HasPrefix(got, "ls=/") || !strings.Contains(got, "code=0") {
		t.Errorf("shell: %q\n%s", got, rawFrames(fs))
	}
	fs = w.follow("acpa", sendReq("msg-0", "env"), 60*time.Second)
	if got := lastOf(fs, "assistant").Text; !strings.HasSuffix(got, "path=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("PATH: %q", got)
	}
	w.mustCtx("agent", "set", "acpa", "env", "PATH=/bin\n")
	fs = w.follow("acpa", sendReq("msg-2", "env"), 60*time.Second)
	if got := lastOf(fs, "assistant").Text; !strings.HasSuffix(got, "path=/bin") {
		t.Errorf(".d/env PATH: %q", got)
	}
	noProcs(t, marker)
}

// TestACPRunMissingFile: a missing file, and a file under a missing
// directory or under a regular file, answer -32002 (resource not found);
// a directory answers Node's EISDIR words.
func TestACPRunMissingFile(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	ws := w.workspace()
	os.WriteFile(filepath.Join(ws, "plain.txt"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	ops := []map[string]string{
		{"op": "read", "path": "/workspace/missing.txt"},
		{"op": "read", "path": "/workspace/nodir/deeper/x.txt"},
		{"op": "read", "path": "/workspace/plain.txt/x"},
		{"op": "read", "path": "/workspace/dir"},
		{"op": "write", "path": "/workspace/new.txt", "content": "created"},
	}
	b, _ := json.Marshal(ops)
	fs := w.follow("acpa", sendReq("msg-1", "fsops "+base64.StdEncoding.EncodeToString(b), "workspace", ws), 60*time.Second)
	text := lastOf(fs, "assistant").Text
	var res []struct {
		Path string `json:"path"`
		OK   bool   `json:"ok"`
		Code any    `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(text, "fsres=")), &res); err != nil || len(res) != len(ops) {
		t.Fatalf("fsres %q: %v", text, err)
	}
	for _, r := range res[:3] {
		if r.OK || fmt.Sprint(r.Code) != "-32002" {
			t.Errorf("%s: ok=%v code=%v msg=%q, want -32002", r.Path, r.OK, r.Code, r.Msg)
		}
	}
	if r := res[3]; r.OK || !strings.Contains(r.Msg, "EISDIR: illegal operation on a directory") {
		t.Errorf("directory: %+v", r)
	}
	if !res[4].OK {
		t.Errorf("new file: %+v", res[4])
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "created" {
		t.Errorf("new.txt = %q", b)
	}
	noProcs(t, marker)
}

// TestACPRunCallBound: with `calls 20` in .d/limits, 12 commands (each a
// reported call and its terminal, counted once) and 8 more reported calls
// run; the 21st call concludes limit_exceeded. With the default bound, 8
// such commands run (they would stop after 4 if counted twice).
func TestACPRunCallBound(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	fs := w.follow("acpa", sendReq("msg-1", "many 8 0"), 60*time.Second)
	if d := lastOf(fs, "done"); d.Status != "ok" || lastOf(fs, "assistant").Text != "many done" {
		t.Fatalf("8 commands under the default bound: %s", rawFrames(fs))
	}
	if r := w.ctx("", "", "agent", "set", "acpa", "limits", "calls 1001\n"); r.code == 0 || !strings.Contains(r.stderr, "outside 1…1000") {
		t.Errorf("calls 1001 accepted: %d %s", r.code, r.stderr)
	}
	w.mustCtx("agent", "set", "acpa", "limits", "calls 20\n")
	fs = w.follow("acpa", sendReq("msg-2", "many 12 9"), 120*time.Second)
	e := lastOf(fs, "error")
	if e.Code != "limit_exceeded" || !strings.Contains(e.Message, "20 tool calls") {
		t.Fatalf("error %s\n%s", e.raw, rawFrames(fs))
	}
	var reported, terms, termOK int
	for _, f := range fs {
		switch {
		case f.Type == "tool_call" && f.Name == "acp":
			reported++
		case f.Type == "tool_call" && f.Name == "terminal":
			terms++
		case f.Type == "tool_result" && f.Name == "terminal" && f.Status == "ok":
			termOK++
		}
	}
	if reported != 20 || terms != 12 || termOK != 12 {
		t.Errorf("reported %d terminals %d (ok %d), want 20, 12, 12", reported, terms, termOK)
	}
	noProcs(t, marker)
}

// TestACPRunReportedCalls: a call the agent reports with rawInput and ends
// with rawOutput only is recorded with its command and output, in
// events.jsonl and in `ctx agent history`.
func TestACPRunReportedCalls(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	fs := w.follow("acpa", sendReq("msg-1", "many 1 0"), 60*time.Second)
	if d := lastOf(fs, "done"); d.Status != "ok" {
		t.Fatalf("done: %s", rawFrames(fs))
	}
	var call, result frame
	var input string
	for _, f := range w.events("acpa", "default") {
		if f.CallID == "run-1" && f.Type == "tool_call" {
			call = f
			var m map[string]any
			json.Unmarshal([]byte(f.raw), &m)
			input, _ = m["input"].(string)
		}
		if f.CallID == "run-1" && f.Type == "tool_result" {
			result = f
		}
	}
	if strings.Join(call.Args, "|") != "execute|Terminal|echo cmd-1-$((1*2))" || input != `{"command":"echo cmd-1-$((1*2))"}` {
		t.Errorf("tool_call args %q input %q", call.Args, input)
	}
	if result.Status != "ok" || !strings.Contains(result.Content, "cmd-1-2") {
		t.Errorf("tool_result %s", result.raw)
	}
	h := w.mustCtx("agent", "history", "acpa")
	if !strings.Contains(h, "echo cmd-1-$((1*2))") || !strings.Contains(h, "cmd-1-2") {
		t.Errorf("history lacks the command or its output:\n%s", h)
	}
	noProcs(t, marker)
}

// TestACPRunIdle: a prompt during which the agent goes silent (and ignores
// SIGTERM) ends agent_timeout after CTX_ACP_IDLE, with no process left.
func TestACPRunIdle(t *testing.T) {
	w := newWorld(t)
	bin := acpAgentInstall(t, w)
	marker := filepath.Dir(filepath.Dir(filepath.Dir(bin)))
	w.start("CTX_ACP_TIMEOUT=3s", "CTX_ACP_IDLE=2s")
	w.mustCtx("agent", "create", "acpa", "--abi", "acp-v1", "--exec", bin, "--approval", "auto")
	start := time.Now()
	fs := w.follow("acpa", sendReq("msg-1", "hang"), 60*time.Second)
	took := time.Since(start)
	e := lastOf(fs, "error")
	if e.Code != "agent_timeout" || !strings.Contains(e.Message, "CTX_ACP_IDLE") || lastOf(fs, "done").Status != "error" {
		t.Errorf("error %s\n%s", e.raw, rawFrames(fs))
	}
	if took < 2*time.Second || took > 30*time.Second {
		t.Errorf("ended after %s", took)
	}
	t.Logf("idle run ended after %s", took)
	noProcs(t, marker)
}
