package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The standard toolset end to end: a model agent against a fake
// provider on loopback, every step a real tool call through tsh, the
// authority layers and the sandbox; attacks run from inside a real run
// through the `bash` and `write` tools and are checked on the host.

const calcBuggy = "# calc.sh: small arithmetic helpers.\nadd() {\n\techo $(( $1 - $2 ))\n}\n"

const calcTest = `#!/bin/sh
. ./calc.sh
got=$(add 2 3)
if [ "$got" = 5 ]; then echo "PASS add 2 3 = 5"; else echo "FAIL add 2 3: got $got, want 5"; exit 1; fi
`

// calcRepo is a git repository whose test fails: add() subtracts.
func calcRepo(t *testing.T, w *world) string {
	t.Helper()
	repo := w.workspace()
	os.WriteFile(filepath.Join(repo, "calc.sh"), []byte(calcBuggy), 0o644)
	os.WriteFile(filepath.Join(repo, "test.sh"), []byte(calcTest), 0o755)
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("build/\n"), 0o644)
	os.MkdirAll(filepath.Join(repo, "build"), 0o755)
	os.WriteFile(filepath.Join(repo, "build", "calc.sh"), []byte("add() {\n\techo stale copy\n}\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "calc"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "HOME="+repo)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return repo
}

func stdModelWorld(t *testing.T, f *fakeProvider) *world {
	t.Helper()
	w := newStdWorld(t)
	w.start("ANTHROPIC_BASE_URL="+f.url, "ANTHROPIC_API_KEY="+testKey)
	w.mustCtx("agent", "create", "m", "--model", "anthropic/claude-sonnet-4-5")
	return w
}

// toolFrames pairs each tool_call with its tool_result.
func toolFrames(fs []frame) (calls, results []frame) {
	for _, f := range fs {
		switch f.Type {
		case "tool_call":
			calls = append(calls, f)
		case "tool_result":
			results = append(results, f)
		}
	}
	return
}

// TestToolsetCodingTask: grep → read → edit → bash runs the test → green,
// each a real call of a standard tool; the workspace on the host carries
// the fix and only the fix; .gitignore'd build/ is not searched.
// proof: e2e coding task. spec: K1 V3
func TestToolsetCodingTask(t *testing.T) {
	f := newFakeProvider(t,
		anthropicToolUse("toolu_1", "call", "grep", `^add\(\)`),
		anthropicToolUse("toolu_2", "call", "read", "calc.sh"),
		anthropicToolUse("toolu_3", "call", "edit", "calc.sh", "$(( $1 - $2 ))", "$(( $1 + $2 ))"),
		anthropicToolUse("toolu_4", "call", "bash", "sh test.sh"),
		anthropicText("Fixed: add() subtracted."))
	w := stdModelWorld(t, f)
	repo := calcRepo(t, w)
	c := w.dial("m")
	c.send(sendReq("fix1", "the test fails; fix it", "workspace", repo))
	got := c.until("done", 60*time.Second)
	calls, results := toolFrames(got)
	if len(calls) != 4 || len(results) != 4 {
		t.Fatalf("frames %v", types(got))
	}
	want := []string{"grep", "read", "edit", "bash"}
	for i, c := range calls {
		if c.Name != "tsh" || len(c.Args) < 2 || c.Args[0] != "call" || c.Args[1] != want[i] {
			t.Errorf("call %d: %s", i, c.raw)
		}
		if results[i].Status != "ok" {
			t.Errorf("result %d (%s): %s", i, want[i], results[i].raw)
		}
	}
	if r := results[0].Content; !strings.Contains(r, "calc.sh:2:add() {") || strings.Contains(r, "build/") {
		t.Errorf("grep: %q", r)
	}
	if r := results[1].Content; !strings.Contains(r, "echo $(( $1 - $2 ))") || !strings.Contains(r, "3\t") {
		t.Errorf("read (numbered lines): %q", r)
	}
	if r := results[3].Content; !strings.Contains(r, "PASS add 2 3 = 5") || !strings.Contains(r, "exit status 0") {
		t.Errorf("bash: %q", r)
	}
	if last := got[len(got)-1]; last.Status != "ok" {
		t.Errorf("done: %s", last.raw)
	}
	b, _ := os.ReadFile(filepath.Join(repo, "calc.sh"))
	if string(b) != strings.Replace(calcBuggy, "-", "+", 1) {
		t.Errorf("calc.sh on the host: %q", b)
	}
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = repo
	if out, _ := cmd.Output(); string(out) != " M calc.sh\n" {
		t.Errorf("git status: %q (only calc.sh may change)", out)
	}
	// The model saw each result in the provider's format.
	reqs := f.requests()
	if len(reqs) != 5 || !strings.Contains(reqs[4], "PASS add 2 3 = 5") || !strings.Contains(reqs[3], "calc.sh") {
		t.Errorf("provider requests: %d", len(reqs))
	}
	// The default prompt tells the model how to reach the tools.
	if !strings.Contains(reqs[0], `{\"args\":[\"call\",\"read\"`) && !strings.Contains(reqs[0], "Using tools") {
		t.Errorf("the prompt does not explain tsh: %.400s", reqs[0])
	}
}

// TestToolsetPolicyDeniesBash: a policy that denies bash makes that step
// denied by agent-policy, and the file is untouched; the tool is not even
// in the sandbox's view. spec: V3 (proof)
func TestToolsetPolicyDeniesBash(t *testing.T) {
	f := newFakeProvider(t,
		anthropicToolUse("toolu_1", "call", "bash", "sed -i s/-/+/ calc.sh"),
		anthropicToolUse("toolu_2", "list"),
		anthropicText("I may not run bash."))
	w := stdModelWorld(t, f)
	pol, _ := os.ReadFile(filepath.Join(w.root, "agent", "m.d", "policy"))
	w.writeControl("m", "policy", string(pol)+"deny tool bash\n")
	repo := calcRepo(t, w)
	c := w.dial("m")
	c.send(sendReq("d1", "fix it", "workspace", repo))
	got := c.until("done", 60*time.Second)
	_, results := toolFrames(got)
	if len(results) != 2 || results[0].Status != "denied" || !strings.Contains(results[0].Content, "agent-policy") {
		t.Fatalf("bash result: %v %v", types(got), results)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "calc.sh")); string(b) != calcBuggy {
		t.Errorf("calc.sh changed: %q", b)
	}
	// tsh list inside the sandbox: the standard tools with their
	// descriptions, bash absent (the view shows only allowed tools).
	list := results[1].Content
	for _, n := range []string{"read", "edit", "grep", "apply_patch"} {
		if !strings.Contains(list, n) {
			t.Errorf("tsh list lacks %s: %q", n, list)
		}
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "bash") {
			t.Errorf("tsh list shows the denied bash: %q", line)
		}
	}
}

