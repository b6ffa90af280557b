package cgroup

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/limits"
)

// rlimitOnly is the last resort: per-process limits set on bwrap before it
// runs anything (inherited by everything it starts). It is weak, and
// `ctx doctor` says why: RLIMIT_AS bounds each process's address space,
// not the run's total; RLIMIT_NPROC counts all processes of a uid rather
// than a run's, so it is not set (a low value would break the user's other
// sandboxes, a high one would not stop a fork bomb); nothing can sweep a
// run's processes after a crash.
type rlimitOnly struct{}

// RlimitWeakness is what rlimits-only mode cannot do (for doctor and logs).
const RlimitWeakness = "rlimits only: RLIMIT_AS caps each process's address space, not the run's total memory; " +
	"the number of tasks is not limited (RLIMIT_NPROC counts every process of the uid, not the run's); " +
	"CPU weight is only a nice value; nothing is swept after a daemon crash"

func (r *rlimitOnly) mode() Mode { return ModeRlimit }

func (r *rlimitOnly) describe() string { return RlimitWeakness }

func (r *rlimitOnly) place(_ string, l limits.Limits, pid int) error {
	lim := &unix.Rlimit{Cur: uint64(l.Memory), Max: uint64(l.Memory)}
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, lim, nil); err != nil {
		return fmt.Errorf("prlimit RLIMIT_AS on %d: %w", pid, err)
	}
	if n := Nice(l.CPUWeight); n > 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, pid, n); err != nil {
			return fmt.Errorf("setpriority %d on %d: %w", n, pid, err)
		}
	}
	return nil
}

// Nice maps a CPU weight below the default to a nice value: each nice
// step is the scheduler's 1.25× weight ratio; 100 and above stay at 0 (an
// unprivileged process cannot raise its priority).
func Nice(weight int64) int {
	if weight >= 100 || weight <= 0 {
		return 0
	}
	n := int(math.Round(math.Log(100/float64(weight)) / math.Log(1.25)))
	return min(n, 19)
}

func (r *rlimitOnly) procs(string) ([]int, error)  { return nil, nil }
func (r *rlimitOnly) kill(string) error            { return nil }
func (r *rlimitOnly) remove(string) error          { return nil }
func (r *rlimitOnly) leftovers() ([]string, error) { return nil, nil }
func (r *rlimitOnly) release()                     {}
