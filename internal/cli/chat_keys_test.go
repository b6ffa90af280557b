package cli

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ipc"
)

// TestKeyRouterKeepsEveryKey: keys typed during a run are shown to the run
// and kept, all of them, for the next prompt — a paste of 1 MiB typed
// ahead included; the run's Ctrl+C is the run's alone; a key the run
// takes (an approval's answer) is not typed; at end of input the line
// editor reads EOF and the run's channel closes. spec: S3
func TestKeyRouterKeepsEveryKey(t *testing.T) {
	k := newKeyRouter()
	k.setIdle(false)
	k.feed([]byte{'a', 3, 'y'})
	if b := <-k.run; b != 'a' {
		t.Fatalf("run saw %q", b)
	}
	if b := <-k.run; b != 3 {
		t.Fatalf("run saw %q, want Ctrl+C", b)
	}
	if b := <-k.run; b != 'y' {
		t.Fatalf("run saw %q", b)
	}
	k.take('y') // the run answered a question with it
	big := strings.Repeat("x", 1<<20)
	k.feed([]byte(big)) // far more than the run's channel holds
	k.feed([]byte("ls\r"))
	k.setIdle(true)
	k.feed([]byte("z"))
	got, err := io.ReadAll(struct{ io.Reader }{readUntilEmpty{k}})
	if err != nil || string(got) != "a"+big+"ls\rz" {
		t.Fatalf("line editor read %d bytes (%q…), %v", len(got), got[:min(len(got), 8)], err)
	}
	k.close()
	buf := make([]byte, 16)
	if _, err := k.Read(buf); err != io.EOF {
		t.Fatalf("after close: %v, want EOF", err)
	}
	if _, ok := <-k.run; ok {
		t.Fatal("run channel still open after close")
	}
}

// readUntilEmpty reads k until its buffer is empty (k.Read would wait).
type readUntilEmpty struct{ k *keyRouter }

func (r readUntilEmpty) Read(p []byte) (int, error) {
	r.k.mu.Lock()
	empty := len(r.k.buf) == 0
	r.k.mu.Unlock()
	if empty {
		return 0, io.EOF
	}
	return r.k.Read(p)
}

// TestAnswerKey: only y, a, n and r answer a question, and only once it has been
// shown and the keyboard quiet for settle: "run the tests⏎" typed on as
// the question appears answers nothing (its n included).
func TestAnswerKey(t *testing.T) {
	shown := time.Unix(1000, 0)
	later := shown.Add(2 * settle)
	for _, tc := range []struct {
		k       byte
		last    time.Time
		now     time.Time
		want    string
		comment string
	}{
		{'y', time.Time{}, later, ipc.DecisionAllowOnce, "y after a pause"},
		{'Y', time.Time{}, later, ipc.DecisionAllowOnce, "Y"},
		{'n', time.Time{}, later, ipc.DecisionDeny, "n after a pause"},
		{'r', time.Time{}, later, denyReason, "r: deny, the reason typed next"},
		{'a', time.Time{}, later, allowRule, "a: allow once, and the same call again"},
		{'a', later.Add(-settle / 4), later, "", "a typed on answers nothing either"},
		{'x', time.Time{}, later, "", "any other key answers nothing"},
		{'\r', time.Time{}, later, "", "Enter is no answer"},
		{'y', time.Time{}, shown.Add(settle / 2), "", "too soon after the question"},
		{'n', later.Add(-settle / 4), later, "", "typing on: the previous key was just now"},
		{'y', later.Add(-settle), later, ipc.DecisionAllowOnce, "a pause of settle is enough"},
	} {
		if got := answerKey(tc.k, shown, tc.last, tc.now); got != tc.want {
			t.Errorf("%s: answerKey(%q) = %q, want %q", tc.comment, tc.k, got, tc.want)
		}
	}
}

// TestCallRules: a rule matches the same session and the exact call —
// tool and every argument, or MCP server, tool and arguments — and
// nothing else. spec: A3
func TestCallRules(t *testing.T) {
	r := callRules{}
	bash := &ipc.Frame{Name: "tsh", Args: []string{"call", "bash", "go test ./..."}}
	r.add("s1", bash)
	var out strings.Builder
	for _, tc := range []struct {
		session string
		f       *ipc.Frame
		want    bool
	}{
		{"s1", bash, true},
		{"s2", bash, false},
		{"s1", &ipc.Frame{Name: "tsh", Args: []string{"call", "bash", "go test ./... && rm -rf ~"}}, false},
		{"s1", &ipc.Frame{Name: "tsh", Args: []string{"call", "bash", "go test", "./..."}}, false},
		{"s1", &ipc.Frame{Name: "tsh", Args: []string{"call", "bash"}}, false},
		{"s1", &ipc.Frame{Name: "tsh", Args: []string{"call", "bash", "go test ./...", ""}}, false},
	} {
		if got := r.answers(&out, tc.session, tc.f); got != tc.want {
			t.Errorf("session %s %q: %v, want %v", tc.session, tc.f.Args, got, tc.want)
		}
	}
	m := &ipc.Frame{MCP: &ipc.MCPCall{Server: "gh", Tool: "issue", Arguments: json.RawMessage(`{"n":1}`)}}
	r.add("s1", m)
	other := &ipc.Frame{MCP: &ipc.MCPCall{Server: "gh", Tool: "issue", Arguments: json.RawMessage(`{"n":2}`)}}
	if !r.answers(&out, "s1", m) || r.answers(&out, "s1", other) {
		t.Error("an MCP rule must match its server, tool and arguments exactly")
	}
	if !strings.Contains(out.String(), "allowed once by your rule (a): bash") {
		t.Errorf("the rule's answer is not said: %q", out.String())
	}
	var nilRules callRules
	if nilRules.answers(&out, "s1", bash) {
		t.Error("no rules allow nothing")
	}
}
