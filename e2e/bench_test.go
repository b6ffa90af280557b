package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/cgroup"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/workspace"
)

// BenchmarkSendVsDirect measures, interleaved in one run, the round trip of
// one send with a trivial agent through the runtime — over the socket, and
// through the `ctx agent send` CLI — against a minimal launcher that starts
// the same agent the same way (the same bwrap view and flags) and feeds it
// the same envelope. The ratios are the runtime's own cost.
func BenchmarkSendVsDirect(b *testing.B) {
	w := newWorld(b)
	w.start()
	w.mustCtx("agent", "create", "bench", "--exec", binDir+"/testagent")
	l := layout.Layout{Root: w.root, Runtime: w.run, UID: os.Getuid()}
	def, err := agentdef.Load(l, "bench")
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	c := w.dial("bench")
	// The launcher registers a launch root and holds bwrap on --block-fd as
	// the runtime does (U2): the same sandbox flags, the same start sequence.
	roots, err := launchroot.New(os.Getuid())
	if err != nil {
		b.Fatal(err)
	}
	// The launcher's view is the runtime's (View.Build): the workspace by
	// descriptor, its protected names bound read-only and its absent ones
	// over placeholders made for the send and removed after it, as a run
	// does — without them the launcher's sandbox had 22 fewer binds and
	// the ratio counted the protection as the runtime's overhead.
	placeholders := workspace.NewRegistry()
	var direct, socket, cli time.Duration
	w.etcReady(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Direct: the same sandbox view, envelope and read-to-exit.
		t0 := time.Now()
		run := "run-direct-" + strconv.Itoa(i)
		v := sandbox.View{Layout: l, Def: def, Session: "direct", Run: run, Workspace: ws, Placeholders: placeholders}
		stdin, _ := envelope.Encode(&envelope.Envelope{Schema: envelope.Schema, Run: run, Input: "echo hi", HistoryMessages: "[]"})
		spec, held, err := v.Build([]string{v.AgentPath()}, v.AgentEnv(0))
		if err != nil {
			b.Fatal(err)
		}
		p, err := proc.Start(proc.Options{Bwrap: "/usr/bin/bwrap", Spec: spec, Stdin: stdin, Roots: roots, Ident: v.Identity()})
		held.Started()
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, p.Stdout)
		err = p.Wait()
		held.Ended()
		if err != nil {
			b.Fatal(err)
		}
		direct += time.Since(t0)

		t0 = time.Now()
		c.send(sendReq("s"+strconv.Itoa(i), "echo hi", "session", "sock", "workspace", ws))
		got := c.until("done", 10*time.Second)
		if got[len(got)-1].Status != "ok" {
			b.Fatal(types(got))
		}
		socket += time.Since(t0)

		t0 = time.Now()
		cmd := exec.Command(w.ctxBin, "agent", "send", "--session", "cli", "bench", "echo", "hi")
		cmd.Env, cmd.Dir = w.env(), ws
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
		cli += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n/1000, "direct-ms")
	b.ReportMetric(float64(socket.Microseconds())/n/1000, "socket-ms")
	b.ReportMetric(float64(cli.Microseconds())/n/1000, "cli-ms")
	b.ReportMetric(float64(socket)/float64(direct), "socket/direct")
	b.ReportMetric(float64(cli)/float64(direct), "cli/direct")
}

// BenchmarkSendCLIVsClient measures, interleaved, `ctx agent send` (a
// fresh CLI process, as a script calls it) against the smallest one-shot
// client doing the same request (e2e/oneshot: dial, one send, print the
// deltas, exit at done): the difference is the CLI's own start and work.
func BenchmarkSendCLIVsClient(b *testing.B) {
	w := newWorld(b)
	w.start()
	w.mustCtx("agent", "create", "bench", "--exec", binDir+"/testagent")
	ws := b.TempDir()
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = w.env(), ws
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "echo: hi") {
			b.Fatalf("%s: %v %s", name, err, out)
		}
	}
	sock := filepath.Join(w.root, "agent", "bench.sock")
	run(w.ctxBin, "agent", "send", "--session", "cli", "bench", "echo", "hi")
	run(binDir+"/oneshot", sock, "one", "echo", "hi")
	var cli, one time.Duration
	w.etcReady(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run(w.ctxBin, "agent", "send", "--session", "cli", "bench", "echo", "hi")
		cli += time.Since(t0)
		t0 = time.Now()
		run(binDir+"/oneshot", sock, "one", "echo", "hi")
		one += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cli.Microseconds())/n/1000, "cli-ms")
	b.ReportMetric(float64(one.Microseconds())/n/1000, "oneshot-ms")
	b.ReportMetric(float64(cli)/float64(one), "cli/oneshot")
}

