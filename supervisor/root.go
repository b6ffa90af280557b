package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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
//
// Its slow work — reading agent/ every ScanInterval, reading the launch
// receipts — runs in goroutines it starts and that send their result back
// as a message. Stopping (or restarting) cancels them without waiting
// inside Receive; loops, the daemon's, counts them so the daemon waits for
// them once the actor is gone.
type rootActor struct {
	cfg      *config.Config
	launcher terminal.Launcher
	loops    *sync.WaitGroup
	log      *slog.Logger
	agents   map[string]*actor.PID
	terms    map[termKey]*actor.PID
	stopLoop context.CancelFunc
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
		r.onDrain(c, m)
	case *actor.Terminated:
		r.onChildGone(m)
	case *actor.Stopping, *actor.Restarting:
		r.onStopping()
	case *actor.Stopped:
	default:
		r.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (r *rootActor) onStarted(c actor.Context) {
	r.log = r.cfg.Log.With("actor", "supervisor")
	r.agents = map[string]*actor.PID{}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopLoop = cancel
	r.startTerminals(ctx, c)
	self, root, l := c.Self(), c.ActorSystem().Root, r.cfg.Layout
	r.loops.Add(1)
	go func() {
		defer r.loops.Done()
		t := time.NewTicker(ScanInterval)
		defer t.Stop()
		for {
			// A failed listing (EMFILE, ENOMEM, EIO…) says nothing about
			// which definitions exist: keep the agents as they are rather
			// than stop every socket (a missing agent/ is not an error —
			// List answers no names).
			if names, err := agentdef.List(l); err != nil {
				r.log.Warn("scan definitions; agents kept as they are", "err", err)
			} else if ctx.Err() == nil {
				root.Send(self, &definitions{names: names})
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// onStopping ends the actor's goroutines; it does not wait for them (the
// daemon does, through loops).
func (r *rootActor) onStopping() {
	if r.stopLoop != nil {
		r.stopLoop()
	}
}

// onDrain passes a shutdown's drain to every agent, hence to every session.
func (r *rootActor) onDrain(c actor.Context, m *session.Drain) {
	for _, pid := range r.agents {
		c.Send(pid, m)
	}
}

func (r *rootActor) onChildGone(m *actor.Terminated) {
	for n, pid := range r.agents {
		if pid.Equal(m.Who) {
			delete(r.agents, n)
		}
	}
	r.onTerminalGone(m.Who)
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
