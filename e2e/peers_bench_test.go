package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkPeers measures, interleaved in one run, one sandboxed `echo`
// by ctx and by the sandboxes of its peers, each as a fresh process the
// way a script calls it: `ctx agent tsh … call` (the CLI: a client
// process, the socket, every authority layer, the tool's sandbox, durable
// frames), Anthropic's sandbox runtime (`srt echo tick`) and Codex's
// native sandbox (`codex sandbox -- echo tick`, the native binary without
// its node launcher), with a bare `bwrap … true` as the floor. It runs
// only under `make bench-peers`, which installs the peers from the npm
// registry (pinned) into CTX_BENCH_PEERS; never in CI.
func BenchmarkPeers(b *testing.B) {
	peers := os.Getenv("CTX_BENCH_PEERS")
	if peers == "" {
		b.Skip("CTX_BENCH_PEERS unset: run `make bench-peers`")
	}
	srt := filepath.Join(peers, "node_modules/.bin/srt")
	codex, _ := filepath.Glob(filepath.Join(peers, "node_modules/@openai/codex-linux-*/vendor/*/bin/codex"))
	if len(codex) != 1 {
		b.Fatalf("the native codex binary is not under %s: %v", peers, codex)
	}
	w := newWorld(b)
	w.start()
	w.tool("echo", "#!/bin/sh\necho tick\n")
	w.mustCtx("agent", "create", "pb", "--exec", binDir+"/testagent")
	ws := w.workspace()
	run := func(dir string, env []string, name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(t0)
		if err != nil || (!strings.Contains(string(out), "tick") && !strings.HasSuffix(name, "bwrap")) {
			b.Fatalf("%s %v: %v %s", name, args, err, out)
		}
		return took
	}
	home, _ := os.UserHomeDir()
	peerEnv := append(os.Environ(), "HOME="+home)
	var ctx, srtT, codexT, bare time.Duration
	w.etcReady(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx += run(ws, w.env(), w.ctxBin, "agent", "tsh", "pb", "--", "call", "echo")
		srtT += run(ws, peerEnv, srt, "echo", "tick")
		codexT += run(ws, peerEnv, codex[0], "sandbox", "--", "echo", "tick")
		bare += run(ws, nil, "/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/", "true")
	}
	n := float64(b.N)
	b.ReportMetric(float64(ctx.Microseconds())/n/1000, "ctx-cli-ms")
	b.ReportMetric(float64(srtT.Microseconds())/n/1000, "srt-ms")
	b.ReportMetric(float64(codexT.Microseconds())/n/1000, "codex-ms")
	b.ReportMetric(float64(bare.Microseconds())/n/1000, "bwrap-true-ms")
	b.ReportMetric(float64(ctx)/float64(codexT), "ctx/codex")
	b.ReportMetric(float64(ctx)/float64(srtT), "ctx/srt")
	b.ReportMetric(float64(ctx)/float64(bare), "ctx/bwrap")
}
