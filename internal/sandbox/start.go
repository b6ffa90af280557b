package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
)

// Start builds v's view of argv with env and starts it with start, which
// finishes the spec (its own mounts, the network) and starts the sandbox
// (proc.Start, or a package test's stand-in). A start the view check
// refused — a protected path was not where the walk found it once bwrap
// had made the view (bwrap.ErrMoved), or bwrap failed on such a path
// (bwrap.ErrNoView, and the host shows it moved) — ran nothing: what bwrap
// made for it on the host is removed (Held.tidyUp) and the view is walked
// and started again, up to maxMovedTries, so a directory moved on the
// host while a tool started costs a walk, not the call. The caller calls
// h.Ended() once the sandbox is gone; on an error nothing is held. A
// cancelled ctx stops the tries. spec: B1
//
// P is the started process (*proc.Proc): this package does not link the
// starter, which the ctx client must not carry.
func Start[P any](ctx context.Context, v View, argv []string, env map[string]string, start func(bwrap.Spec) (P, error)) (P, *Held, error) {
	var none P
	log := v.Log
	if log == nil {
		log = slog.Default()
	}
	for try := 1; ; try++ {
		t0 := time.Now()
		s, h, err := v.buildRetrying(argv, env, !v.ByPath)
		if err != nil {
			return none, nil, err
		}
		p, err := start(s)
		h.Started()
		if err == nil {
			h.dropTidy()
			return p, h, nil
		}
		// bwrap itself fails when a directory it binds moved just before
		// (its source gone): that is a move too, told by the host's paths.
		moved := errors.Is(err, bwrap.ErrMoved)
		if !moved && errors.Is(err, bwrap.ErrNoView) && h.moved() {
			moved, err = true, fmt.Errorf("%w (%w)", bwrap.ErrMoved, err)
		}
		if moved {
			h.tidyUp(t0)
		}
		h.Ended()
		if !moved || try == maxMovedTries || ctx.Err() != nil {
			return none, nil, err
		}
		log.Info("a protected path moved while its sandbox started; walking again", "agent", v.Def.Name, "try", try, "err", err)
	}
}
