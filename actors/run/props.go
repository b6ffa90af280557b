package run

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/proc"
)

// Props builds a run actor. Its own children (tool actors) are stopped, not
// restarted, when they crash: a crashed call is not run again.
func Props(cfg *config.Config, spec Spec) *actor.Props { return props(cfg, spec, proc.Start) }

// props builds a run actor whose processes start through start.
func props(cfg *config.Config, spec Spec, start startFunc) *actor.Props {
	return cfg.Props(func() actor.Actor { return &Actor{cfg: cfg, spec: spec, startProc: start} },
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
}
