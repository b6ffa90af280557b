package stdtool

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// benchTree is the tree the grep benchmark searches: the Go toolchain's
// sources (about 11,000 files, 160 MB).
const benchTree = "/usr/local/go/src"

// BenchmarkGrepVsRipgrep times the built ctxtools grep against ripgrep
// (rg -n) over benchTree, both run as processes with their output read
// through a pipe, the page cache warmed first. The rg sub-benchmark
// reports ctx/rg: how many times rg's time ctx-grep takes (target ≤ 2),
// by wall time and by CPU time (user+system).
// The standard toolset: grep: ≤ 2× ripgrep over the Go source tree.
func BenchmarkGrepVsRipgrep(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("rg is not installed")
	}
	if _, err := os.Stat(benchTree); err != nil {
		b.Skipf("no %s", benchTree)
	}
	bin := filepath.Join(b.TempDir(), "ctxtools")
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go command to build ctxtools")
	}
	if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/cortexfs/ctx/cmd/ctxtools").CombinedOutput(); err != nil {
		b.Fatalf("build ctxtools: %v\n%s", err, out)
	}
	for _, bc := range []struct{ name, pattern string }{
		{"regexp", `func \w+Handler`},
		{"literal", `ErrNotExist`},
	} {
		ctxCmd := func() *exec.Cmd { return exec.Command(bin, "grep", bc.pattern, benchTree) }
		rgCmd := func() *exec.Cmd { return exec.Command(rg, "-n", bc.pattern, benchTree) }
		// warm the page cache, and check both find the same lines
		ctxOut, _ := benchRun(b, ctxCmd())
		rgOut, _ := benchRun(b, rgCmd())
		if c, r := benchMatches(ctxOut), bytes.Count(rgOut, []byte{'\n'}); c != r {
			b.Fatalf("%s: ctx-grep finds %d lines, rg %d", bc.pattern, c, r)
		}
		var ctxWall, ctxCPU float64
		b.Run(bc.name+"/ctx-grep", func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				_, c := benchRun(b, ctxCmd())
				cpu += c
			}
			ctxWall = float64(b.Elapsed()) / float64(b.N)
			ctxCPU = float64(cpu) / float64(b.N)
			b.ReportMetric(ctxCPU, "cpu-ns/op")
		})
		b.Run(bc.name+"/rg", func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				_, c := benchRun(b, rgCmd())
				cpu += c
			}
			rgWall := float64(b.Elapsed()) / float64(b.N)
			rgCPU := float64(cpu) / float64(b.N)
			b.ReportMetric(rgCPU, "cpu-ns/op")
			if ctxWall > 0 && rgWall > 0 {
				b.ReportMetric(ctxWall/rgWall, "ctx/rg-wall")
				b.ReportMetric(ctxCPU/rgCPU, "ctx/rg-cpu")
			}
		})
	}
}

// benchRun runs cmd with its stdout read through a pipe (rg and grep can
// tell /dev/null), returning the stdout and the CPU time it took.
func benchRun(b *testing.B, cmd *exec.Cmd) ([]byte, time.Duration) {
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out)
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v", cmd, err)
	}
	return out.Bytes(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

var benchTotal = regexp.MustCompile(`\n\[(\d+) matching lines? in `)

// benchMatches is how many lines ctx-grep matched: its note's count when it
// capped the output, else its lines.
func benchMatches(out []byte) int {
	if m := benchTotal.FindSubmatch(out); m != nil {
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return bytes.Count(out, []byte{'\n'})
}