// BenchmarkToolCallVsBwrap measures, interleaved in one run, one sandboxed
// tool call through the runtime (the tsh op over the socket: authority
// checks, launch-root registration, bwrap, tsh, the tool, durable frames)
// against a bare `bwrap --unshare-all … true` and a direct exec of the same
// tool. The ratios are the tool path's cost.
func BenchmarkToolCallVsBwrap(b *testing.B) {
	w := newWorld(b)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.mustCtx("agent", "create", "tb", "--exec", binDir+"/testagent")
	c := w.dial("tb")
	var tool, bare, direct time.Duration
	w.etcReady(b)
	// One call first: the session, its cgroup and the tool tree are made
	// by the first call, not by each.
	c.send(map[string]any{"op": "tsh", "id": "warm", "session": "bench", "args": []string{"call", "clock"}})
	c.until("done", 10*time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c.send(map[string]any{"op": "tsh", "id": "b" + strconv.Itoa(i), "session": "bench", "args": []string{"call", "clock"}})
		got := c.until("done", 10*time.Second)
		if got[len(got)-1].Status != "ok" {
			b.Fatal(types(got))
		}
		tool += time.Since(t0)

		t0 = time.Now()
		if out, err := exec.Command("/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
		bare += time.Since(t0)

		t0 = time.Now()
		if out, err := exec.Command(w.root + "/tool/clock").CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
		direct += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tool.Microseconds())/n/1000, "toolcall-ms")
	b.ReportMetric(float64(bare.Microseconds())/n/1000, "bwrap-true-ms")
	b.ReportMetric(float64(direct.Microseconds())/n/1000, "direct-ms")
	b.ReportMetric(float64(tool)/float64(bare), "toolcall/bwrap")
	b.ReportMetric(float64(tool)/float64(direct), "toolcall/direct")
}

// BenchmarkToolCallToolCount measures, interleaved in one run, the same
// tool call (the tsh op over the socket) by two daemons: one whose tool
// directory holds that tool alone, one where it holds 100 more, each with
// its .d/ (all allowed). A tool call's view shows a tool directory as one
// bind of its tool tree, so the ratio should stay near 1.
func BenchmarkToolCallToolCount(b *testing.B) {
	worlds := [2]*world{newWorld(b), newWorld(b)}
	conns := [2]*client{}
	for i, w := range worlds {
		w.start()
		w.tool("clock", "#!/bin/sh\necho tick\n")
		if i == 1 {
			for j := range 100 {
				name := "t" + strconv.Itoa(j)
				w.tool(name, "#!/bin/sh\n")
				d := filepath.Join(w.root, "tool", name+".d")
				os.MkdirAll(d, 0o755)
				os.WriteFile(filepath.Join(d, "tool.json"), []byte(`{"description":"x"}`), 0o644)
			}
		}
		w.mustCtx("agent", "create", "tc", "--exec", binDir+"/testagent")
		conns[i] = w.dial("tc")
	}
	var took [2]time.Duration
	var cpu0 [2]time.Duration
	for k, w := range worlds {
		// Counted, the /etc snapshot's build would be one world's and
		// not the other's.
		w.etcReady(b)
		// One call first: the 101 tools' tree is made by the first.
		conns[k].send(map[string]any{"op": "tsh", "id": "warm", "session": "bench", "args": []string{"call", "clock"}})
		conns[k].until("done", 10*time.Second)
		self, kids := procCPU(w.daemon.Process.Pid)
		cpu0[k] = self + kids
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			// Alternate which goes first: the second call of a pair
			// overlaps the first one's tail (its cgroup's removal, the
			// log's last fsync).
			k := (i + j) % 2
			t0 := time.Now()
			conns[k].send(map[string]any{"op": "tsh", "id": "c" + strconv.Itoa(i), "session": "bench", "args": []string{"call", "clock"}})
			got := conns[k].until("done", 10*time.Second)
			if got[len(got)-1].Status != "ok" {
				b.Fatal(types(got))
			}
			took[k] += time.Since(t0)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Microseconds())/n/1000, "1tool-ms")
	b.ReportMetric(float64(took[1].Microseconds())/n/1000, "101tools-ms")
	b.ReportMetric(float64(took[1])/float64(took[0]), "101/1")
	// The CPU of each daemon and of what it started (bwrap, the tool),
	// per call: steadier than the wall time on a busy 2-core machine
	// (10 ms ticks: run it 100x or more).
	var cpu [2]time.Duration
	for k, w := range worlds {
		self, kids := procCPU(w.daemon.Process.Pid)
		cpu[k] = self + kids - cpu0[k]
	}
	if cpu[0] > 0 {
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "101/1-cpu")
	}

}

