package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// installPrefix does what `make install PREFIX=prefix` does (README
// "Install"), with `go build ./cmd/...` for `make build`: the binaries and
// agent.sh into bin/, the units into lib/systemd/user, the completions into
// share/.
func installPrefix(t *testing.T, prefix string) {
	t.Helper()
	bin := filepath.Join(prefix, "bin")
	run := func(stdout string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Env = append(cmd.Env, "CTX_ROOT=", "CTX_RUNTIME_DIR=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s%s", name, args, err, out.String(), errb.String())
		}
		if stdout != "" {
			if err := os.WriteFile(stdout, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	share := filepath.Join(prefix, "share")
	for _, d := range []string{bin, filepath.Join(prefix, "lib/systemd/user"), share + "/bash-completion/completions",
		share + "/zsh/site-functions", share + "/fish/vendor_completions.d"} {
		run("", "install", "-d", d)
	}
	run("", "go", "build", "-o", bin+"/", "./cmd/...")
	run("", "install", "-m", "0755", "agent.sh", bin+"/")
	ctx := filepath.Join(bin, "ctx")
	run("", ctx, "install-units", "--dir", filepath.Join(prefix, "lib/systemd/user"), "--bin", ctx)
	run(share+"/bash-completion/completions/ctx", ctx, "completion", "bash")
	run(share+"/zsh/site-functions/_ctx", ctx, "completion", "zsh")
	run(share+"/fish/vendor_completions.d/ctx.fish", ctx, "completion", "fish")
}

// TestInstallQuickStart installs into a temporary prefix and runs the
// README's quick start with only that prefix on PATH: ctx init, the clock
// tool, the demo agent, "what time is it?" (the daemon is started by the
// first client), agent.sh, doctor.
func TestInstallQuickStart(t *testing.T) {
	base := t.TempDir()
	prefix := filepath.Join(base, "prefix")
	installPrefix(t, prefix)
	for _, f := range []string{"bin/ctx", "bin/ctxd", "bin/ctxterm", "bin/tsh", "bin/agent.update", "bin/ctxtools", "bin/agent.sh",
		"lib/systemd/user/ctx.socket", "lib/systemd/user/ctx.service",
		"share/bash-completion/completions/ctx", "share/zsh/site-functions/_ctx", "share/fish/vendor_completions.d/ctx.fish"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("not installed: %s", f)
		}
	}
	svc, _ := os.ReadFile(filepath.Join(prefix, "lib/systemd/user/ctx.service"))
	if !strings.Contains(string(svc), "ExecStart="+prefix+"/bin/ctx daemon\n") || strings.Contains(string(svc), "Environment=") {
		t.Errorf("ctx.service:\n%s", svc)
	}

	root, rt := filepath.Join(base, "root"), filepath.Join(base, "run")
	env := []string{"PATH=" + prefix + "/bin:/usr/bin:/bin", "HOME=" + base, "CTX_ROOT=" + root, "CTX_RUNTIME_DIR=" + rt, "CTX_CANCEL_GRACE=500ms"}
	t.Cleanup(func() { stopAutostarted(t, root) })
	work := filepath.Join(base, "work")
	os.MkdirAll(work, 0o755)
	sh := func(args ...string) string {
		t.Helper()
		name := args[0]
		if p := filepath.Join(prefix, "bin", name); !strings.Contains(name, "/") && fileExists(p) {
			name = p // what a shell with only the prefix on PATH would run
		}
		cmd := exec.Command(name, args[1:]...)
		// A project directory, not the home: a send from ~ is refused.
		cmd.Env, cmd.Dir = env, work
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out.String(), errb.String())
		}
		return out.String()
	}
	// Ctx init also installs the standard toolset from the prefix.
	if out := sh("ctx", "init"); out != "CTX_ROOT "+root+" ready\ntools apply_patch bash edit fetch glob grep ls read write in "+root+"/tool\n" {
		t.Errorf("ctx init: %q", out)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "tsh")); err != nil {
		t.Errorf("ctx init did not install tsh from the prefix: %v", err)
	}
	examples, _ := filepath.Abs("../examples")
	sh("cp", "-r", examples+"/tools/clock", examples+"/tools/clock.d", root+"/tool/")
	sh("ctx", "agent", "create", "demo", "--exec", binDir+"/demo-agent")
	answer := regexp.MustCompile(`^Let me look at the clock\. It is \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC\), according to the clock tool\.\n$`)
	if out := sh("ctx", "agent", "send", "demo", "what time is it?"); !answer.MatchString(out) {
		t.Errorf("send: %q", out)
	}
	if out := sh("agent.sh", "demo", "what", "time", "is", "it?"); !answer.MatchString(out) {
		t.Errorf("agent.sh: %q", out)
	}
	os.WriteFile(filepath.Join(work, "notes.txt"), []byte("one\ntwo\n"), 0o644)
	if out := sh("ctx", "agent", "tsh", "demo", "--", "call", "read", "notes.txt"); out != "     1\tone\n     2\ttwo\n" {
		t.Errorf("the installed read tool: %q", out)
	}
	ev, err := os.ReadFile(filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "agent/demo/session/default/events.jsonl"))
	if err != nil || !strings.Contains(string(ev), `"type":"tool_result"`) || !strings.Contains(string(ev), `"name":"tsh"`) {
		t.Errorf("events.jsonl: %v\n%s", err, ev)
	}
	if out := sh("ctx", "doctor"); !strings.Contains(out, "ok    agent demo") || !strings.Contains(out, "ctx daemon 0.1.0 answers") {
		t.Errorf("doctor:\n%s", out)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// stopAutostarted stops the daemon the quick start's first client started
// (its pid is in the daemon lock file) and waits for it to exit.
func stopAutostarted(t *testing.T, root string) {
	b, err := os.ReadFile(filepath.Join(root, "home", strconv.Itoa(os.Getuid()), "daemon.lock"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if !bytes.Contains(cmdline, []byte("daemon")) {
		return // not ours (already gone and the pid reused)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 150; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("autostarted daemon %d did not stop on SIGTERM", pid)
}

// TestInstallGoInstall: `go install ./cmd/...` builds the binaries, ctxd included.
func TestInstallGoInstall(t *testing.T) {
	gobin := t.TempDir()
	cmd := exec.Command("go", "install", "./cmd/...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/...: %v\n%s", err, out)
	}
	for _, b := range []string{"ctx", "ctxd", "ctxterm", "tsh", "agent.update"} {
		if st, err := os.Stat(filepath.Join(gobin, b)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("go install did not produce %s: %v", b, err)
		}
	}
}
