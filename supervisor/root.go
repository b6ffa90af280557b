package supervisor

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/agent"
	"github.com/cortexfs/ctx/actors/session"
	"github.com/cortexfs/ctx/actors/terminal"
	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/config"
)

// ScanInterval is how often agent/ is read for new or removed definitions
// (interfaces.md: served within one second).
const ScanInterval = 400 * time.Millisecond

// rootActor supervises one agent actor per definition and one terminal
// actor per terminal resource in use (terminals.go).
type rootActor struct {
	cfg      *config.Config
	launcher terminal.Launcher
	log      *slog.Logger
	agents   map[string]*actor.PID
	terms    map[termKey]*actor.PID
	stop     chan struct{}
	done     chan struct{}
}

func (r *rootActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		r.onStarted(c)
	case *definitions:
		r.onDefinitions(c, m)
	case *terminalOp:
		r.onTerminalOp(c, m)
	case *terminalReceipts:
		r.onTerminalReceipts(c, m)
	case *session.Drain:
		for _, pid := range r.agents { // issue 16 item 11: every agent's sessions
			c.Send(pid, m)
		}
	case *actor.Terminated:
		for n, pid := range r.agents {
			if pid.Equal(m.Who) {
				delete(r.agents, n)
			}
		}
		r.onTerminalGone(m.Who)
	case *actor.Stopping:
		close(r.stop)
		<-r.done
	case *actor.Stopped, *actor.Restarting:
	default:
		r.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (r *rootActor) onStarted(c actor.Context) {
	r.log = r.cfg.Log.With("actor", "supervisor")
	r.agents = map[string]*actor.PID{}
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	r.startTerminals(c)
	self, root, l := c.Self(), c.ActorSystem().Root, r.cfg.Layout
	go func() {
		defer close(r.done)
		t := time.NewTicker(ScanInterval)
		defer t.Stop()
		for {
			// A failed listing (EMFILE, ENOMEM, EIO…) says nothing about
			// which definitions exist: keep the agents as they are rather
			// than stop every socket (issue 15 item 3; a missing agent/ is
			// not an error — List answers no names).
			if names, err := agentdef.List(l); err != nil {
				r.log.Warn("scan definitions; agents kept as they are", "err", err)
			} else {
				root.Send(self, &definitions{names: names})
			}
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (r *rootActor) onDefinitions(c actor.Context, m *definitions) {
	seen := map[string]bool{}
	for _, n := range m.names {
		seen[n] = true
		if _, ok := r.agents[n]; ok {
			continue
		}
		pid, err := c.SpawnNamed(agent.Props(r.cfg, n), "agent/"+n)
		if err != nil {
			r.log.Error("spawn agent", "agent", n, "err", err)
			continue
		}
		r.agents[n] = pid
	}
	for n, pid := range r.agents {
		if !seen[n] {
			r.log.Info("definition removed; stopping its socket", "agent", n)
			c.Stop(pid)
			delete(r.agents, n)
		}
	}
}
