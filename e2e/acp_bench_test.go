package e2e

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkACPFirstChunk compares, interleaved, the time from a prompt to
// its first agent_message_chunk through a warm `ctx acp` (one process, one
// session: JSON-RPC in, a fresh agent-socket connection, frames mapped to
// session/update out) with the time from the same `send` to its first
// delta frame over the raw agent socket. Both runs start the same
// sandboxed agent, which dominates; the ratio is acp/raw.
func BenchmarkACPFirstChunk(b *testing.B) {
	w := newWorld(b)
	w.start()
	w.agent("demo", nil)
	ws := w.workspace()
	r := w.acpRaw(ws, "demo")
	sid := r.newSession(ws)
	c := w.dial("demo")
	acpPrompt := func(i int) time.Duration {
		t0 := time.Now()
		r.send(promptLine(100+i, sid, "echo hi "+strconv.Itoa(i)))
		r.until("agent_message_chunk", 30*time.Second)
		d := time.Since(t0)
		r.until(`"id":`+strconv.Itoa(100+i)+`,`, 30*time.Second)
		return d
	}
	rawPrompt := func(i int) time.Duration {
		t0 := time.Now()
		c.send(sendReq("raw-"+strconv.Itoa(i), "echo hi "+strconv.Itoa(i), "session", "rawbench", "workspace", ws))
		c.until("delta", 30*time.Second)
		d := time.Since(t0)
		c.until("done", 30*time.Second)
		return d
	}
	acpPrompt(-1) // warm both paths
	rawPrompt(-1)
	var acpT, rawT time.Duration
	w.etcReady(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		acpT += acpPrompt(i)
		rawT += rawPrompt(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(acpT.Microseconds())/float64(b.N)/1000, "acp-ms/op")
	b.ReportMetric(float64(rawT.Microseconds())/float64(b.N)/1000, "raw-ms/op")
	b.ReportMetric(float64(acpT)/float64(rawT), "acp/raw")
}
