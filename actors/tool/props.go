package tool

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/internal/config"
)

// Props builds a tool actor for one call. A tool actor is never restarted:
// a crash stops it and the run reports the call as failed.
func Props(cfg *config.Config, call Call) *actor.Props {
	return cfg.Props(func() actor.Actor { return &Actor{cfg: cfg, call: call} })
}
