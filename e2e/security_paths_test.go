package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/ctxterm"
	"golang.org/x/sys/unix"
)

// hostGit runs git on the host as a person would, with a temp HOME and no
// system config; its failure is returned, not fatal.
func hostGit(t *testing.T, home, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustGit(t *testing.T, home, dir string, args ...string) {
	t.Helper()
	if out, err := hostGit(t, home, dir, args...); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

// results parses the attack's KEY=VALUE lines.
func results(content string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(content, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestSecurityProtectedRepos: from inside a real run a tool writes a
// nested repo's .git/config (core.fsmonitor) and a hook, a bare repo's
// hook, .git/hooks in a workspace without .git, .mcp.json and .bashrc;
// every write fails, and host git (status, commit, push, init) in a temp
// HOME runs nothing planted. A new nested repository the run made is
// reported in a warning frame, and placeholders are gone after the run.
func TestSecurityProtectedRepos(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("pr", map[string]string{"tools": "attack\n"})
	home, marks := t.TempDir(), t.TempDir()
	marker := filepath.Join(marks, "ran")

	ws := t.TempDir()
	mustGit(t, home, ws, "init", "-q")
	mustGit(t, home, ws, "commit", "-q", "--allow-empty", "-m", "first")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	mustGit(t, home, filepath.Join(ws, "sub"), "init", "-q")
	mustGit(t, home, ws, "init", "-q", "--bare", "bare.git")
	for _, f := range []string{".mcp.json", ".bashrc"} {
		os.WriteFile(filepath.Join(ws, f), []byte("orig\n"), 0o644)
	}
	before := snapshotTree(t, ws)

	tr, frames := callTool(t, w, "pr", ws, "attack", "fsops",
		"hook", "/workspace/evil.sh", marker, // the script fsmonitor would run: the workspace is writable
		"fsmon", "/workspace/sub/.git/config", filepath.Join(ws, "evil.sh"),
		"hook", "/workspace/sub/.git/hooks/pre-commit", marker,
		"hook", "/workspace/.git/hooks/pre-commit", marker,
		"fsmon", "/workspace/.git/config", filepath.Join(ws, "evil.sh"),
		"hook", "/workspace/bare.git/hooks/pre-receive", marker,
		"fsmon", "/workspace/bare.git/config", filepath.Join(ws, "evil.sh"),
		"w", "/workspace/.mcp.json", "planted",
		"w", "/workspace/.bashrc", "planted",
		"w", "/workspace/.envrc", "planted",
		"w", "/workspace/.vscode/tasks.json", "planted",
		"w", "/workspace/newrepo/.git/HEAD", "ref:refs/heads/main",
		"w", "/workspace/newrepo/.git/config", "x",
		"fsmon", "/workspace/newrepo/.git/config", filepath.Join(ws, "evil.sh"),
	)
	r := results(tr.Content)
	for k, v := range r {
		if k == "hook:/workspace/evil.sh" || strings.HasPrefix(k, "w:/workspace/newrepo/") || k == "fsmon:/workspace/newrepo/.git/config" {
			if v != "ok" {
				t.Errorf("%s: %s (the workspace itself must stay writable)", k, v)
			}
			continue
		}
		if v == "ok" {
			t.Errorf("protected write succeeded: %s", k)
		}
	}
	if len(r) != 14 {
		t.Errorf("attack output incomplete:\n%s", tr.Content)
	}
	warned := false
	for _, f := range frames {
		if f.Type == "warning" && strings.Contains(f.raw, "/workspace/newrepo/.git") && strings.Contains(f.raw, "core.fsmonitor") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning frame about the new nested repository: %v", types(frames))
	}
	after := snapshotTree(t, ws)
	for p, v := range before {
		if after[p] != v {
			t.Errorf("host file changed by the run: %s", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && p != "evil.sh" && !strings.HasPrefix(p, "newrepo") {
			t.Errorf("host path created by the run and left behind: %s", p)
		}
	}

	// Host git, as the person would use it next.
	hostGit(t, home, ws, "status")
	hostGit(t, home, ws, "commit", "-q", "--allow-empty", "-m", "second")
	hostGit(t, home, filepath.Join(ws, "sub"), "status")
	hostGit(t, home, filepath.Join(ws, "sub"), "commit", "-q", "--allow-empty", "-m", "x")
	hostGit(t, home, ws, "push", "-q", "bare.git", "HEAD:refs/heads/x")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("host git ran code planted from inside the sandbox")
	}

	// A workspace without .git: .git/hooks cannot be created there, so a
	// later `git init` + commit on the host runs nothing planted.
	ws2 := t.TempDir()
	tr, _ = callTool(t, w, "pr", ws2, "attack", "fsops",
		"hook", "/workspace/.git/hooks/pre-commit", marker,
		"w", "/workspace/.git/config", "planted",
		"w", "/workspace/.mcp.json", "planted")
	for k, v := range results(tr.Content) {
		if v == "ok" {
			t.Errorf("in a workspace without .git: %s succeeded", k)
		}
	}
	if ents, _ := os.ReadDir(ws2); len(ents) != 0 {
		t.Errorf("placeholders left behind in the workspace: %v", ents)
	}
	mustGit(t, home, ws2, "init", "-q")
	hostGit(t, home, ws2, "commit", "-q", "--allow-empty", "-m", "x")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git init + commit on the host ran a hook planted from inside the sandbox")
	}
}

// snapshotTree maps every path below dir (symlinks not followed) to its
// mode, size and content.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		v := fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		m[rel] = v
		return nil
	})
	return m
}

// TestSecurityGitSymlink: a .git symlink planted in the workspace is never
// a bind source: the next run does not see the outside secret through it,
// and a link to /etc does not break later runs.
func TestSecurityGitSymlink(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("gl", map[string]string{"tools": "attack\n"})
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "key"), []byte("sk-OUTSIDE-SECRET"), 0o600)
	ws := t.TempDir()
	os.Symlink(outside, filepath.Join(ws, ".git"))
	tr, _ := callTool(t, w, "gl", ws, "attack", "fsops", "r", "/workspace/.git/key", "l", "/workspace/.git", "r", outside+"/key")
	if strings.Contains(tr.Content, "sk-OUTSIDE-SECRET") || strings.Contains(tr.Content, "[key]") {
		t.Errorf("a .git symlink bound an outside directory: %s", tr.Content)
	}
	if tr.Status != "ok" {
		t.Errorf("the run with a .git symlink failed: %s", tr.raw)
	}
	ws2 := t.TempDir()
	os.Symlink("/etc", filepath.Join(ws2, ".git"))
	for i := 0; i < 2; i++ {
		tr, _ := callTool(t, w, "gl", ws2, "attack", "fsops", "l", "/workspace")
		if tr.Status != "ok" || !strings.Contains(tr.Content, ".git") {
			t.Errorf("run %d with .git -> /etc: %s", i, tr.raw)
		}
	}
}

