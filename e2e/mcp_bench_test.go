package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPEchoVsSDK compares, interleaved, a warm `tsh call
// everything.echo message=hi` op (socket, durable frames, authority,
// schema validation, the sandboxed server reused) with the same call made
// by the SDK's own client on an unsandboxed server it started itself.
// The first call of the session (the server's start in its sandbox) is
// reported apart. A third baseline, interleaved too, is the SDK's call
// followed by one durable append (a line written to a log beside the
// sessions' and fsynced): the floor of an op whose result is committed
// before anyone sees it (sessions-and-frames.md, the fsync policy).
func BenchmarkMCPEchoVsSDK(b *testing.B) {
	npm := needServers(b)
	w := newWorld(b)
	w.start()
	w.mustCtx("agent", "create", "mb", "--exec", binDir+"/testagent")
	w.mustCtx("mcp", "add", "everything", "--", npmBin(npm, "everything"))
	c := w.dial("mb")
	call := func(id string) {
		c.send(map[string]any{"op": "tsh", "id": id, "session": "bench", "args": []string{"call", "everything.echo", "message=hi"}})
		got := c.until("done", 30*time.Second)
		if got[len(got)-1].Status != "ok" {
			b.Fatal(types(got))
		}
	}
	t0 := time.Now()
	call("first")
	first := time.Since(t0)

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	t0 = time.Now()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(npmBin(npm, "everything"))}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	sdkCall := func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	sdkCall()
	sdkFirst := time.Since(t0)

	commitLog, err := os.OpenFile(filepath.Join(w.root, "bench-commit.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer commitLog.Close()
	line := []byte(`{"type":"tool_result","tool":"everything.echo","content":"Echo: hi","status":"ok"}` + "\n")
	var ctxT, sdkT, floorT time.Duration
	w.etcReady(b) // before the daemon's CPU is read: its build is no op's
	cpu0, _ := procCPU(w.daemon.Process.Pid)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 = time.Now()
		call("b" + strconv.Itoa(i))
		ctxT += time.Since(t0)
		t0 = time.Now()
		sdkCall()
		sdkT += time.Since(t0)
		t0 = time.Now()
		sdkCall()
		if _, err := commitLog.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := commitLog.Sync(); err != nil {
			b.Fatal(err)
		}
		floorT += time.Since(t0)
	}
	b.StopTimer() // the SDK client's Close waits for its server to exit
	cpu1, _ := procCPU(w.daemon.Process.Pid)
	n := float64(b.N)
	// The daemon's own CPU per op (its MCP server is a child, not counted).
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/n, "daemon-cpu-µs/op")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-call-ms")
	b.ReportMetric(float64(sdkFirst.Microseconds())/1000, "sdk-first-call-ms")
	b.ReportMetric(float64(ctxT.Microseconds())/n/1000, "tsh-call-ms")
	b.ReportMetric(float64(sdkT.Microseconds())/n/1000, "sdk-call-ms")
	b.ReportMetric(float64(floorT.Microseconds())/n/1000, "sdk+fsync-ms")
	b.ReportMetric(float64(ctxT)/float64(sdkT), "tsh/sdk")
	b.ReportMetric(float64(ctxT)/float64(floorT), "tsh/sdk+fsync")
}
