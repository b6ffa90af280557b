package agent

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
)

// Props builds the actor of one agent definition. A crashed session actor
// is restarted (it rebuilds its state from events.jsonl), at most 5 times a
// minute.
func Props(cfg *config.Config, name string) *actor.Props {
	return cfg.Props(func() actor.Actor { return &Actor{cfg: cfg, name: name} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(5, time.Minute, func(any) actor.Directive { return actor.RestartDirective })))
}
