// Command mcpfake is an MCP server for the e2e tests of issue 13, built
// with the official Go SDK. `mcpfake MODE`:
//
//	ok       serves tools hello, big (a 10 MiB text), slow (waits for its
//	         cancellation, up to 60 s) and rm (destructive); every call is
//	         appended to $HOME/mcpfake.log, as is a cancellation
//	exit     writes "fatal: no config" to stderr and exits 3 at once
//	silent   reads stdin and never answers initialize
//	garbage  prints garbage lines on stdout and never answers
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func logLine(s string) {
	f, err := os.OpenFile(filepath.Join(os.Getenv("HOME"), "mcpfake.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, s)
}

type none struct{}

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
