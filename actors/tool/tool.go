// Package tool is the actor that runs one tool call: resolve it, check every
// authority layer, ask for approval when the agent is in ask mode, then run it
// in the sandbox and normalize its result (runtime.md K1, K2, V3, A2, A3).
package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/proc"
)

// Actor runs one call.
type Actor struct {
	cfg    *config.Config
	call   Call
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	p      *proc.Proc
	prep   *prepared
	done   bool
}

func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.onStarted(c)
	case *checked:
		a.onChecked(c, m)
	case *Approved:
		a.onApproved(c, m)
	case *finished:
		a.report(c, m.res)
	case *Cancel:
		a.onCancel(c)
	case *actor.Stopping:
		a.cancel()
		if a.p != nil {
			a.p.Kill()
		}
	case *actor.Stopped, *actor.Restarting:
		if a.p != nil {
			a.p.Kill()
		}
	default:
		a.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) onStarted(c actor.Context) {
	a.log = a.cfg.Log.With("actor", "tool", "run", a.call.View.Run, "call", a.call.CallID, "tool", a.call.Name)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	self := c.Self()
	root := c.ActorSystem().Root
	call := a.call
	cfg := a.cfg
	go func() {
		prep, res := check(cfg, call)
		root.Send(self, &checked{res: res, prep: prep})
	}()
}

func (a *Actor) onChecked(c actor.Context, m *checked) {
	if a.done {
		return
	}
	if m.res != nil {
		a.report(c, m.res)
		return
	}
	a.prep = m.prep
	if a.call.Ask {
		// spec: A2 — after every check, before spawn.
		c.Send(c.Parent(), &NeedApproval{CallID: a.call.CallID})
		return
	}
	a.spawn(c)
}

func (a *Actor) onApproved(c actor.Context, m *Approved) {
	if a.done || a.prep == nil || a.p != nil {
		return
	}
	if m.Decision != "allow_once" { // spec: A3 — everything else fails closed
		a.report(c, &Result{CallID: a.call.CallID, Name: a.call.Name, Status: envelope.StatusDenied,
			Content: "not approved: " + m.Decision, Layer: "approval"})
		return
	}
	a.spawn(c)
}

func (a *Actor) onCancel(c actor.Context) {
	if a.done {
		return
	}
	if a.p != nil {
		a.p.Kill()
	}
	a.report(c, &Result{CallID: a.call.CallID, Name: a.call.Name, Status: envelope.StatusCancelled, Content: "cancelled"})
}

func (a *Actor) report(c actor.Context, r *Result) {
	if a.done {
		return
	}
	a.done = true
	// The run stops this actor once it has the result (a self-stop's
	// Terminated could overtake the result: system messages go first).
	c.Send(c.Parent(), r)
}

// prepared is a call that passed every check.
type prepared struct {
	argv []string // inside the sandbox
}

// ErrRefused classifies authority refusals.
var ErrRefused = errors.New("refused")

// check resolves the call and checks the authority layers the first cut
// knows: direct-native declaration (K1/K2), CTX_PATH visibility, the
// nofollow regular-file check and the execute bits. It runs off the actor.
func check(cfg *config.Config, call Call) (*prepared, *Result) {
	deny := func(layer, why string) (*prepared, *Result) {
		return nil, &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusDenied,
			Content: fmt.Sprintf("denied by %s: %s", layer, why), Layer: layer}
	}
	def := call.View.Def
	if call.Name == "tsh" { // spec: K1 — the one direct-native tool
		tsh := filepath.Join(cfg.Layout.BinDir(), "tsh")
		if err := checkExec(tsh); err != nil {
			return deny("path", "tsh is not installed in "+cfg.Layout.BinDir()+": "+err.Error())
		}
		return &prepared{argv: append([]string{layout.SandboxRoot + "/bin/tsh"}, call.Args...)}, nil
	}
	declared := false
	for _, t := range def.Tools {
		declared = declared || t == call.Name
	}
	if !declared { // spec: K2
		return deny("direct-native", fmt.Sprintf("%q is not tsh and not declared in %s/tools", call.Name, def.Control))
	}
	if err := layout.CheckName("tool", call.Name); err != nil {
		return deny("path", err.Error())
	}
	for _, dir := range strings.Split(def.CTXPath, ":") {
		host, ok := cfg.Layout.HostPath(dir)
		if !ok {
			continue
		}
		p := filepath.Join(host, call.Name)
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return deny("nofollow", p+" is a symlink")
		}
		if err := checkExec(p); err != nil {
			return deny("mode", err.Error())
		}
		return &prepared{argv: append([]string{filepath.Join(dir, call.Name)}, call.Args...)}, nil
	}
	return deny("path", fmt.Sprintf("no tool %q on CTX_PATH %s", call.Name, def.CTXPath))
}

func checkExec(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|0x20000 /* O_NOFOLLOW */, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

func (a *Actor) spawn(c actor.Context) {
	v := a.call.View
	spec := v.Spec(a.prep.argv, v.ToolEnv())
	p, err := proc.Start(proc.Options{Bwrap: a.cfg.Bwrap, Spec: spec})
	if err != nil {
		a.report(c, &Result{CallID: a.call.CallID, Name: a.call.Name, Status: envelope.StatusError,
			Content: "sandbox: " + err.Error(), Layer: "sandbox"})
		return
	}
	a.p = p
	a.cfg.Procs.Add(1)
	self, root := c.Self(), c.ActorSystem().Root
	call := a.call
	go func() {
		defer a.cfg.Procs.Done()
		head := make([]byte, 0, 64<<10)
		buf := make([]byte, 32<<10)
		for {
			n, err := p.Stdout.Read(buf)
			if room := cap(head) - len(head); room > 0 {
				head = append(head, buf[:min(n, room)]...)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					slog.Debug("tool stdout", "err", err)
				}
				break
			}
		}
		werr := p.Wait()
		status, content, trunc := envelope.Normalize(head, p.Stderr(), werr == nil)
		root.Send(self, &finished{res: &Result{CallID: call.CallID, Name: call.Name, Status: status, Content: content, Truncated: trunc}})
	}()
}
