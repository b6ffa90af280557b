// Package doctor checks that a machine can run ctx safely and says, for every
// check that fails, the exact fix: `ctx doctor` prints its Report.
//
// Every check is a function of what it observed (a probe's stderr, a sysctl's
// value, a directory's mode), so the verdicts are table-tested without
// touching the machine; Run gathers the observations through Env.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Status of one check.
type Status string

// Statuses: only Fail makes the report fail; Warn is worth knowing.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one verdict: a one-line message and, when it is not ok, the fix.
type Check struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Report is every check, in the order they ran.
type Report struct {
	Checks []Check `json:"checks"`
	OK     bool    `json:"ok"` // no check failed (warnings allowed)
}

func (r *Report) add(cs ...Check) {
	r.Checks = append(r.Checks, cs...)
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// Count is the number of checks with status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	r.OK = !r.Failed()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText prints one line per check, and the fix under each one that is
// not ok, then a summary line.
func (r *Report) WriteText(w io.Writer) error {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	fails, warns := 0, 0
	for _, c := range r.Checks {
		label := "ok  "
		switch c.Status {
		case Warn:
			label, warns = "WARN", warns+1
		case Fail:
			label, fails = "FAIL", fails+1
		}
		fmt.Fprintf(&b, "%s  %-*s  %s\n", label, width, c.Name, c.Message)
		if c.Fix != "" && c.Status != OK {
			fmt.Fprintf(&b, "      %-*s  fix: %s\n", width, "", c.Fix)
		}
	}
	switch {
	case fails > 0:
		fmt.Fprintf(&b, "%d check(s) failed, %d warning(s): ctx cannot run safely until the failures are fixed\n", fails, warns)
	case warns > 0:
		fmt.Fprintf(&b, "all required checks passed (%d warning(s))\n", warns)
	default:
		b.WriteString("all checks passed\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Run runs every check with the observations env gathers.
func Run(ctx context.Context, env *Env) *Report {
	r := &Report{}
	bw := CheckBwrap(env.Getenv("CTX_BWRAP"), env.FindBwrap)
	r.add(bw.Check)
	r.add(env.namespaces(ctx, bw))
	r.add(env.seccompCheck(ctx, bw))
	r.add(CheckRoot(env.Layout, env.Stat))
	r.add(CheckRuntimeDir(env.Layout.Runtime, env.Layout.UID, env.Stat))
	r.add(env.daemon(ctx))
	r.add(env.launcher(ctx))
	r.add(CheckTIOCSTI(env.ReadFile(TIOCSTISysctl)))
	if env.Cgroups != nil {
		r.add(CheckCgroup(env.Cgroups(ctx)))
	}
	r.add(env.agents()...)
	r.add(env.nestedChecks(ctx, bw)...)
	r.add(env.mcpFiles()...)
	r.add(env.providers()...)
	r.OK = !r.Failed()
	return r
}
