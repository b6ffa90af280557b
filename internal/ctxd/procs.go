package ctxd

import (
	"runtime"
	"strconv"
)

// daemonProcs is the daemon's GOMAXPROCS: half of the CPUs Go found for
// it (its affinity mask and its cgroup's CPU limit), at least one, unless
// GOMAXPROCS in its environment is a positive number (then ok is false and
// Go's own reading of it stands; Go ignores any other value, and so does
// this).
//
// Why fewer than Go's default: the daemon's Go code coordinates — the
// work it starts runs in other processes (bwrap, the agents, the tools,
// the MCP servers) and in the kernel (mounts, fsyncs, cgroup files). With
// a P per CPU, each message that readies a goroutine while another P is
// idle wakes a thread that spins looking for work and parks again. On the
// 2-CPU test machine one P took 15–25 % off the daemon's CPU per send in a
// burst of 100 concurrent sends and raised their rate from 0.82× to 0.92×
// the minimal launcher's (medians, docs/performance.md). Half the CPUs
// keeps a large machine's daemon parallel while leaving the other half to
// the sandboxes it starts.
func daemonProcs(found int, env string) (n int, ok bool) {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return 0, false
	}
	return max(1, found/2), true
}

// setDaemonProcs applies daemonProcs; it returns what Go had found and
// the value in force.
func setDaemonProcs(env string) (found, procs int) {
	found = runtime.GOMAXPROCS(0)
	n, ok := daemonProcs(found, env)
	if !ok {
		return found, found
	}
	runtime.GOMAXPROCS(n)
	return found, n
}
