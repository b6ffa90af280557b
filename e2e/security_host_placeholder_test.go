package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The absent protected names at a workspace's top (README "What the
// workspace may change"); a trailing "/" marks a directory name.
var absentDirNames = []string{".vscode/", ".idea/", ".claude/", ".codex/", ".zed/", ".cursor/", ".gemini/", ".opencode/"}
var absentFileNames = []string{".mcp.json", ".envrc", "opencode.json", "opencode.jsonc", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
	".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout"}

// gitClean asserts the host's git status in repo lists nothing: untracked
// (every file, -uall) and ignored alike.
func gitClean(t *testing.T, home, repo, when string) {
	t.Helper()
	for _, args := range [][]string{{"status", "--porcelain"}, {"status", "--porcelain", "-uall", "--ignored"}} {
		out, err := hostGit(t, home, repo, args...)
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("%s: host git %v shows (err %v):\n%s", when, args, err, out)
		}
	}
}

// placeholdersIn lists what of the protected names exists in ws.
func placeholdersIn(ws string, names []string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(ws, strings.TrimSuffix(n, "/"))); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// hostPlaceholderRepo makes a repository with one commit, a .gitignore
// naming some protected names (so --ignored would list them), and returns
// it with the workspace: the repository itself, or (sub) a subdirectory
// of it with no .git of its own.
func hostPlaceholderRepo(t *testing.T, home string, sub bool) (repo, ws string) {
	repo = t.TempDir()
	mustGit(t, home, repo, "init", "-q")
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(".envrc\n.idea/\n"), 0o644)
	os.MkdirAll(filepath.Join(repo, "sub"), 0o755)
	os.WriteFile(filepath.Join(repo, "sub", "main.go"), []byte("package main\n"), 0o644)
	mustGit(t, home, repo, "add", "-A")
	mustGit(t, home, repo, "commit", "-q", "-m", "first")
	if sub {
		return repo, filepath.Join(repo, "sub")
	}
	return repo, repo
}

// TestSecurityHostPlaceholder: from inside a real run, every absent
// protected name reads as absent — nothing below a directory name
// (ENOENT), an empty file at a file name (.mcp.json: JSON declaring no
// server), never EACCES — and every route
// to create it (open O_CREAT, mkdir, rename onto, symlink, link, mkfifo,
// remove, chmod) fails; meanwhile the host's `git status --porcelain`
// (also -uall --ignored) is empty, in a repository as workspace and in a
// workspace that is a repository's subdirectory without .git of its own
// (where .git is absent too); after the run no placeholder remains.
func TestSecurityHostPlaceholder(t *testing.T) {
	w := newWorld(t)
	w.start()
	attack, _ := os.ReadFile(binDir + "/attack")
	w.tool("attack", string(attack))
	w.agent("ph", map[string]string{"tools": "attack\n"})
	agentHome := filepath.Join(w.root, "home", strconv.Itoa(os.Getuid()), "agent", "ph")
	home := t.TempDir()
	for _, sub := range []bool{false, true} {
		t.Run("sub="+strconv.FormatBool(sub), func(t *testing.T) {
			repo, ws := hostPlaceholderRepo(t, home, sub)
			dirs := absentDirNames
			if sub {
				dirs = append([]string{".git/"}, dirs...)
			}
			names := append(append([]string{}, dirs...), absentFileNames...)
			ready, gofile := filepath.Join(agentHome, "ready"), filepath.Join(agentHome, "go")
			os.Remove(ready)
			os.Remove(gofile)
			done := callToolAsync(w, "ph", ws, "attack", append([]string{"absent", "/workspace", "/home/agent/ready", "/home/agent/go"}, names...)...)
			waitFor(t, "the attack to be ready", 30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil })
			// The run is alive: its placeholders are on the host (the guard
			// is in place) and git shows none of them.
			if got := placeholdersIn(ws, names); len(got) != len(names) {
				t.Errorf("while the run is alive only %v of %v are held on the host", got, names)
			}
			gitClean(t, home, repo, "while the run is alive")
			os.WriteFile(gofile, nil, 0o644)
			var r frame
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the run did not end")
			}
			got := results(r.Content)
			for _, n := range names {
				isDir := strings.HasSuffix(n, "/")
				n = strings.TrimSuffix(n, "/")
				if isDir {
					for _, k := range []string{"stat:" + n + "/settings.json", "read:" + n + "/settings.json"} {
						if got[k] != "ENOENT" {
							t.Errorf("%s = %q, want ENOENT", k, got[k])
						}
					}
					if got["list:"+n] != "0" {
						t.Errorf("list:%s = %q, want 0 entries", n, got["list:"+n])
					}
					for _, k := range []string{"write:" + n + "/settings.json", "mkdir:" + n + "/sub"} {
						if got[k] == "" || got[k] == "ok" {
							t.Errorf("%s = %q: created below an absent directory name", k, got[k])
						}
					}
				} else if v := got["read:"+n]; n == ".mcp.json" && v != `content:{"mcpServers":{}}` {
					t.Errorf("read:%s = %q, want JSON declaring no server (never EACCES)", n, v)
				} else if v != "empty" && n != ".mcp.json" {
					t.Errorf("read:%s = %q, want it empty (never EACCES)", n, v)
				}
				routes := []string{"create", "mkdir", "rename", "symlink", "mkfifo", "remove", "chmod"}
				if !isDir {
					routes = append(routes, "link")
				}
				for _, route := range routes {
					if v := got[route+":"+n]; v == "" || v == "ok" {
						t.Errorf("%s:%s = %q: an absent protected name was created or changed", route, n, v)
					}
				}
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("attack output:\n%s", r.Content)
			}
			waitFor(t, "no placeholder after the run", 10*time.Second, func() bool { return len(placeholdersIn(ws, names)) == 0 })
			gitClean(t, home, repo, "after the run")
		})
	}
}

