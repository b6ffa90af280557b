package terminal

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
)

// Props builds the actor of one terminal resource. It has no children; its
// parent (the supervisor's root actor) restarts it when it crashes, and a
// restarted actor re-adopts its terminal from the launch receipt.
func Props(cfg *config.Config, launcher Launcher, agent, session string) *actor.Props {
	return cfg.Props(func() actor.Actor {
		return &Actor{cfg: cfg, launcher: launcher, agent: agent, session: session}
	})
}
