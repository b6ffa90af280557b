package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
)

// BenchmarkToolMounts: the tool part of a call's view (verdicts, the
// tree's quick key) with one tool and with 101 (each with a .d/ holding
// tool.json), interleaved; 101/1 is what a call pays per tool installed
// in the daemon itself (docs/performance.md, issue row "+100 tools").
func BenchmarkToolMounts(b *testing.B) {
	var defs [2]*agentdef.Def
	var ls [2]layout.Layout
	for k, n := range []int{1, 101} {
		dir := b.TempDir()
		l := layout.Layout{Root: dir + "/root", Runtime: dir + "/run", UID: os.Getuid()}
		td := l.ToolDir()
		os.MkdirAll(td, 0o755)
		for j := range n {
			name := "t" + strconv.Itoa(j)
			os.WriteFile(filepath.Join(td, name), []byte("#!/bin/sh\n"), 0o755)
			os.MkdirAll(filepath.Join(td, name+".d"), 0o755)
			os.WriteFile(filepath.Join(td, name+".d", "tool.json"), []byte(`{"description":"x"}`), 0o644)
		}
		os.MkdirAll(l.AgentControl("a"), 0o755)
		defs[k] = &agentdef.Def{Name: "a", Kind: agentdef.KindExec, Object: l.AgentObject("a"), Control: l.AgentControl("a"), CTXPath: l.DefaultCTXPath()}
		ls[k] = l
	}
	for k := range 2 { // the trees made: a call reuses them
		toolMounts(ls[k], defs[k], true)
	}
	var took [2]int64
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			t0 := time.Now()
			_, mounts, _ := toolMounts(ls[k], defs[k], true)
			took[k] += time.Since(t0).Nanoseconds()
			if len(mounts) == 0 {
				b.Fatal("no tool tree")
			}
		}
	}
	b.ReportMetric(float64(took[0])/float64(b.N)/1e3, "1tool-µs")
	b.ReportMetric(float64(took[1])/float64(b.N)/1e3, "101tools-µs")
	b.ReportMetric((float64(took[1])-float64(took[0]))/float64(b.N)/100/1e3, "µs/tool")
}
