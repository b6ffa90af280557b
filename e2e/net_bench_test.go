package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/egress"
)

// BenchmarkToolCallNet: what a `net` sandbox adds to a tool call (the
// netns helper, the descriptors handed back, the proxy's goroutines)
// against the same call without net, through the daemon.
func BenchmarkToolCallNet(b *testing.B) {
	w := newWorld(b)
	w.start(egress.EnvLoopbackOnly + "=1")
	w.tool("clock", "#!/bin/sh\necho tick\n")
	w.agent("none", map[string]string{"tools": "clock\n", "policy": "allow tool *\n"})
	w.agent("net", map[string]string{"tools": "clock\n", "policy": "allow tool *\n", "mount": "net\nnet local 127.0.0.1:11434\n"})
	ws := b.TempDir()
	w.etcReady(b)
	for _, agent := range []string{"none", "net"} {
		b.Run(agent, func(b *testing.B) {
			c := w.dial(agent)
			for i := 0; i < b.N; i++ {
				c.send(sendReq("bench-"+strconv.Itoa(i), "tool clock", "workspace", ws))
				got := c.until("done", 20*time.Second)
				ok := false
				for _, f := range got {
					if f.Type == "tool_result" && strings.Contains(f.Content, "tick") {
						ok = true
					}
				}
				if !ok {
					b.Fatalf("no tick: %v", types(got))
				}
			}
		})
	}
}