// BenchmarkToolCallCgroup measures, interleaved in one run, what the run
// cgroup costs a tool call: the same tool sandbox (view, flags, launch
// root, the tool running to its exit) started without placement, and with
// a fresh run cgroup — created, bwrap and its PID 1 placed, then killed and
// removed — as an op tsh run (one call per run) pays it; and the same
// call through the runtime (the tsh op over the socket) against that
// sandbox born in its cgroup: what the runtime adds to the sandbox.
func BenchmarkToolCallCgroup(b *testing.B) {
	w := newWorld(b)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.mustCtx("agent", "create", "cg", "--exec", binDir+"/testagent")
	l := layout.Layout{Root: w.root, Runtime: w.run, UID: os.Getuid()}
	def, err := agentdef.Load(l, "cg")
	if err != nil {
		b.Fatal(err)
	}
	roots, err := launchroot.New(os.Getuid())
	if err != nil {
		b.Fatal(err)
	}
	m := cgroup.New(context.Background(), os.Getuid(), w.root+"-bench", nil)
	defer m.Release()
	ws := b.TempDir()
	placeholders := workspace.NewRegistry()
	call := func(i int, place, enter bool) time.Duration {
		t0 := time.Now()
		run := "run-" + strconv.Itoa(i) + "-bench"
		// The view of a tool call (actors/tool): the policy's tools, as a
		// tool tree; the workspace's protected and absent names bound by
		// descriptor over their placeholders, made and removed per call as
		// a one-call run does — the same mounts as the runtime's sandbox.
		v := sandbox.View{Layout: l, Def: def, Session: "bench", Run: run, Workspace: ws, Tools: sandbox.CallTools, Placeholders: placeholders}
		spec, held, err := v.Build([]string{"/ctx/tool/clock"}, v.ToolEnv())
		if err != nil {
			b.Fatal(err)
		}
		defer held.Ended()
		o := proc.Options{Bwrap: "/usr/bin/bwrap", Spec: spec, Roots: roots, Ident: v.Identity()}
		var g *cgroup.Group
		if place {
			g = m.Group(run, def.Limits)
			o.Place = g.PlaceFunc()
			if enter {
				o.Enter = g.EnterFunc() // born in the cgroup: what the runtime does on v1
			}
		}
		p, err := proc.Start(o)
		held.Started()
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout)
		if err := p.Wait(); err != nil || string(out) != "tick\n" {
			b.Fatalf("%v %q %s", err, out, p.Stderr())
		}
		if err := g.Close(0); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// The same call through the runtime: the tsh op over the socket, in
	// the same workspace: toolcall/born-in is what the runtime adds to
	// its own sandbox.
	c := w.dial("cg")
	var bare, placed, entered, tool time.Duration
	w.etcReady(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bare += call(3*i, false, false)
		placed += call(3*i+1, true, false)
		entered += call(3*i+2, true, true)
		t0 := time.Now()
		c.send(map[string]any{"op": "tsh", "id": "c" + strconv.Itoa(i), "session": "bench", "workspace": ws, "args": []string{"call", "clock"}})
		if got := c.until("done", 10*time.Second); got[len(got)-1].Status != "ok" {
			b.Fatal(types(got))
		}
		tool += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tool.Microseconds())/n/1000, "toolcall-ms")
	b.ReportMetric(float64(tool)/float64(entered), "toolcall/born-in")
	b.ReportMetric(float64(bare.Microseconds())/n/1000, "nocgroup-ms")
	b.ReportMetric(float64(placed.Microseconds())/n/1000, "placed-ms")
	b.ReportMetric(float64(entered.Microseconds())/n/1000, "born-in-ms")
	b.ReportMetric(float64(placed)/float64(bare), "placed/nocgroup")
	b.ReportMetric(float64(entered)/float64(bare), "born-in/nocgroup")
	b.Logf("mode %s: %s", m.Mode(), m.Describe())
}

