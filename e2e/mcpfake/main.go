// Command mcpfake is an MCP server for the e2e tests of MCP servers as tsh tools, built
// with the official Go SDK. `mcpfake MODE`:
//
//	ok       serves tools hello, big (a 10 MiB text), slow (waits for its
//	         cancellation, up to 60 s) and rm (destructive); every call is
//	         appended to /home/agent/mcpfake.log (the agent's
//	         home; a server's HOME is an empty directory of its own), as is a cancellation
//	exit     writes "fatal: no config" to stderr and exits 3 at once
//	silent   reads stdin and never answers initialize
//	garbage  prints garbage lines on stdout and never answers
//
// The ok mode also serves fork (starts up to n `sleep MARK` children, MARK
// a number of seconds that names them on the host, and reports forks=K
// and the error that stopped it) and mem (touches mb MiB and reports
// touched=MB): an agent's calls trying to go past its limits through a
// server; and getenv (says whether a variable is set, never its value).
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func logLine(s string) {
	f, err := os.OpenFile(filepath.Join("/home/agent", "mcpfake.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, s)
}

type none struct{}

type forkIn struct {
	N    int    `json:"n"`
	Mark string `json:"mark"`
}

type getenvIn struct {
	Name string `json:"name"`
}

type dialIn struct {
	Addr string `json:"addr"`
}

type memIn struct {
	MB int `json:"mb"`
}

// fork starts up to n sleepers until a start fails.
func fork(in forkIn) string {
	forks := 0
	for ; forks < in.N; forks++ {
		cmd := exec.Command("/bin/sleep", in.Mark)
		if err := cmd.Start(); err != nil {
			return fmt.Sprintf("forks=%d\nerror=%v\n", forks, err)
		}
		// Never waited on: a goroutine blocked in Wait holds a thread,
		// and threads count as tasks too.
		_ = cmd.Process.Release()
	}
	return fmt.Sprintf("forks=%d\n", forks)
}

// mem touches mb MiB, a page at a time.
func mem(in memIn) string {
	var keep [][]byte
	for i := 0; i < in.MB; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		keep = append(keep, b)
	}
	return fmt.Sprintf("touched=%d\n", len(keep))
}

type helloIn struct {
	Name string `json:"name"`
}

func main() {
	mode := "ok"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: no config")
		os.Exit(3)
	case "silent":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	case "garbage":
		go func() { _, _ = io.Copy(io.Discard, os.Stdin) }()
		w := bufio.NewWriter(os.Stdout)
		for {
			fmt.Fprintln(w, "garbage }{ not json")
			w.Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpfake", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "hello", Description: "Says hello"}, func(ctx context.Context, _ *mcp.CallToolRequest, in helloIn) (*mcp.CallToolResult, none, error) {
		logLine("call hello " + in.Name)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, none{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns 10 MiB"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, none, error) {
		logLine("call big")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 10<<20)}}}, none{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Waits to be cancelled"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, none, error) {
		logLine("call slow")
		select {
		case <-ctx.Done():
			logLine("cancelled slow")
			return nil, none{}, ctx.Err()
		case <-time.After(60 * time.Second):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, none{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fork", Description: "Starts n sleepers"}, func(ctx context.Context, _ *mcp.CallToolRequest, in forkIn) (*mcp.CallToolResult, none, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fork(in)}}}, none{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Tells whether a variable is set"}, func(ctx context.Context, _ *mcp.CallToolRequest, in getenvIn) (*mcp.CallToolResult, none, error) {
		_, ok := os.LookupEnv(in.Name)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s set=%v\n", in.Name, ok)}}}, none{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "dial", Description: "Connects to a TCP address"}, func(ctx context.Context, _ *mcp.CallToolRequest, in dialIn) (*mcp.CallToolResult, none, error) {
		res := "dial=ok\n"
		if c, err := net.DialTimeout("tcp", in.Addr, 2*time.Second); err != nil {
			res = fmt.Sprintf("dial=refused err=%v\n", err)
		} else {
			c.Close()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res}}}, none{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "mem", Description: "Touches mb MiB"}, func(ctx context.Context, _ *mcp.CallToolRequest, in memIn) (*mcp.CallToolResult, none, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: mem(in)}}}, none{}, nil
	})
	yes := true
	mcp.AddTool(s, &mcp.Tool{Name: "rm", Description: "Removes everything", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, none, error) {
			logLine("call rm")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed"}}}, none{}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfake:", err)
		os.Exit(1)
	}
}
