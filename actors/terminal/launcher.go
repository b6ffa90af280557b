package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cortexfs/ctx/internal/launchroot"
	"github.com/cortexfs/ctx/internal/layout"
)

// Launcher starts and stops the process of a terminal (runtime.md T1, L2):
// the systemd launcher (a transient user unit) or the built-in one (the
// daemon starts and reaps the process itself). The implementations live in
// package supervisor; the interface is declared here, where it is used.
type Launcher interface {
	// Name is recorded in receipts: "systemd" or "builtin".
	Name() string
	// Start launches s and returns its launch receipt (not yet written).
	Start(ctx context.Context, s LaunchSpec) (Receipt, error)
	// Adopt checks that r still names a live process of this launcher (pid
	// and start time; under systemd also the unit's invocation id) and
	// takes it over after a daemon restart. It returns an error wrapping
	// ErrGone when the process is no longer there.
	Adopt(ctx context.Context, r Receipt) error
	// Wait blocks until the process of r has ended (or ctx is done).
	Wait(ctx context.Context, r Receipt) (Exit, error)
	// Stop ends the process of r: a hang-up first, then SIGKILL after grace.
	// It returns once the stop has been requested; Wait reports the end.
	Stop(ctx context.Context, r Receipt, grace time.Duration) error
}

// ErrGone means a receipt's process no longer exists.
var ErrGone = errors.New("terminal process gone")

// ErrNotRunning means a stop or watch found no live terminal.
var ErrNotRunning = errors.New("no live terminal")

// LaunchSpec is what a launcher starts.
type LaunchSpec struct {
	// Command returns the argv to run (argv[0] absolute), made to wait as
	// hold says until the launcher has registered the launch root (U2):
	// the built-in launcher passes a descriptor of a pipe (Hold.FD), the
	// systemd launcher the FIFO HoldFIFO (Hold.FIFO). Either way nothing of
	// the sandbox runs before the registration.
	Command func(hold Hold) ([]string, error)
	// Env is the environment of the process the launcher starts (K=V):
	// ctxterm passes it on to the sandbox through a descriptor, so none of
	// it is on any command line (LaunchEnv). spec: B3
	Env []string
	// HoldFIFO is where the systemd launcher creates the FIFO it releases
	// the unit through (in the runtime directory, never in a sandbox's view).
	HoldFIFO string
	// Unit is the unit name (systemd) and the log name (built-in).
	Unit string
	// Log is the file the built-in launcher sends the process's output to.
	Log string
	// Ident is the launch root's capability identity (interfaces.md
	// "Control socket": a terminal's run is its resource id).
	Ident launchroot.Identity
	// Receipt carries the fields the launcher does not decide (agent,
	// session, generation, socket, terminal id, workspace); Start fills in
	// launcher, unit, invocation, pid, start time and boot id.
	Receipt Receipt
}

// Exit is how a terminal's process ended, as far as its launcher knows.
type Exit struct {
	// Status is the exit status (128+N for signal N); valid when Known.
	Status int
	Known  bool
	// How the end was observed ("exited", "killed by signal 9", "gone").
	Reason string
	At     time.Time
}

// UnitName is the transient unit of one terminal generation:
// ctxterm-<root>-<agent>-<session>-g<generation>.service, where <root> is a
// short hash of CTX_ROOT so two installations of one user never collide.
// Agent and session names only hold [A-Za-z0-9._-], all valid in unit names.
func UnitName(l layout.Layout, agent, session string, generation int) string {
	h := sha256.Sum256([]byte(l.Root))
	return fmt.Sprintf("ctxterm-%s-%s-%s-g%d.service", hex.EncodeToString(h[:4]), agent, session, generation)
}
