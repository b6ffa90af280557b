// Package limits parses agent/<name>.d/limits, the resource limits of every
// run of an agent (README "Limits"): tasks, memory and CPU weight,
// and the space the agent home may use.
package limits

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of one run: they hold for all of its agent steps and tool calls
// together (one cgroup per run).
type Limits struct {
	Tasks     int64 // processes and threads at once (pids.max, TasksMax)
	Memory    int64 // bytes (memory.max, MemoryMax); swap is not granted on top
	CPUWeight int64 // 1…10000, 100 is the default share (cpu.weight, CPUWeight)
	// Disk is the space in bytes the agent home may use; 0: no limit. No
	// kernel quota is available to the daemon for a directory (README
	// "The disk"), so the daemon's disk watcher measures the home while a
	// run is active and stops the run that puts it over.
	Disk int64
	// Calls is the tool calls one run of a model or acp-v1 agent may make
	// (`calls N`; starts and model turns are Calls+1). An sdk-envelope-v1
	// agent's run keeps the spec's fixed 8 calls / 9 starts (spec: X6): the
	// key is ignored there, and `ctx doctor` says so.
	Calls int64
}

// Default is what a definition without .d/limits (or without a key) gets.
var Default = Limits{Tasks: 512, Memory: 4 << 30, CPUWeight: 100, Calls: DefaultCalls}

// Bounds of each value; anything outside makes the file invalid.
const (
	MinTasks     = 8       // bwrap and its PID 1 need a few
	MaxTasks     = 4194304 // the kernel's PID_MAX_LIMIT
	MinMemory    = 16 << 20
	MaxMemory    = 1 << 50
	MinCPUWeight = 1
	MaxCPUWeight = 10000
	MinDisk      = 1 << 20
	MaxDisk      = 1 << 50
	// DefaultCalls is the spec's per-run bound (X6); MaxCalls keeps one
	// run's log and its agent's work bounded.
	DefaultCalls = 8
	MinCalls     = 1
	MaxCalls     = 1000
)

// Parse parses .d/limits: LF-terminated UTF-8 lines `KEY VALUE`, blank lines
// and `#` comments allowed. Keys: `tasks N`, `memory SIZE` (bytes or a K, M,
// G, T suffix, powers of 1024), `cpu-weight N`, `disk SIZE` (no limit when
// absent), `calls N` (1…1000, default 8). A key absent keeps its
// default; an unknown or repeated key, or a value that is not a plain
// number in range, is an error (the definition is invalid and runs fail
// closed).
func Parse(b []byte) (Limits, error) {
	l := Default
	if len(b) == 0 {
		return l, nil
	}
	if b[len(b)-1] != '\n' || !utf8.Valid(b) || bytes.ContainsAny(b, "\r\x00") {
		return Limits{}, errors.New("must be LF-terminated UTF-8 lines")
	}
	seen := map[string]bool{}
	for i, ln := range strings.Split(string(b[:len(b)-1]), "\n") {
		f := strings.Fields(ln)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 {
			return Limits{}, fmt.Errorf("line %d: want `KEY VALUE` (tasks N, memory SIZE, cpu-weight N, disk SIZE, calls N)", i+1)
		}
		key, val := f[0], f[1]
		if seen[key] {
			return Limits{}, fmt.Errorf("line %d: %s given twice", i+1, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "tasks":
			l.Tasks, err = number(val, MinTasks, MaxTasks)
		case "memory":
			l.Memory, err = Size(val)
			if err == nil && (l.Memory < MinMemory || l.Memory > MaxMemory) {
				err = fmt.Errorf("%s is outside %s…%s", val, FormatSize(MinMemory), FormatSize(MaxMemory))
			}
		case "cpu-weight":
			l.CPUWeight, err = number(val, MinCPUWeight, MaxCPUWeight)
		case "disk":
			l.Disk, err = Size(val)
			if err == nil && (l.Disk < MinDisk || l.Disk > MaxDisk) {
				err = fmt.Errorf("%s is outside %s…%s", val, FormatSize(MinDisk), FormatSize(MaxDisk))
			}
		case "calls":
			l.Calls, err = number(val, MinCalls, MaxCalls)
		default:
			return Limits{}, fmt.Errorf("line %d: unknown key %q (want tasks, memory, cpu-weight, disk or calls)", i+1, key)
		}
		if err != nil {
			return Limits{}, fmt.Errorf("line %d: %s: %v", i+1, key, err)
		}
	}
	return l, nil
}

// number parses a plain decimal (no sign, no leading zero) within [lo, hi].
func number(s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside %d…%d", n, lo, hi)
	}
	return n, nil
}

var units = map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}

// Size parses a byte count with an optional K, M, G or T suffix (powers of
// 1024): 4G, 256M, 1048576.
func Size(s string) (int64, error) {
	shift := uint(0)
	num := s
	if s != "" {
		if sh, ok := units[s[len(s)-1]]; ok {
			shift, num = sh, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != num || n < 0 {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with K, M, G or T)", s)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n << shift, nil
}

// FormatSize prints n with the largest suffix that divides it exactly.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Format prints l in the file's grammar (Parse(Format(l)) == l).
func (l Limits) Format() []byte {
	b := fmt.Appendf(nil, "tasks %d\nmemory %s\ncpu-weight %d\n", l.Tasks, FormatSize(l.Memory), l.CPUWeight)
	if l.Disk > 0 {
		b = fmt.Appendf(b, "disk %s\n", FormatSize(l.Disk))
	}
	if l.Calls != DefaultCalls {
		b = fmt.Appendf(b, "calls %d\n", l.Calls)
	}
	return b
}

// String is the one-line form used in logs and `ctx doctor`.
func (l Limits) String() string {
	s := fmt.Sprintf("tasks %d, memory %s, cpu-weight %d", l.Tasks, FormatSize(l.Memory), l.CPUWeight)
	if l.Disk > 0 {
		s += ", disk " + FormatSize(l.Disk) + " (agent home, watched)"
	}
	if l.Calls != DefaultCalls {
		s += fmt.Sprintf(", calls %d", l.Calls)
	}
	return s
}
