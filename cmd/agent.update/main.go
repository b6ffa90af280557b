// Command agent.update is the agent.update tool (runtime.md U1): it asks the
// control socket to replace this agent's own system.md or
// prompt.template.md with the given content, effective at the next run.
//
//	agent.update --control system.md [--file F]   (content from stdin without --file)
//
// It prints the host's answer as one JSON line and exits 0 when the answer
// is ok, 1 otherwise.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cortexfs/ctx/ctlsock"
	"github.com/cortexfs/ctx/internal/layout"
)

func main() {
	// In ask mode the host asks the person before it answers (A2), for up
	// to the daemon's CTX_APPROVAL_TIMEOUT (60s by default): wait longer
	// than that. The run's cancel still ends the tool at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// run is the whole tool; main only wires the process to it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent.update", flag.ContinueOnError)
	fs.SetOutput(stderr)
	control := fs.String("control", "", "control file to replace: system.md or prompt.template.md")
	file := fs.String("file", "", "read the new content from this file (default: stdin)")
	requestID := fs.String("request-id", "", "request id (default: a fresh random id; reuse one only to retry)")
	agent := fs.String("agent", "", "agent (default: $CTX_AGENT); the host accepts only its own")
	session := fs.String("session", "", "session (default: from $CTX_AGENT_SUBJECT)")
	runID := fs.String("run", "", "run id (default: $CTX_RUN)")
	socket := fs.String("socket", "", "control socket (default: $CTX_CONTROL_SOCKET, else "+layout.SandboxControlSocket+")")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agent.update: "+format+"\n", a...)
		return 1
	}
	if fs.NArg() > 0 {
		return fail("unexpected arguments %q", fs.Args())
	}
	if *control == "" {
		return fail("--control is required (system.md or prompt.template.md)")
	}

	// The identity sent is only a claim: the host checks it against the
	// kernel-verified capability (U2, U3).
	subjAgent, subjSession := parseSubject(getenv("CTX_AGENT_SUBJECT"))
	req := ctlsock.Request{
		Op:        ctlsock.OpAgentUpdate,
		RequestID: *requestID,
		Agent:     first(*agent, getenv("CTX_AGENT"), subjAgent),
		Session:   first(*session, subjSession),
		Run:       first(*runID, getenv("CTX_RUN")),
		Control:   *control,
	}
	if req.Agent == "" || req.Session == "" || req.Run == "" {
		return fail("not inside an agent run: CTX_AGENT, CTX_AGENT_SUBJECT and CTX_RUN must be set")
	}
	if req.RequestID == "" {
		req.RequestID = "upd-" + rand.Text() // spec: U5 — fresh per call
	}

	var in io.Reader = stdin
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return fail("%v", err)
		}
		defer f.Close()
		in = f
	}
	// One byte over the limit is enough for the host to answer E2BIG.
	content, err := io.ReadAll(io.LimitReader(in, ctlsock.MaxContent+1))
	if err != nil {
		return fail("reading content: %v", err)
	}
	req.Content = string(content)

	path := first(*socket, getenv("CTX_CONTROL_SOCKET"), layout.SandboxControlSocket)
	resp, err := ctlsock.Call(ctx, path, req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fail("no answer from %s in time", path)
		}
		return fail("%v", err)
	}
	b, _ := json.Marshal(resp)
	fmt.Fprintln(stdout, string(b))
	if !resp.OK {
		return 1
	}
	return 0
}

// parseSubject splits CTX_AGENT_SUBJECT, <uid>:<agent>:<session>.
func parseSubject(s string) (agent, session string) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return "", ""
	}
	return parts[1], parts[2]
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
