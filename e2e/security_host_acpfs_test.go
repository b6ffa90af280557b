package e2e

// The ACP file requests (fs/read_text_file, fs/write_text_file) an acp-v1
// agent sends are answered by the daemon on the host: they must resolve in
// the agent's own sandbox view, so everything the view makes read-only,
// hides or placeholders is refused to them too. Each attack is issued by
// the real test ACP agent (e2e/testdata/acp/agent.mjs, mode fsops) from a
// real run; the host files are compared byte for byte afterwards.

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type acpFSOp struct {
	Op      string `json:"op"`
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
}

type acpFSRes struct {
	Path    string `json:"path"`
	Op      string `json:"op"`
	OK      bool   `json:"ok"`
	Code    any    `json:"code"`
	Msg     string `json:"msg"`
	Content string `json:"content"`
}

func (r acpFSRes) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// acpFS has the ACP agent issue ops in one run in ws and returns their
// results, keyed "op:path".
func acpFS(t *testing.T, w *world, id, ws string, ops []acpFSOp) map[string]acpFSRes {
	t.Helper()
	b, _ := json.Marshal(ops)
	c := w.dial("acpa")
	c.send(sendReq(id, "fsops "+base64.StdEncoding.EncodeToString(b), "workspace", ws))
	fs := c.until("done", 90*time.Second)
	if d := lastOf(fs, "done"); d.Status != "ok" {
		t.Fatalf("done %q; frames:\n%s", d.Status, rawFrames(fs))
	}
	text := lastOf(fs, "assistant").Text
	i := strings.Index(text, "fsres=")
	if i < 0 {
		t.Fatalf("no fsres in %q", text)
	}
	var res []acpFSRes
	if err := json.Unmarshal([]byte(text[i+len("fsres="):]), &res); err != nil {
		t.Fatalf("fsres %q: %v", text, err)
	}
	if len(res) != len(ops) {
		t.Fatalf("%d results for %d ops: %s", len(res), len(ops), text)
	}
	m := map[string]acpFSRes{}
	for _, r := range res {
		t.Logf("%s", r)
		m[r.Op+":"+r.Path] = r
	}
	return m
}

// refused reports whether r is a JSON-RPC error (not a hang, not a success).
func refused(r acpFSRes) bool { return !r.OK && r.Code != "timeout" && r.Code != nil }