// BenchmarkToolsetReadEdit measures, interleaved in one run, a `read` and an
// `edit` of the standard toolset through the runtime (the tsh op over the
// socket, every authority layer, the sandbox, durable frames) against the
// same operation by `cat` and `sed -i` in a bare bwrap.
func BenchmarkToolsetReadEdit(b *testing.B) {
	w := newStdWorld(b)
	w.start()
	w.mustCtx("agent", "create", "tb", "--exec", binDir+"/testagent")
	ws := w.workspace()
	var src strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&src, "line %d: the quick brown fox\n", i)
	}
	src.WriteString("marker: one\n")
	file := filepath.Join(ws, "f.txt")
	os.WriteFile(file, []byte(src.String()), 0o644)
	c := w.dial("tb")
	call := func(id string, args ...string) {
		c.send(map[string]any{"op": "tsh", "id": id, "session": "bench", "workspace": ws, "args": append([]string{"call"}, args...)})
		got := c.until("done", 20*time.Second)
		if got[len(got)-1].Status != "ok" {
			b.Fatalf("%v: %v", args, got)
		}
	}
	bare := func(args ...string) {
		argv := append([]string{"--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--bind", ws, ws, "--chdir", ws}, args...)
		if out, err := exec.Command("/usr/bin/bwrap", argv...).CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
	}
	var read, edit, cat, sed time.Duration
	w.etcReady(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		call(fmt.Sprintf("r%d", i), "read", "f.txt")
		read += time.Since(t0)
		t0 = time.Now()
		call(fmt.Sprintf("e%d", i), "edit", "f.txt", "marker: one", "marker: two")
		edit += time.Since(t0)
		t0 = time.Now()
		bare("cat", "f.txt")
		cat += time.Since(t0)
		t0 = time.Now()
		bare("sed", "-i", "s/marker: two/marker: one/", "f.txt") // undoes the edit: every round starts alike
		sed += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(read.Microseconds())/n/1000, "read-ms")
	b.ReportMetric(float64(edit.Microseconds())/n/1000, "edit-ms")
	b.ReportMetric(float64(cat.Microseconds())/n/1000, "bwrap-cat-ms")
	b.ReportMetric(float64(sed.Microseconds())/n/1000, "bwrap-sed-ms")
	b.ReportMetric(float64(read)/float64(cat), "read/cat")
	b.ReportMetric(float64(edit)/float64(sed), "edit/sed")
}

// BenchmarkCLIStart measures, interleaved, a process's start before it does
// anything: `ctx --help` against `tsh --help` (a small Go program), and
// `ctx daemon` against `ctxd daemon` until each has bound its socket and
// answers ping (each daemon then stopped). The ratios are what the ctx
// client costs on top of any Go program's start.
func BenchmarkCLIStart(b *testing.B) {
	help := func(bin string) time.Duration {
		t0 := time.Now()
		if out, err := exec.Command(bin, "--help").CombinedOutput(); err != nil {
			b.Fatalf("%s --help: %v %s", bin, err, out)
		}
		return time.Since(t0)
	}
	ready := func(bin string) time.Duration {
		w := newWorld(b)
		cmd := exec.Command(bin, "daemon")
		cmd.Env = w.env()
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sock := filepath.Join(w.run, "system.sock")
		for {
			if c, err := net.Dial("unix", sock); err == nil {
				c.Write([]byte(`{"op":"ping"}` + "\n"))
				buf := make([]byte, 512)
				n, _ := c.Read(buf)
				c.Close()
				if strings.Contains(string(buf[:n]), "pong") {
					break
				}
			}
			if time.Since(t0) > 10*time.Second {
				b.Fatal("no pong")
			}
			time.Sleep(200 * time.Microsecond)
		}
		took := time.Since(t0)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		return took
	}
	var ctxHelp, tshHelp, ctxReady, ctxdReady time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctxHelp += help(binDir + "/ctx")
		tshHelp += help(binDir + "/tsh")
		ctxReady += ready(binDir + "/ctx")
		ctxdReady += ready(binDir + "/ctxd")
	}
	n := float64(b.N)
	b.ReportMetric(float64(ctxHelp.Microseconds())/n/1000, "ctx-help-ms")
	b.ReportMetric(float64(tshHelp.Microseconds())/n/1000, "tsh-help-ms")
	b.ReportMetric(float64(ctxHelp)/float64(tshHelp), "ctx/tsh")
	b.ReportMetric(float64(ctxReady.Microseconds())/n/1000, "ctx-daemon-ms")
	b.ReportMetric(float64(ctxdReady.Microseconds())/n/1000, "ctxd-daemon-ms")
	b.ReportMetric(float64(ctxReady)/float64(ctxdReady), "ctx/ctxd")
}

