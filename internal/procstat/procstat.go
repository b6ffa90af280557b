// Package procstat reads the few fields of /proc/<pid>/stat that identify a
// process across PID reuse: pid, comm, state, ppid and start time.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("procstat: malformed stat line")

// Stat is the identifying part of /proc/<pid>/stat (proc(5)).
type Stat struct {
	PID   int
	Comm  string // may hold spaces, parentheses, newlines, or be empty
	State byte   // R, S, D, Z, T, t, X, I, ...
	PPID  int
	// StartTime is field 22: clock ticks after boot at which the process
	// started. With the boot id it names a process across PID reuse.
	StartTime uint64
}

// Parse parses the contents of /proc/<pid>/stat. The comm field is taken
// as everything between the first '(' and the LAST ')': comm is chosen by
// the process and may itself contain ") (" or newlines. spec: U2
func Parse(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, fmt.Errorf("%w: no (comm)", ErrMalformed)
	}
	pidText := strings.TrimSpace(string(b[:open]))
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return Stat{}, fmt.Errorf("%w: pid %q", ErrMalformed, pidText)
	}
	// Fields after comm start at field 3 (state); starttime is field 22.
	rest := strings.Fields(string(b[closing+1:]))
	const need = 22 - 2
	if len(rest) < need {
		return Stat{}, fmt.Errorf("%w: %d fields after comm, want at least %d", ErrMalformed, len(rest), need)
	}
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: state %q", ErrMalformed, rest[0])
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil || ppid < 0 {
		return Stat{}, fmt.Errorf("%w: ppid %q", ErrMalformed, rest[1])
	}
	start, err := strconv.ParseUint(rest[22-3], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("%w: starttime %q", ErrMalformed, rest[22-3])
	}
	return Stat{PID: pid, Comm: string(b[open+1 : closing]), State: rest[0][0], PPID: ppid, StartTime: start}, nil
}

// Read reads and parses /proc/<pid>/stat. A process that does not exist
// yields an error wrapping os.ErrNotExist.
func Read(pid int) (Stat, error) {
	return ReadFrom("/proc", pid)
}

// ReadFrom is Read with another proc mount.
func ReadFrom(procRoot string, pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("procstat: pid %d: %w", pid, os.ErrNotExist)
	}
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// A pid that exits while being read gives ESRCH from read(2).
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return Stat{}, fmt.Errorf("procstat: pid %d: %w", pid, os.ErrNotExist)
		}
		return Stat{}, fmt.Errorf("procstat: pid %d: %w", pid, err)
	}
	st, err := Parse(b)
	if err != nil {
		return Stat{}, fmt.Errorf("procstat: pid %d: %w", pid, err)
	}
	if st.PID != pid {
		return Stat{}, fmt.Errorf("procstat: pid %d: stat names pid %d: %w", pid, st.PID, ErrMalformed)
	}
	return st, nil
}

// BootID returns /proc/sys/kernel/random/boot_id, which changes at every
// boot: a (boot id, pid, start time) triple names one process for ever.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("procstat: boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("procstat: boot id: empty")
	}
	return id, nil
}
