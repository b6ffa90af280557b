package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSecurityHostPreview: with .d/approval ask, `ctx agent send` on a
// terminal previews a write before it asks (docs/walls.md, "The approval
// preview"). The preview runs in the person's client with the person's
// rights, on a workspace the agent shaped from inside a real run: a FIFO
// at the target, a symlink to a host file holding a canary (and one to
// /etc/hostname), a symlinked directory on the way, and a device node.
// Each time the question is on the screen at once (not after the
// approval timeout: opening a FIFO blocks until a writer comes), names
// what the target is, and never shows the canary; answered No, the call
// is denied and the tool never ran.
func TestSecurityHostPreview(t *testing.T) {
	w := newWorld(t)
	w.start("CTX_APPROVAL_TIMEOUT=30s")
	installAttack(t, w)
	w.tool("write", "#!/bin/sh\ntouch /workspace/wrote\necho wrote\n")
	w.agent("a", map[string]string{"tools": "attack\nwrite\n"})
	ws := w.workspace()

	// Host files outside the workspace, as the person's client can read them.
	host := filepath.Join(filepath.Dir(w.root), "hostdir")
	canary := "CANARY-PREVIEW-7f3a"
	os.MkdirAll(host, 0o755)
	os.WriteFile(filepath.Join(host, "secret"), []byte(canary+"\n"), 0o644)
	os.WriteFile(filepath.Join(host, "f"), []byte(canary+" in a directory\n"), 0o644)

	// The agent plants them from inside its sandbox (approval auto).
	for _, args := range [][]string{
		{"preview-plant", "fifo", "/workspace/fifo"},
		{"preview-plant", "link", filepath.Join(host, "secret"), "/workspace/x"},
		{"preview-plant", "link", "/etc/hostname", "/workspace/h"},
		{"preview-plant", "link", host, "/workspace/d"},
	} {
		tr, _ := callTool(t, w, "a", ws, "attack", args...)
		if tr.Status != "ok" || !strings.Contains(tr.Content, "=ok") {
			t.Fatalf("attack %v: %s", args, tr.raw)
		}
	}
	type tc struct{ target, says string }
	cases := []tc{
		{"fifo", "fifo is a FIFO"},
		{"x", "x is a symbolic link"},
		{"h", "h is a symbolic link"},
		{"d/f", "d/f is under a symbolic link, d"},
	}
	// A device node: an agent cannot make one in its user namespace, but
	// one may lie in a workspace; the test (root) makes it.
	if os.Getuid() == 0 && unix.Mknod(filepath.Join(ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) == nil {
		cases = append(cases, tc{"null", "null is a character device"})
	}
	w.writeControl("a", "approval", "ask\n")
	hostname, _ := os.ReadFile("/etc/hostname")

	for i, c := range cases {
		t.Run(strings.ReplaceAll(c.target, "/", "_"), func(t *testing.T) {
			id := "prev-" + string(rune('a'+i))
			tm := newTmux(t, 160, 50, "cd "+ws+" && "+shellEnv(w, "TERM=xterm-256color")+" "+w.ctxBin+" agent send a --id "+id+" tool write "+c.target+" NEWCONTENT; echo CTX-EXIT=$?; sleep 30")
			start := time.Now()
			sc := tm.contains("Allow once? (y allows once", 10*time.Second)
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("the question took %v", d)
			}
			if !strings.Contains(sc, c.says) {
				t.Errorf("the question does not say %q:\n%s", c.says, sc)
			}
			if strings.Contains(sc, "CANARY") {
				t.Errorf("the preview showed a host file outside the workspace:\n%s", sc)
			}
			if h := strings.TrimSpace(string(hostname)); len(h) >= 6 && strings.Contains(sc, "-"+h) {
				t.Errorf("the preview showed /etc/hostname:\n%s", sc)
			}
			tm.answer("n")
			tm.contains("CTX-EXIT=", 20*time.Second)
			var decision, status string
			for _, f := range w.events("a", "default") {
				if f.Type == "approval" && f.Run != "" {
					decision = f.Decision
				}
				if f.Type == "tool_result" {
					status = f.Status
				}
			}
			if decision != "deny" || status != "denied" {
				t.Errorf("last approval %q, last tool_result %q; want deny, denied", decision, status)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ws, "wrote")); err == nil {
		t.Error("the write tool ran although every call was denied")
	}
	if b, _ := os.ReadFile(filepath.Join(host, "secret")); string(b) != canary+"\n" {
		t.Errorf("the host file changed: %q", b)
	}
}
