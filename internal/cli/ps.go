package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/client"
	"github.com/cortexfs/ctx/internal/sessions"
	terminal "github.com/cortexfs/ctx/internal/termres"
)

// PsCmd is `ctx ps`: what is running now, across agents.
type PsCmd struct {
	JSON bool `name:"json" help:"One JSON object per run and per live terminal."`
}

// Help is the long help of `ctx ps --help`.
func (c *PsCmd) Help() string {
	return `Active runs across agents — agent, session, run, state (running or
waiting-approval), elapsed time, tool calls so far and the call in flight —
and live terminals with their clients. Read from the session logs and the
terminal receipts: the daemon is not started, and with no daemon running
there are no active runs (an open run is interrupted, see ctx agent
sessions). Queued requests are not shown: nothing is recorded of a request
before it starts.`
}

// psRun is one active run in ctx ps --json.
type psRun struct {
	Kind     string             `json:"kind"` // "run"
	Agent    string             `json:"agent"`
	Session  string             `json:"session"`
	Scope    string             `json:"scope"`
	Run      string             `json:"run"`
	State    string             `json:"state"`
	Since    string             `json:"since,omitempty"`
	Calls    int                `json:"tool_calls"`
	InFlight string             `json:"in_flight,omitempty"`
	Approval *sessions.Approval `json:"approval,omitempty"`
}

func (c *PsCmd) Run(env *Env) error {
	l := env.Layout
	up := client.Ping(env.Ctx, l) == nil
	agents, err := agentdef.List(l)
	if err != nil {
		return err
	}
	var runs []psRun
	if up {
		for _, a := range agents {
			list, err := sessions.List(l, a, true)
			if err != nil {
				return err
			}
			for _, s := range list {
				if s.ActiveRun == "" {
					continue
				}
				runs = append(runs, psRun{Kind: "run", Agent: a, Session: s.Session, Scope: s.Scope, Run: s.ActiveRun,
					State: s.State, Since: s.Since, Calls: s.ToolCalls, InFlight: s.InFlight, Approval: s.Approval})
			}
		}
	}
	var terms []terminal.Status
	for _, k := range terminal.List(l, "") {
		if st, err := terminal.Describe(l, k[0], k[1]); err == nil && st.State == terminal.StateLive {
			terms = append(terms, st)
		}
	}
	out := bufio.NewWriter(env.Stdout)
	defer out.Flush()
	if c.JSON {
		for _, r := range runs {
			b, _ := json.Marshal(r)
			out.Write(append(b, '\n'))
		}
		for _, t := range terms {
			b, _ := json.Marshal(struct {
				Kind string `json:"kind"`
				terminal.Status
			}{"terminal", t})
			out.Write(append(b, '\n'))
		}
		return out.Flush()
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if !up {
		fmt.Fprintln(tw, "no daemon is running: no active runs")
	} else {
		fmt.Fprintln(tw, "AGENT\tSESSION\tRUN\tSTATE\tELAPSED\tCALLS\tIN FLIGHT")
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Agent, r.Session, r.Run, r.State, elapsed(r.Since), r.Calls, dash(r.InFlight))
		}
	}
	if len(terms) > 0 {
		fmt.Fprintln(tw, "")
		fmt.Fprintln(tw, "TERMINAL\tAGENT\tSESSION\tPID\tCLIENTS\tSOCKET")
		for _, t := range terms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", t.ID, t.Agent, t.Session, t.PID, t.Clients, t.Socket)
		}
	}
	return tw.Flush()
}

// elapsed is the time since a frame's ts, to the second.
func elapsed(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}