// tshCall runs `ctx agent tsh AGENT call ARGS…` from dir (the workspace).
func (w *world) tshCall(dir, agent string, args ...string) result {
	w.t.Helper()
	return w.ctx(dir, "", append([]string{"agent", "tsh", agent, "--", "call"}, args...)...)
}

// TestToolsetAttacksFromInside: the standard tools cannot reach past the
// view. bash cannot write the agent's control files, the host's /tmp or
// other homes; write refuses a symlink leaving the workspace; a timed-out
// or cancelled bash leaves no process behind on the host.
// view = authority. spec: X12
func TestToolsetAttacksFromInside(t *testing.T) {
	w := newStdWorld(t)
	w.start()
	w.mustCtx("agent", "create", "a", "--exec", binDir+"/testagent")
	repo := w.workspace()
	hostVictim := filepath.Join(filepath.Dir(w.root), "victim")
	os.WriteFile(hostVictim, []byte("host\n"), 0o644)
	policy := filepath.Join(w.root, "agent", "a.d", "policy")
	os.WriteFile(policy, []byte("allow tool *\n"), 0o644)

	// bash: writes outside the view's writable places fail.
	r := w.tshCall(repo, "a", "bash", fmt.Sprintf(
		"echo pwned > /ctx/agent/a.d/policy; echo pwned > %s; echo pwned > /ctx/tool/read; ls /root; echo done", hostVictim))
	if !strings.Contains(r.stdout, "done") {
		t.Fatalf("bash did not run: %+v", r)
	}
	if b, _ := os.ReadFile(policy); string(b) != "allow tool *\n" {
		t.Errorf("bash rewrote the agent policy: %q", b)
	}
	if b, _ := os.ReadFile(hostVictim); string(b) != "host\n" {
		t.Errorf("bash wrote a host file: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.root, "tool", "read")); strings.Contains(string(b), "pwned") {
		t.Error("bash replaced the read tool")
	}

	// write: a symlink in the workspace pointing at the agent's home (which
	// the view shows writable) is refused; the home file is untouched.
	home := filepath.Join(w.root, "home", fmt.Sprint(os.Getuid()), "agent", "a")
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, "notes"), []byte("mine\n"), 0o644)
	os.Symlink("/home/agent/notes", filepath.Join(repo, "notes"))
	r = w.tshCall(repo, "a", "write", "notes", "overwritten")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "outside the workspace") {
		t.Errorf("write through a symlink out of the workspace: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "notes")); string(b) != "mine\n" {
		t.Errorf("the home file changed: %q", b)
	}

	// bash --timeout: the whole tree ends, a background grandchild too.
	marker := "987.6543"
	r = w.tshCall(repo, "a", "bash", "--timeout", "1", "(sleep "+marker+" &) ; sleep "+marker)
	if r.code == 0 || !strings.Contains(r.stdout, "timed out") {
		t.Errorf("timeout: %+v", r)
	}
	if pids := pgrep("sleep " + marker); pids != "" {
		t.Errorf("processes left after the timeout: %s", pids)
	}

	// cancel: the tool call ends with the run, nothing left behind.
	marker = "876.5432"
	c := w.dial("a")
	c.send(map[string]any{"op": "tsh", "id": "long", "session": "default", "workspace": repo, "args": []string{"call", "bash", "(sleep " + marker + " &) ; sleep " + marker}})
	c.until("tool_call", 20*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for pgrep("sleep "+marker) == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if out := w.ctx("", "", "agent", "cancel", "a"); out.code != 0 {
		t.Fatalf("cancel: %+v", out)
	}
	got := c.until("done", 20*time.Second)
	if got[len(got)-1].Status != "cancelled" {
		t.Errorf("cancelled call: %v", types(got))
	}
	deadline = time.Now().Add(5 * time.Second)
	for pgrep("sleep "+marker) != "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if pids := pgrep("sleep " + marker); pids != "" {
		t.Errorf("processes left after cancel: %s", pids)
	}
}