// TestSecurityWorkspaceThroughSymlink: a workspace reached through a
// symlinked directory whose target contains CTX_ROOT and the runtime dir:
// the agent cannot see or write agent/NAME.d/, home/<uid>/secrets or the
// sockets.
func TestSecurityWorkspaceThroughSymlink(t *testing.T) {
	w := newWorld(t)
	w.extra = []string{"HOME=" + t.TempDir()} // base is not the home here: only the symlink matters
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("sl", map[string]string{"tools": "attack\n"})
	uid := strconv.Itoa(os.Getuid())
	secrets := filepath.Join(w.root, "home", uid, "secrets")
	os.MkdirAll(secrets, 0o700)
	os.WriteFile(filepath.Join(secrets, "provider"), []byte("sk-PROVIDER-SECRET"), 0o600)
	base := filepath.Dir(w.root)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(w.root, "agent", "sl.d", "policy")
	tr, _ := callTool(t, w, "sl", link, "attack", "fsops",
		"r", "/workspace/root/home/"+uid+"/secrets/provider",
		"l", "/workspace/root/agent",
		"l", "/workspace/root/agent/sl.d",
		"w", "/workspace/root/agent/sl.d/policy", "allow-all",
		"l", "/workspace/run",
		"l", "/workspace/run/agent")
	res := results(tr.Content)
	if len(res) != 6 {
		t.Fatalf("attack output incomplete:\n%s", tr.Content)
	}
	for k, v := range res {
		if strings.HasPrefix(k, "w:") || strings.HasSuffix(v, "no such file or directory") {
			continue // a write lands on the hiding tmpfs (the host file is checked below)
		}
		if strings.Contains(v, "sk-PROVIDER-SECRET") || strings.Contains(v, "sl.d") || strings.Contains(v, "sock") ||
			strings.Contains(v, "tools") || (strings.HasPrefix(k, "l:") && v != "[]" && !strings.Contains(v, "no such file")) {
			t.Errorf("CTX_ROOT or the runtime dir visible through a symlinked workspace: %s=%s", k, v)
		}
	}
	if _, err := os.Stat(policy); err == nil {
		t.Errorf("the agent wrote its own .d/policy through a symlinked workspace")
	}
}

