package run

import (
	"context"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cortexfs/ctx/internal/diskreserve"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

// How a run ends: cancel, conclusion, the audit, the last frames, and
// everything it started stopped (X12); the disk watch that can end it.

// onCancel acts until the run is concluded (loading or running), and
// concludes it cancelled.
func (a *Actor) onCancel(c actor.Context) {
	if a.phase.concluded() {
		return
	}
	// spec: X12 — a model's HTTP stream is aborted at once; an ACP agent
	// gets session/cancel, then SIGTERM → grace → SIGKILL once done is durable.
	a.eng.halt()
	a.endToolCall(c, envelope.StatusCancelled, "cancelled")
	a.conclude(c, &ipc.Frame{Type: ipc.TypeCancelled}, ipc.StatusCancelled)
}

// conclude emits the one conclusion (if any) and done. Only the host does
// (X7, X8). First, off the actor, the run's placeholders are unpinned and
// a run with a workspace compares it with the snapshot taken at its
// start, and warns of what now runs code on the host; nothing more is
// recorded meanwhile.
// In phase loading or running: → concluding (the audit) or → concluded.
func (a *Actor) conclude(c actor.Context, f *ipc.Frame, status string) {
	if a.phase.concluded() {
		return
	}
	a.eng.concluding(c, status) // every recorded call gets its result before the conclusion
	if au, ph := a.audit, a.cfg.Placeholders; au != nil || ph != nil {
		a.enter(phaseConcluding)
		a.audit = nil
		self, root, run, log := c.Self(), c.ActorSystem().Root, a.spec.RunID, a.log
		go func() {
			// The placeholders the run's sandboxes shared go first (those
			// a sandbox still uses, with it): none is left in the
			// workspace once a client has seen done.
			if ph != nil {
				ph.EndRun(run)
			}
			m := &audited{f: f, status: status}
			if au != nil {
				m.warnings, m.incomplete = au.changes()
				au.endReview(log)
			}
			root.Send(self, m)
		}()
		return
	}
	a.enter(phaseConcluded)
	a.finish(c, f, status)
}

// onAudited acts in phase concluding: it emits the run's host-code
// warning, then its conclusion (→ concluded). An audit a crashed
// incarnation started is not this run's.
func (a *Actor) onAudited(c actor.Context, m *audited) {
	if a.phase != phaseConcluding {
		return
	}
	a.enter(phaseConcluded)
	if len(m.warnings) > 0 {
		msg := "this run changed what runs code on the host: " + strings.Join(m.warnings, "; ")
		if len(msg) > 8<<10 {
			msg = msg[:8<<10] + " …"
		}
		a.log.Warn("run changed what runs code on the host", "changes", m.warnings)
		a.emit(c, &ipc.Frame{Type: ipc.TypeWarning, Message: msg})
	}
	if len(m.incomplete) > 0 {
		// A cut-short walk is said, or a run could hide a new hook behind
		// enough planted files and be reported as having changed nothing.
		msg := "the end-of-run check of what runs code on the host is incomplete: " + strings.Join(m.incomplete, "; ")
		a.log.Warn("end-of-run check incomplete", "why", m.incomplete)
		a.emit(c, &ipc.Frame{Type: ipc.TypeWarning, Message: msg})
	}
	a.finish(c, m.f, m.status)
}

func (a *Actor) finish(c actor.Context, f *ipc.Frame, status string) {
	if f != nil {
		a.emit(c, f)
	}
	done := &ipc.Frame{Type: ipc.TypeDone, ID: a.spec.ReqID, Status: status}
	if u := a.usage; u != nil {
		done.Usage = &ipc.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
	}
	for m, u := range a.usageBy {
		if done.UsageByModel == nil {
			done.UsageByModel = map[string]*ipc.Usage{}
		}
		done.UsageByModel[m] = &ipc.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
	}
	a.emit(c, done)
}

func (a *Actor) emit(c actor.Context, f *ipc.Frame) {
	if f.Type == ipc.TypeDelta && len(f.Text) > ipc.MaxDeltaText {
		// A longer delta (an ACP chunk, a model event) becomes several,
		// so no frame outgrows what clients read (ipc.MaxFrameLine).
		for text := f.Text; text != ""; {
			piece := cutText(text, ipc.MaxDeltaText)
			text = text[len(piece):]
			a.emit(c, &ipc.Frame{Type: ipc.TypeDelta, Text: piece})
		}
		return
	}
	f.Run = a.spec.RunID
	c.Request(c.Parent(), &Emit{Frame: f}) // Request: the session checks the sender is the active run
}

// onConcluded: the done frame is durable. End every process: SIGTERM, the
// grace period, SIGKILL (X12). Stop once they are gone. From any phase →
// finishing.
func (a *Actor) onConcluded(c actor.Context) {
	a.enter(phaseFinishing)
	if a.toolPID != nil {
		c.Stop(a.toolPID)
	}
	a.eng.end()
	for _, p := range a.procs {
		p.Terminate(a.ctx, a.cfg.CancelGrace)
	}
	a.maybeStop(c)
}

func (a *Actor) reap() {
	live := a.procs[:0]
	for _, p := range a.procs {
		select {
		case <-p.Done():
		default:
			live = append(live, p)
		}
	}
	a.procs = live
}

func (a *Actor) maybeStop(c actor.Context) {
	a.reap()
	if a.phase == phaseFinishing && !a.startPending && len(a.procs) == 0 {
		c.Stop(c.Self())
	}
}

func (a *Actor) onStopping() {
	// Daemon shutdown or the session going away: give processes their grace.
	for _, p := range a.procs {
		p.Terminate(context.Background(), a.cfg.CancelGrace)
	}
	if a.stop != nil {
		a.stop()
	}
}

// onStopped: the run is over and its children are stopped. What is still
// in its cgroup after the grace (a tool being terminated, anything that
// escaped its sandbox's teardown) is killed and the cgroup removed, off
// the actor; the run's placeholders are unpinned.
func (a *Actor) onStopped() {
	a.closeGroup(a.cfg.CancelGrace)
	a.unwatchDisk()
	if a.audit != nil {
		a.audit.close() // a run stopped before its conclusion: nothing to compare
		a.audit = nil
	}
	if a.cfg.Placeholders != nil {
		// The placeholders its sandboxes shared go with their last use.
		a.cfg.Placeholders.EndRun(a.spec.RunID)
	}
}

// watchDisk registers the run with the disk reserve watcher: its writable
// host directories are the agent home, the workspace and the rw .d/mount
// sources — the view's writable mounts (the watcher counts those on
// CTX_ROOT's filesystem).
func (a *Actor) watchDisk(c actor.Context) {
	dirs := []string{a.cfg.Layout.AgentHome(a.def.Name)} // spec: B2 — the agent home is always writable
	if a.spec.Workspace != "" {
		dirs = append(dirs, a.spec.Workspace)
	}
	if a.spec.Scope == layout.ScopeShared {
		// A shared session's directory is outside the agent home, and a
		// tsh view writes it (tools.json).
		dirs = append(dirs, a.cfg.Layout.SessionDir(a.def.Name, a.spec.Scope, a.spec.Session))
	}
	for _, m := range a.def.Mounts {
		if m.Write {
			dirs = append(dirs, m.Src)
		}
	}
	self, root := c.Self(), c.ActorSystem().Root
	home := a.cfg.Layout.AgentHome(a.def.Name)
	a.diskOff = a.cfg.Disk.Register(diskreserve.Run{ID: a.spec.RunID, Dirs: dirs, Home: home, HomeLimit: a.def.Limits.Disk,
		Agent: a.def.Name, Procs: a.group.Procs, Stop: func(msg string) { root.Send(self, &diskLow{msg: msg}) }})
}

func (a *Actor) unwatchDisk() {
	if a.diskOff != nil {
		a.diskOff()
		a.diskOff = nil
	}
}

// onDiskLow acts until the run is concluded: the disk holding CTX_ROOT is
// below its reserve and this run's directories grow, or its agent home is
// over its `disk` limit. Its processes are
// killed at once — every moment of the cancel grace would eat the reserve
// the daemon's log appends need — and it concludes resource_exhausted
// with the watcher's message (the reserve, the free space, the fix).
func (a *Actor) onDiskLow(c actor.Context, m *diskLow) {
	if a.phase.concluded() {
		return
	}
	a.log.Warn("run stopped by the disk reserve", "why", m.msg)
	a.closeGroup(0)
	for _, p := range a.procs {
		p.Kill()
	}
	a.eng.halt()
	a.endToolCall(c, envelope.StatusError, "stopped by the daemon's disk watcher (the run's error says why)")
	a.conclude(c, ipc.ErrorFrame("", ipc.Errorf(ipc.CodeResourceExhausted, "%s", m.msg)), ipc.StatusError)
}

func (a *Actor) closeGroup(grace time.Duration) {
	g, cfg, log := a.group, a.cfg, a.log
	if g == nil {
		return
	}
	a.group = nil
	cfg.Procs.Add(1)
	go func() {
		defer cfg.Procs.Done()
		if err := g.Close(grace); err != nil {
			log.Warn("run cgroup not fully cleaned up (the next daemon start sweeps it)", "err", err)
		}
	}()
}

func (a *Actor) killAll() {
	for _, p := range a.procs {
		p.Kill()
	}
	if a.stop != nil {
		a.stop()
	}
}