// TestSecurityHostACPFSProtected: fs/write_text_file of the protected
// paths the view binds read-only or placeholders (.git/config, a nested
// repo's hook and config, a bare repo's hooks/ and config, .bashrc, the
// .mcp.json placeholder) is refused with a JSON-RPC error and the host
// tree is byte-identical; symlink escapes (a link to a host file, to a
// host directory, to /home/agent, to /proc/1/cwd and /proc/self/root; ".." and
// /proc/self/root paths) are refused; a FIFO at the target is refused at
// once, and so is a device node, a directory, /dev and /proc; a missing
// file answers -32002; legitimate reads and writes work.
func TestSecurityHostACPFSProtected(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	home := t.TempDir()
	ws := w.workspace()
	mustGit(t, home, ws, "init", "-q")
	mustGit(t, home, ws, "commit", "-q", "--allow-empty", "-m", "first")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	mustGit(t, home, filepath.Join(ws, "sub"), "init", "-q")
	mustGit(t, home, ws, "init", "-q", "--bare", "bare.git")
	os.WriteFile(filepath.Join(ws, ".bashrc"), []byte("orig bashrc\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("hello-in\n"), 0o644)
	hostDir := t.TempDir()
	hostFile := filepath.Join(hostDir, "host.txt")
	os.WriteFile(hostFile, []byte("host original"), 0o644)
	os.Symlink(hostFile, filepath.Join(ws, "hostlink"))
	os.Symlink(hostDir, filepath.Join(ws, "hostdir"))
	os.Symlink("/proc/1/cwd", filepath.Join(ws, "cwdlink"))
	os.Symlink("/home/agent", filepath.Join(ws, "homelink")) // inside the view, but out of the write scope
	os.Symlink("/proc/self/root", filepath.Join(ws, "rootlink"))
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A device node at the target (root makes it; the null device is
	// harmless if opened): refused by fstat, never read or written.
	if err := syscall.Mknod(filepath.Join(ws, "nulldev"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Logf("no device node (not root?): %v", err) // its requests then answer not found
	}
	before := snapshotTree(t, ws)

	evil := "[core]\n\tfsmonitor = touch " + filepath.Join(hostDir, "ran") + "\n"
	hook := "#!/bin/sh\ntouch " + filepath.Join(hostDir, "ran") + "\n"
	attacks := []acpFSOp{
		{"write", "/workspace/.git/config", evil},
		{"write", "/workspace/.git/hooks/pre-commit", hook},
		{"write", "/workspace/sub/.git/config", evil},
		{"write", "/workspace/sub/.git/hooks/pre-commit", hook},
		{"write", "/workspace/bare.git/config", evil},
		{"write", "/workspace/bare.git/hooks/pre-receive", hook},
		{"write", "/workspace/.bashrc", "touch /tmp/pwned\n"},
		{"write", "/workspace/.mcp.json", `{"mcpServers":{"x":{"command":"/bin/sh"}}}`},
		{"write", "/workspace/hostlink", "pwned"},
		{"write", "/workspace/hostdir/new.txt", "pwned"},
		{"write", "/workspace/homelink/planted.txt", "pwned"},
		{"read", "/workspace/hostlink", ""},
		{"read", "/workspace/cwdlink/etc/hostname", ""},
		{"read", "/workspace/rootlink" + hostFile, ""},
		{"write", "/workspace/rootlink" + hostFile, "pwned"},
		{"read", "/workspace/../proc/self/root" + hostFile, ""},
		{"read", "/proc/self/root" + hostFile, ""},
		{"write", "/workspace/sub/../../tmp/x", "pwned"},
		{"read", "/workspace/fifo", ""},
		{"write", "/workspace/fifo", "pwned"},
		{"read", "/workspace/nulldev", ""},
		{"write", "/workspace/nulldev", "pwned"},
		{"write", "/workspace/.git", "pwned"},
		{"read", "/dev/zero", ""},
		{"read", "/home/agent/../../proc/1/environ", ""},
	}
	ops := append(append([]acpFSOp(nil), attacks...),
		acpFSOp{"read", "/workspace/missing.txt", ""},
		acpFSOp{"read", "/workspace/in.txt", ""},
		acpFSOp{"write", "/workspace/out.txt", "written by acp"},
		acpFSOp{"write", "/workspace/sub/ok.txt", "nested ok"},
	)
	start := time.Now()
	res := acpFS(t, w, "fs-1", ws, ops)
	for _, a := range attacks {
		r := res[a.Op+":"+a.Path]
		if !refused(r) {
			t.Errorf("%s %s not refused: %s", a.Op, a.Path, r)
		}
		if strings.Contains(r.Content, "host original") {
			t.Errorf("%s %s read the host file: %s", a.Op, a.Path, r)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the requests took %s: a FIFO blocked", d)
	}
	if r := res["read:/workspace/missing.txt"]; r.OK || !strings.Contains(r.String(), "-32002") {
		t.Errorf("missing file: %s, want resource-not-found -32002", r)
	}
	if r := res["read:/workspace/in.txt"]; !r.OK || r.Content != "hello-in\n" {
		t.Errorf("legitimate read: %s", r)
	}
	for _, p := range []string{"/workspace/out.txt", "/workspace/sub/ok.txt"} {
		if r := res["write:"+p]; !r.OK {
			t.Errorf("legitimate write %s: %s", p, r)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "written by acp" {
		t.Errorf("out.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "sub", "ok.txt")); string(b) != "nested ok" {
		t.Errorf("sub/ok.txt = %q", b)
	}
	noProcs(t, marker)
	// The placeholders of absent protected names stay on the host until
	// the last sandbox using them has ended; the run's end does not wait
	// for their removal.
	created := func(after map[string]string) []string {
		var out []string
		for p := range after {
			if _, ok := before[p]; !ok && p != "out.txt" && p != "sub/ok.txt" {
				out = append(out, p)
			}
		}
		return out
	}
	after := snapshotTree(t, ws)
	for end := time.Now().Add(10 * time.Second); len(created(after)) > 0 && time.Now().Before(end); after = snapshotTree(t, ws) {
		time.Sleep(50 * time.Millisecond)
	}
	for p, v := range before {
		if after[p] != v {
			t.Errorf("host file changed through an ACP request: %s", p)
		}
	}
	for _, p := range created(after) {
		t.Errorf("host path created through an ACP request: %s", p)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != "host original" {
		t.Errorf("host file outside the workspace changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", "acpa", "planted.txt")); err == nil {
		t.Error("a write through a symlink to /home/agent went through")
	}
	if _, err := os.Stat(filepath.Join(hostDir, "new.txt")); err == nil {
		t.Error("a write through a symlinked directory reached the host")
	}
	if _, err := os.Stat("/tmp/x"); err == nil {
		if b, _ := os.ReadFile("/tmp/x"); string(b) == "pwned" {
			t.Error("a write with .. reached /tmp/x on the host")
		}
	}
	hostGit(t, home, ws, "status")
	hostGit(t, home, filepath.Join(ws, "sub"), "commit", "-q", "--allow-empty", "-m", "x")
	if _, err := os.Stat(filepath.Join(hostDir, "ran")); err == nil {
		t.Fatal("host git ran code planted through an ACP file request")
	}
}

// TestSecurityHostACPFSHidden: with CTX_ROOT inside the workspace, the
// agent's fs requests cannot read an MCP secrets file or its own ACP
// secrets, nor rewrite its .d/mount (the view hides CTX_ROOT under a
// tmpfs); /home/agent/session/<other>/events.jsonl (another session's
// log, hidden by the view) is not readable.
func TestSecurityHostACPFSHidden(t *testing.T) {
	w := newWorld(t)
	w.extra = []string{"HOME=" + t.TempDir()} // the base holding CTX_ROOT is the workspace, not the home
	bin := acpAgentInstall(t, w)
	w.start("CTX_ACP_TIMEOUT=3s")
	w.mustCtx("agent", "create", "acpa", "--abi", "acp-v1", "--exec", bin, "--approval", "auto")
	marker := filepath.Dir(filepath.Dir(filepath.Dir(bin)))
	uid := strconv.Itoa(os.Getuid())
	userHome := filepath.Join(w.root, "home", uid)
	mcpSecret := filepath.Join(userHome, "secrets", "mcp", "gh.env")
	acpSecret := filepath.Join(userHome, "secrets", "agent", "acpa.env")
	for _, f := range []string{mcpSecret, acpSecret} {
		os.MkdirAll(filepath.Dir(f), 0o700)
		os.WriteFile(f, []byte("TOKEN=sk-HIDDEN-SECRET\n"), 0o600)
	}
	mount := filepath.Join(w.root, "agent", "acpa.d", "mount")
	mountBefore, mountErr := os.ReadFile(mount)
	other := filepath.Join(w.sessionDir("acpa", "other"), "events.jsonl")
	os.MkdirAll(filepath.Dir(other), 0o700)
	os.WriteFile(other, []byte(`{"seq":1,"type":"assistant","text":"OTHER-SESSION-LOG"}`+"\n"), 0o600)

	ws := filepath.Dir(w.root)
	rel := func(p string) string { r, _ := filepath.Rel(ws, p); return "/workspace/" + r }
	attacks := []acpFSOp{
		{"read", rel(mcpSecret), ""},
		{"read", rel(acpSecret), ""},
		{"write", rel(mount), "/ /host rw\n"},
		{"read", "/home/agent/session/other/events.jsonl", ""},
		{"read", rel(other), ""},
	}
	res := acpFS(t, w, "fs-h", ws, attacks)
	for _, a := range attacks {
		r := res[a.Op+":"+a.Path]
		if !refused(r) {
			t.Errorf("%s %s not refused: %s", a.Op, a.Path, r)
		}
		if strings.Contains(r.Content, "HIDDEN-SECRET") || strings.Contains(r.Content, "OTHER-SESSION-LOG") {
			t.Errorf("%s %s saw what the view hides: %s", a.Op, a.Path, r)
		}
	}
	noProcs(t, marker)
	if b, err := os.ReadFile(mount); string(b) != string(mountBefore) || (err == nil) != (mountErr == nil) {
		t.Errorf("the agent's .d/mount changed through an ACP request: %q %v", b, err)
	}
}

// TestSecurityHostACPFSUser: the same view for a daemon run by an ordinary
// user, whose sandbox has its own user namespace: the sandbox's root is
// still reachable (the user owns it), a protected write is refused by the
// view's read-only bind and a legitimate read and write work.
func TestSecurityHostACPFSUser(t *testing.T) {
	uid, gid := ensureUser(t, "ctxe2e")
	w := newWorld(t)
	base := filepath.Dir(w.root)
	os.Chmod(binDir, 0o755)
	bin := acpAgentInstall(t, w)
	w.start("CTX_ACP_TIMEOUT=3s")
	w.mustCtx("agent", "create", "acpa", "--abi", "acp-v1", "--exec", bin, "--approval", "auto")
	w.stop()
	home := t.TempDir()
	ws := filepath.Join(base, "work") // the user's HOME is base: a workspace there would be refused
	os.MkdirAll(ws, 0o755)
	mustGit(t, home, ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, ".bashrc"), []byte("orig bashrc\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("hello-in\n"), 0o644)
	if out, err := exec.Command("chown", "-R", strconv.Itoa(uid)+":"+strconv.Itoa(gid), base).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	os.Chmod(base, 0o755)
	before := snapshotTree(t, ws)
	as := func(args ...string) *exec.Cmd {
		c := exec.Command("/usr/bin/setpriv", append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--clear-groups", "--", binDir + "/ctx"}, args...)...)
		c.Env = w.env("CTX_ACP_TIMEOUT=3s")
		return c
	}
	d := as("daemon")
	log := &syncBuffer{}
	d.Stdout, d.Stderr = log, log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	sock := filepath.Join(w.run, "agent", "acpa.sock")
	waitFor(t, "the user's daemon", 10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })

	ops := []acpFSOp{
		{"write", "/workspace/.git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n"},
		{"write", "/workspace/.bashrc", "pwned\n"},
		{"write", "/workspace/.mcp.json", "{}"},
		{"read", "/workspace/in.txt", ""},
		{"write", "/workspace/out.txt", "written by acp"},
	}
	b, _ := json.Marshal(ops)
	send := as("agent", "send", "acpa", "--json", "fsops "+base64.StdEncoding.EncodeToString(b))
	send.Dir = ws
	out, _ := send.CombinedOutput()
	i := strings.Index(string(out), `fsres=`)
	if i < 0 {
		t.Fatalf("no fsres:\n%s\n%s", out, log.String())
	}
	// The assistant frame carries the JSON string-escaped: unquote it.
	rest := string(out[i+len("fsres="):])
	end := strings.Index(rest, `"`)
	for end > 0 && rest[end-1] == '\\' {
		n := strings.Index(rest[end+1:], `"`)
		if n < 0 {
			break
		}
		end += n + 1
	}
	var raw string
	if err := json.Unmarshal([]byte(`"`+rest[:end]+`"`), &raw); err != nil {
		t.Fatalf("fsres: %v\n%s", err, out)
	}
	var res []acpFSRes
	if err := json.Unmarshal([]byte(raw), &res); err != nil || len(res) != len(ops) {
		t.Fatalf("fsres %q: %v", raw, err)
	}
	for _, r := range res {
		t.Logf("%s", r)
		legit := r.Path == "/workspace/in.txt" || r.Path == "/workspace/out.txt"
		if legit && !r.OK {
			t.Errorf("legitimate %s %s failed: %s", r.Op, r.Path, r)
		}
		if !legit && !refused(r) {
			t.Errorf("%s %s not refused: %s", r.Op, r.Path, r)
		}
	}
	if res[3].Content != "hello-in\n" {
		t.Errorf("read %q", res[3].Content)
	}
	after := snapshotTree(t, ws)
	for p, v := range before {
		if after[p] != v {
			t.Errorf("host file changed through an ACP request: %s", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "written by acp" {
		t.Errorf("out.txt = %q", b)
	}
}
