package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
)

// Props builds a session actor. keep must be the same for every
// incarnation of this session. A crashed run actor is restarted once — the
// new incarnation only concludes the run as interrupted — and stopped if it
// crashes again (the session then concludes it).
//
// The requests received are counted across the incarnations of one spawn
// (the parent counts what it routed to that pid, restarts included), so a
// session restarted after a crash can still passivate.
func Props(cfg *config.Config, key Key, keep *Keep) *actor.Props {
	seen := new(int)
	return cfg.Props(func() actor.Actor { return &Actor{cfg: cfg, key: key, keep: keep, seen: seen} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(1, time.Minute, func(any) actor.Directive { return actor.RestartDirective })))
}
