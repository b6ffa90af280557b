package run

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
)

// Props builds a run actor. Its own children (tool actors) are stopped, not
// restarted, when they crash: a crashed call is not run again.
func Props(cfg *config.Config, spec Spec) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{cfg: cfg, spec: spec} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
}