// TestSecurityHostPlaceholderMCP: an MCP server of the session holds the
// workspace's placeholders while it lives — git status shows nothing
// meanwhile — and none remains once the server stopped.
func TestSecurityHostPlaceholderMCP(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_MCP_IDLE=3s")
	w.agent("a", nil)
	w.mustCtx("mcp", "add", "ok", "--", binDir+"/mcpfake", "ok")
	home := t.TempDir()
	repo, ws := hostPlaceholderRepo(t, home, false)
	names := append(append([]string{}, absentDirNames...), absentFileNames...)
	if r := w.tsh(ws, "a", "call", "ok.hello", "name=1"); r.code != 0 || r.stdout != "hello 1\n" {
		t.Fatalf("%d %q %q", r.code, r.stdout, r.stderr)
	}
	if len(daemonChildren(w, "mcpfake")) != 1 {
		t.Fatal("no server running after a call")
	}
	// The call's run has ended; the server still lives with the view.
	if got := placeholdersIn(ws, names); len(got) != len(names) {
		t.Errorf("while the server lives only %v of %v are held on the host", got, names)
	}
	gitClean(t, home, repo, "while the MCP server lives")
	waitFor(t, "the idle server to stop", 15*time.Second, func() bool { return len(daemonChildren(w, "mcpfake")) == 0 })
	waitFor(t, "no placeholder after the server", 10*time.Second, func() bool { return len(placeholdersIn(ws, names)) == 0 })
	gitClean(t, home, repo, "after the server")
}

// callToolAsync is callTool whose result comes later: the request is sent
// now, its tool_result (an empty frame when none came) on the channel.
func callToolAsync(w *world, agent, ws string, name string, args ...string) <-chan frame {
	c := w.dial(agent)
	c.send(sendReq("call-"+strconv.FormatInt(time.Now().UnixNano(), 36), strings.Join(append([]string{"tool", name}, args...), " "), "workspace", ws))
	out := make(chan frame, 1)
	go func() {
		var res frame
		deadline := time.Now().Add(90 * time.Second)
		for {
			f, err := c.next(time.Until(deadline))
			if err != nil {
				break
			}
			if f.Type == "tool_result" {
				res = f
			}
			if f.Type == "done" {
				break
			}
		}
		out <- res
	}()
	return out
}

// TestSecurityHostPlaceholderACPFS: an ACP agent's fs requests see the
// absent protected names as its processes do, answered as a missing file
// (-32002, resource not found) — .mcp.json, .envrc, .claude/settings.json
// and .claude itself — and its writes there are refused with the host
// untouched.
func TestSecurityHostPlaceholderACPFS(t *testing.T) {
	w, marker := acpWorld(t, "auto")
	home := t.TempDir()
	repo, ws := hostPlaceholderRepo(t, home, false)
	reads := []string{"/workspace/.mcp.json", "/workspace/.envrc", "/workspace/.claude/settings.json", "/workspace/.claude", "/workspace/.bashrc"}
	writes := []string{"/workspace/.mcp.json", "/workspace/.claude/settings.json", "/workspace/.envrc"}
	var ops []acpFSOp
	for _, p := range reads {
		ops = append(ops, acpFSOp{"read", p, ""})
	}
	for _, p := range writes {
		ops = append(ops, acpFSOp{"write", p, `{"mcpServers":{"x":{"command":"/bin/sh"}}}`})
	}
	res := acpFS(t, w, "fs-ph", ws, ops)
	for _, p := range reads {
		if r := res["read:"+p]; r.OK || !strings.Contains(r.String(), "-32002") {
			t.Errorf("read %s: %s, want resource-not-found -32002", p, r)
		}
	}
	for _, p := range writes {
		if r := res["write:"+p]; !refused(r) {
			t.Errorf("write %s not refused: %s", p, r)
		}
	}
	noProcs(t, marker)
	names := append(append([]string{}, absentDirNames...), absentFileNames...)
	waitFor(t, "no placeholder after the run", 10*time.Second, func() bool { return len(placeholdersIn(ws, names)) == 0 })
	gitClean(t, home, repo, "after the run")
}