// pgrep lists the pids whose command line contains s.
func pgrep(s string) string {
	out, _ := exec.Command("pgrep", "-f", "^"+strings.ReplaceAll(s, ".", "[.]")).Output()
	return strings.TrimSpace(string(out))
}

// TestToolsetFetchNeedsNet: fetch works only where .d/mount grants net,
// and says so when it does not. spec: V1 (fetch)
func TestToolsetFetchNeedsNet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(rw, "<html><head><script>var x=1</script><title>T</title></head><body><h1>Hello ctx</h1><p>A <a href=\"/more\">link</a>.</p></body></html>")
	}))
	defer srv.Close()
	w := newStdWorld(t)
	w.start()
	w.mustCtx("agent", "create", "a", "--exec", binDir+"/testagent")
	repo := w.workspace()
	r := w.tshCall(repo, "a", "fetch", srv.URL)
	if r.code == 0 || !strings.Contains(r.stdout, "no network") || !strings.Contains(r.stdout, "net") {
		t.Errorf("fetch without net: %+v", r)
	}
	// The test server is on the host's loopback: `net` alone does not reach
	// it (README "The network"), a `net local` grant naming it does.
	w.writeControl("a", "mount", "net\nnet local "+srv.Listener.Addr().String()+"\n")
	r = w.tshCall(repo, "a", "fetch", srv.URL)
	if r.code != 0 || !strings.Contains(r.stdout, "Hello ctx") || strings.Contains(r.stdout, "var x") || strings.Contains(r.stdout, "<h1>") {
		t.Errorf("fetch with net: %+v", r)
	}
}