// TestSecurityHomeWorkspace: `ctx agent send` from the owner's home (the
// CLI sends its cwd) and a workspace of / are refused with bad_request
// before anything is recorded; `allow HOME` in .d/protect allows the home.
// Protected paths
func TestSecurityHomeWorkspace(t *testing.T) {
	home := t.TempDir()
	w := newWorld(t)
	w.extra = []string{"HOME=" + home}
	w.start()
	w.agent("hw", nil)
	r := w.ctx(home, "", "agent", "send", "hw", "--json", "hello")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "bad_request") || !strings.Contains(r.stdout+r.stderr, "home directory") {
		t.Errorf("send from the home: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// Said once, with the way on: no "bad request" repeated after the code.
	if r := w.ctx(home, "", "agent", "send", "hw", "hello"); strings.Contains(r.stderr, "bad request") || !strings.Contains(r.stderr, "run it from the project's directory") {
		t.Errorf("the refusal for a person: %q", r.stderr)
	}
	c := w.dial("hw")
	for _, ws := range []string{"/", filepath.Dir(home)} {
		c.send(sendReq("root-"+strconv.Itoa(len(ws)), "hello", "workspace", ws))
		if f := c.must(5 * time.Second); f.Code != "bad_request" || !strings.Contains(f.Message, "allow") {
			t.Errorf("workspace %s: %s", ws, f.raw)
		}
	}
	if _, err := os.Stat(w.sessionDir("hw", "default") + "/events.jsonl"); err == nil {
		if ev := w.events("hw", "default"); len(ev) != 0 {
			t.Errorf("a refused request was recorded: %v", types(ev))
		}
	}
	os.WriteFile(filepath.Join(w.root, "agent", "hw.d", "protect"), []byte("allow "+home+"\n"), 0o644)
	r = w.ctx(home, "", "agent", "send", "hw", "--json", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, `"done"`) {
		t.Errorf("send from the home with the grant: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(w.log.String(), "protected directory allowed by .d/protect") {
		t.Errorf("the grant's use was not logged:\n%s", w.log)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("placeholders left in the home after the run: %v", ents)
	}
}

// TestSecurityProtectedRepoMoved (spec: B1): a directory holding a
// repository is moved away and back (sub ↔ x, each name held 500 ms,
// then 100, 20, 3, 0.8) by a process on the host — a sandbox cannot any more
// (TestSecurityProtectedRepoMovedDeep), but a person's script can —
// while tool calls start in the workspace and try to plant a hook in it
// under either name. bwrap mounts a protection by path, so a sandbox
// started mid-move had the protection on a directory bwrap made and the
// repository writable under its other name (a tool in another sandbox
// moving it planted the hook within a second). Now a view whose
// protection is not where the walk found it never runs: the start is
// refused (bwrap.ErrMoved; walked and started again, the third refusal
// fails the call), and the calls that did start cannot plant the hook.
func TestSecurityProtectedRepoMoved(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("mv", map[string]string{"tools": "attack\n"})
	home, marks := t.TempDir(), t.TempDir()
	marker := filepath.Join(marks, "ran")
	var ws string
	var repo unix.Stat_t // the repository's .git, whatever its directory is called
	planted := func() []string { return hookPlanted(ws, repo) }
	ran, refusedAll := 0, 0
	// The long holds let sandboxes start between moves even on a loaded
	// machine (and so try the hook inside one); the short ones race.
	for _, hold := range []time.Duration{500 * time.Millisecond, 100 * time.Millisecond, 20 * time.Millisecond, 3 * time.Millisecond, 800 * time.Microsecond} {
		ws = t.TempDir()
		os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
		mustGit(t, home, filepath.Join(ws, "sub"), "init", "-q")
		if err := unix.Stat(filepath.Join(ws, "sub", ".git"), &repo); err != nil {
			t.Fatal(err)
		}
		stop, swapped := make(chan struct{}), make(chan string, 1)
		go func() { swapped <- swapLoop(filepath.Join(ws, "sub"), filepath.Join(ws, "x"), hold, stop) }()
		calls, refused := 0, 0
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); calls++ {
			tr, _ := callToolIn(t, w, "mv", ws, "race", "attack", "hookrace", "/workspace", marker, "100", "sub", "x")
			if got := planted(); len(got) > 0 {
				close(stop)
				<-swapped
				t.Fatalf("hold %v: a hook was planted in the moving repository under %v (tool said %q %q)", hold, got, tr.Content, tr.Message)
			}
			switch msg := tr.Content + tr.Message; {
			case strings.Contains(msg, "tries="):
				ran++
			case strings.Contains(msg, "moved while the sandbox started") || strings.Contains(msg, "bwrap"):
				refused++
			default:
				t.Errorf("hold %v: a racing call ended so: %s %q %q", hold, tr.Status, tr.Content, tr.Message)
			}
		}
		close(stop)
		swaps := <-swapped
		t.Logf("hold %v: %d racing calls, %d refused to start; the swap loop: %s", hold, calls, refused, swaps)
		// The loop ends with the repository at sub; a mount point bwrap
		// made at x for a refused start is removed before the call ends.
		if _, err := os.Lstat(filepath.Join(ws, "x")); err == nil {
			t.Errorf("hold %v: a refused start left a directory x on the host", hold)
		}
		if !strings.HasPrefix(swaps, "swaps=") || strings.HasPrefix(swaps, "swaps=0 ") {
			t.Errorf("hold %v: the swap loop did not keep moving the repository: %s", hold, swaps)
		}
		refusedAll += refused
	}
	// A start the view check refused is walked and started again (up to
	// three times) before the call fails: the daemon says each time.
	again := strings.Count(w.log.String(), "walking again")
	t.Logf("%d starts refused by the view check and walked again", again)
	if ran == 0 || refusedAll+again == 0 {
		t.Errorf("%d racing sandboxes started, %d refused, %d walked again: the attack was not tried both ways", ran, refusedAll, again)
	}
}

// hookPlanted looks for a post-checkout hook in the repository whose
// .git is repo, under ws/sub or ws/x (by identity, through a descriptor:
// the names keep moving; a directory a mount made in the way is no
// repository).
func hookPlanted(ws string, repo unix.Stat_t) []string {
	var got []string
	for _, n := range []string{"sub", "x"} {
		fd, err := unix.Open(filepath.Join(ws, n, ".git"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st, hook unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Dev == repo.Dev && st.Ino == repo.Ino &&
			unix.Fstatat(fd, "hooks/post-checkout", &hook, unix.AT_SYMLINK_NOFOLLOW) == nil {
			got = append(got, n)
		}
		unix.Close(fd)
	}
	return got
}

// TestSecurityTerminalRepoMoved (spec: B1): the terminal's shell is
// started by ctxterm (under systemd too), which holds it once bwrap made
// its view until the daemon has checked that view. A host loop renames a
// directory holding a repository while terminals start: each terminal
// either fails to start or has the repository's hooks read-only under
// whichever name the shell tries.
func TestSecurityTerminalRepoMoved(t *testing.T) {
	w, ws := termWorld(t)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	mustGit(t, t.TempDir(), filepath.Join(ws, "sub"), "init", "-q")
	var repo unix.Stat_t
	if err := unix.Stat(filepath.Join(ws, "sub", ".git"), &repo); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(w.termDir("t1", "default"), "main.sock")
	started, refused, tried, checked := 0, 0, 0, 0
	// Names held 2 s let terminals start on a loaded machine too; the
	// shorter holds race.
	for _, hold := range []time.Duration{2 * time.Second, 100 * time.Millisecond, 20 * time.Millisecond} {
		stop, swapped := make(chan struct{}), make(chan string, 1)
		go func() { swapped <- swapLoop(filepath.Join(ws, "sub"), filepath.Join(ws, "x"), hold, stop) }()
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			if r := w.ctx(ws, "", "agent", "start", "t1"); r.code != 0 {
				refused++
				if strings.Contains(r.stderr, "(start it again)") && strings.Contains(r.stderr, "moved while the sandbox started") {
					checked++ // the view check's refusals (others: the walk's, ctxterm's)
				}
				continue
			}
			started++
			a := dialTerm(t, sock, ctxterm.ModeAttach)
			if waitOutput(a, "tsh> ", 10*time.Second) {
				a.send("bash\r")
				if waitOutput(a, "/workspace# ", 10*time.Second) {
					a.send(`for n in sub x; do touch /workspace/$n/.git/hooks/post-checkout 2>/dev/null; done; echo "TR""IED=1"` + "\r")
					if waitOutput(a, "TRIED=1", 10*time.Second) {
						tried++
					}
				}
			}
			a.c.Close()
			w.ctx("", "", "agent", "stop", "t1")
			if got := hookPlanted(ws, repo); len(got) > 0 {
				close(stop)
				<-swapped
				t.Fatalf("hold %v: a terminal planted a hook in the moving repository under %v:\n%q", hold, got, a.bytes())
			}
		}
		close(stop)
		t.Logf("hold %v: the swap loop: %s", hold, <-swapped)
		if got := hookPlanted(ws, repo); len(got) > 0 { // the loop stopped: no name missed
			t.Fatalf("hold %v: a terminal planted a hook in the moving repository under %v", hold, got)
		}
	}
	// A start the view check refused is walked and started again (up to
	// three times) before it fails, as a tool's: the daemon says each time.
	again := strings.Count(w.log.String(), "walking again")
	t.Logf("%d terminals started (%d tried the hook), %d refused (%d by the view check), %d starts walked again", started, tried, refused, checked, again)
	if tried == 0 {
		t.Error("no terminal tried the hook while the repository moved: the attack was not tried")
	}
	if refused+again == 0 {
		t.Error("no terminal start was refused or walked again: the race was not met")
	}
	// A refused terminal is ended whole: the process bwrap held (the
	// init of its PID namespace, deaf to the hang-up that ends bwrap)
	// is not left behind, blocked for ever.
	if left := heldOrphans(); len(left) > 0 {
		t.Errorf("held terminal sandboxes outlived their ctxterm: %v", left)
	}
}

// heldOrphans lists terminal sandbox processes (bwrap's argv with
// --block-fd and --as-pid-1) that nothing supervises any more: their
// parent is neither bwrap nor ctxterm (PID 1, or whatever subreaper took
// them).
func heldOrphans() []int {
	var out []int
	for _, pid := range procsWith("--block-fd") {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		args := strings.Split(string(cmd), "\x00")
		if !slices.Contains(args, "--block-fd") || !slices.Contains(args, "--as-pid-1") {
			continue
		}
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		if i < 0 || len(f) < 2 || f[0] == "Z" {
			continue
		}
		parent, _ := os.ReadFile("/proc/" + f[1] + "/cmdline")
		// bwrap's own process runs under ctxterm, the held one under bwrap.
		if pargs := strings.Split(string(parent), "\x00"); filepath.Base(pargs[0]) != "bwrap" && filepath.Base(pargs[0]) != "ctxterm" {
			out = append(out, pid)
		}
	}
	return out
}

// waitOutput waits until the terminal's output holds s.
func waitOutput(tc *termConn, s string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if bytes.Contains(tc.bytes(), []byte(s)) {
			return true
		}
	}
	return false
}

// swapLoop renames a to b and back, holding each name for hold, until
// stop; a directory in the way that holds no repository (a mount point
// bwrap made for a sandbox starting meanwhile) is removed. It returns
// "swaps=N cleared=N" or, when a rename failed otherwise, "stuck: ERR".
func swapLoop(a, b string, hold time.Duration, stop <-chan struct{}) string {
	n, cleared := 0, 0
	move := func(from, to string) error {
		for {
			err := os.Rename(from, to)
			if err == nil {
				return nil
			}
			if _, herr := os.Stat(filepath.Join(to, ".git", "HEAD")); herr == nil || os.RemoveAll(to) != nil {
				return err
			}
			cleared++
		}
	}
	for {
		select {
		case <-stop:
			return "swaps=" + strconv.Itoa(n) + " cleared=" + strconv.Itoa(cleared)
		default:
		}
		if err := move(a, b); err != nil {
			return "stuck: " + err.Error()
		}
		time.Sleep(hold)
		if err := move(b, a); err != nil {
			return "stuck: " + err.Error()
		}
		n++
		time.Sleep(hold)
	}
}

// TestSecurityProtectedRepoMovedDeep (spec: B1): the walk goes 8
// directories down; a tool that moved a directory holding a repository
// below that, with one rename, left the next sandbox without its
// protection (a hook planted there, the directory moved back). Every
// directory on the way to a nested repository is now a mount point in
// each view: the rename is refused (EBUSY or EXDEV), and the next call
// cannot plant the hook.
func TestSecurityProtectedRepoMovedDeep(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("mv", map[string]string{"tools": "attack\n"})
	home, ws := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, "p", "sub"), 0o755)
	mustGit(t, home, filepath.Join(ws, "p", "sub"), "init", "-q")
	var repo unix.Stat_t
	if err := unix.Stat(filepath.Join(ws, "p", "sub", ".git"), &repo); err != nil {
		t.Fatal(err)
	}
	deep := "/workspace/d/1/2/3/4/5/6/7/8/9"
	for _, mv := range [][2]string{{"/workspace/p/sub", deep + "/sub"}, {"/workspace/p", deep + "/p"}} {
		tr, _ := callToolIn(t, w, "mv", ws, "deep", "attack", "mv", mv[0], mv[1])
		// A mount point: EBUSY, or EXDEV when the rename leaves its mount.
		if got := results(tr.Content)["mv"]; !strings.Contains(got, "device or resource busy") && !strings.Contains(got, "cross-device") {
			t.Errorf("mv %s %s: %q, want it refused", mv[0], mv[1], got)
		}
	}
	for i, dir := range []string{"/workspace/p/sub", deep + "/sub", deep + "/p/sub"} {
		tr, _ := callToolIn(t, w, "mv", ws, "deep", "attack", "hookrace", dir[:strings.LastIndex(dir, "/")], filepath.Join(t.TempDir(), "ran"), "1", dir[strings.LastIndex(dir, "/")+1:])
		if i == 0 && !strings.Contains(tr.Content, "tries=") {
			t.Errorf("the hook was not tried where the repository is: %q %q", tr.Content, tr.Message)
		}
	}
	// The hook, looked for in the repository itself wherever it is.
	filepath.WalkDir(ws, func(p string, e os.DirEntry, err error) error {
		var st unix.Stat_t
		if err == nil && e.IsDir() && e.Name() == ".git" && unix.Stat(p, &st) == nil && st.Ino == repo.Ino && st.Dev == repo.Dev {
			if _, err := os.Stat(filepath.Join(p, "hooks", "post-checkout")); err == nil {
				t.Errorf("a hook was planted in the repository, now at %s", p)
			}
		}
		return nil
	})
}
