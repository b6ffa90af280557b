package prompt

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkBuild: 200 skills (each SKILL.md with a 64 KiB body) and 1 MiB of
// history, 200k-token window.
func BenchmarkBuild(b *testing.B) {
	in, _ := fixture(b)
	body := strings.Repeat("body ", 64<<10/5)
	for i := range 200 {
		write(b, filepath.Join(in.CtxHome.Host, "skills", fmt.Sprintf("s%03d", i), "SKILL.md"),
			skillMD(fmt.Sprintf("s%03d", i), fmt.Sprintf("Skill number %d does one useful thing well.", i), body))
	}
	in.History = nil
	msg := strings.Repeat("history text ", 80) // ~1 KiB
	for i := 0; i < 1<<10; i++ {
		in.History = append(in.History, Message{Role: []string{"user", "assistant"}[i%2], Content: msg})
	}
	b.ResetTimer()
	var r *Result
	for b.Loop() {
		var err error
		r, err = Build(in)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(r.JSON())), "prompt-bytes")
	b.ReportMetric(float64(len(r.History)), "history-msgs")
}