// BenchmarkToolCallBigWorkspace measures, interleaved in one run, the
// same tool call (the tsh op over the socket) in an empty workspace and
// in a git repository of Go's own src (~11.5k files, ~1.3k directories,
// copied): what a workspace's size costs a call — its protected-path
// walks (the run's start and end, the view) and the review's fingerprint.
func BenchmarkToolCallBigWorkspace(b *testing.B) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skip("go env GOROOT:", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	w := newWorld(b)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.mustCtx("agent", "create", "tb", "--exec", binDir+"/testagent")
	small, big := w.workspace(), w.workspace()
	if out, err := exec.Command("cp", "-a", src+"/.", big).CombinedOutput(); err != nil {
		b.Fatalf("copy %s: %v %s", src, err, out)
	}
	for _, a := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "src"}} {
		c := exec.Command("git", a...)
		c.Dir = big
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", a, err, out)
		}
	}
	// One call in each first: the session, the review's first snapshot of
	// the repository, the walks' first reads.
	benchToolCallIn(b, w, "tb", small, big, "empty", "repo")
}

// benchToolCallIn times the `tsh call clock` op of agent in workspace a
// and in workspace b, alternated, after one call in each, and reports
// each (NAME-ms) and their ratio (B/A).
func benchToolCallIn(b *testing.B, w *world, agent, a, bws, nameA, nameB string) {
	c := w.dial(agent)
	w.etcReady(b)
	call := func(id, ws string) time.Duration {
		t0 := time.Now()
		c.send(map[string]any{"op": "tsh", "id": id, "session": "bench", "workspace": ws, "args": []string{"call", "clock"}})
		got := c.until("done", time.Minute)
		if got[len(got)-1].Status != "ok" {
			b.Fatal(types(got))
		}
		return time.Since(t0)
	}
	call("warm-a", a)
	call("warm-b", bws)
	var ta, tb time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ta += call("a"+strconv.Itoa(i), a)
		tb += call("b"+strconv.Itoa(i), bws)
	}
	n := float64(b.N)
	b.ReportMetric(float64(ta.Microseconds())/n/1000, nameA+"-ms")
	b.ReportMetric(float64(tb.Microseconds())/n/1000, nameB+"-ms")
	b.ReportMetric(float64(tb)/float64(ta), nameB+"/"+nameA)
}

// BenchmarkToolCallNestedRepos: the same `tsh call clock` op in a
// workspace that is one repository and in one that holds three more
// below it (a checkout with submodules, a directory of projects),
// interleaved. A nested repository's protection is mounted below a
// directory that can move, so its sandbox is checked once its view is
// made and before it runs (bwrap.Anchor): what that costs is the ratio.
func BenchmarkToolCallNestedRepos(b *testing.B) {
	w := newWorld(b)
	w.start()
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.mustCtx("agent", "create", "tb", "--exec", binDir+"/testagent")
	top, nested := w.workspace(), w.workspace()
	for _, d := range []string{top, nested, filepath.Join(nested, "a"), filepath.Join(nested, "b"), filepath.Join(nested, "vendor", "c")} {
		os.MkdirAll(d, 0o755)
		if out, err := exec.Command("git", "init", "-q", d).CombinedOutput(); err != nil {
			b.Fatalf("git init %s: %v %s", d, err, out)
		}
	}
	benchToolCallIn(b, w, "tb", top, nested, "top", "nested")
}
