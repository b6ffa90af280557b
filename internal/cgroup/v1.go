package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortexfs/ctx/internal/limits"
	"golang.org/x/sys/unix"
)

// v1 confines runs with cgroup v1 hierarchies, as on machines without a
// unified hierarchy: <mount>/ctx-<uid>-<hash>/run-<id> in pids (pids.max),
// memory (memory.limit_in_bytes, and memory.memsw.limit_in_bytes where swap
// accounting is on: no swap on top), cpu (cpu.shares) and freezer (the kill
// freezes the group so nothing forks between listing and SIGKILL).
type v1 struct {
	dirs   map[string]string // controller → base directory
	mounts map[string]string // controller → hierarchy mount point
	order  []string          // controllers in use, pids first
	rmdir  func(string) error

	// home: the daemon's own group in each controller, where a thread that
	// entered a run's group goes back to; read at most every homeFor, by a
	// thread about to enter (so at home: a thread whose leave failed is
	// never used again). Reading a thread's cgroup file costs ~70 µs (the
	// kernel prints its path in all thirteen hierarchies), a third of an
	// enter.
	homeMu sync.Mutex
	home   map[string]string
	homeAt time.Time
}

// homeFor: how long the daemon's own groups are taken as read. Every
// thread the daemon did not move is where the others are; a move of the
// whole daemon (by its service manager) is seen within homeFor, and a
// leave that fails looks for them again at once (v1.daemonHome). Not the
// leader's file (/proc/self/cgroup): Go runs any goroutine on the leader
// thread, and whether the leader stays out of runs' groups is the caller's
// choice (internal/proc keeps it out), not this package's to assume.
const homeFor = 2 * time.Second

var v1Controllers = []string{"pids", "memory", "cpu", "freezer"}

// newV1 creates (or reuses) the base directory in every hierarchy and
// proves a group can be created there with its limit files.
func newV1(m Mounts, base string) (*v1, error) {
	for _, c := range []string{"pids", "memory"} {
		if m.V1[c] == "" {
			return nil, fmt.Errorf("no cgroup v1 %s hierarchy mounted", c)
		}
	}
	v := &v1{dirs: map[string]string{}, mounts: m.V1, rmdir: os.Remove}
	for _, c := range v1Controllers {
		if m.V1[c] == "" {
			continue
		}
		dir := filepath.Join(m.V1[c], base)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			if c == "pids" || c == "memory" {
				return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
			}
			continue // cpu weight and the freezer are extras
		}
		v.dirs[c] = dir
		v.order = append(v.order, c)
	}
	probe := "probe-" + strconv.Itoa(os.Getpid())
	defer v.remove(probe)
	for _, c := range v.order {
		dir := filepath.Join(v.dirs[c], probe)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
	}
	for _, f := range []string{"pids/pids.max", "memory/memory.limit_in_bytes"} {
		c, file, _ := strings.Cut(f, "/")
		if _, err := os.Stat(filepath.Join(v.dirs[c], probe, file)); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
	}
	return v, nil
}

func (v *v1) mode() Mode { return ModeV1 }

func (v *v1) describe() string {
	var parts []string
	for _, c := range v.order {
		parts = append(parts, c+"="+v.dirs[c])
	}
	kill := "SIGKILL until empty"
	if v.dirs["freezer"] != "" {
		kill = "freeze, SIGKILL, thaw until empty"
	}
	return "cgroup v1 " + strings.Join(parts, " ") + " (pids.max, memory.limit_in_bytes+memsw, cpu.shares; kill: " + kill + ")"
}

func (v *v1) place(name string, l limits.Limits, pid int) error {
	return v.join(name, l, "cgroup.procs", pid)
}

// enter moves one thread (tid) of the daemon into the group, creating it
// unless made (Group.Prepare made it): what that thread forks next is
// born inside (v1 groups hold threads). leave moves it back to where it
// was, in every controller.
func (v *v1) enter(name string, l limits.Limits, tid int, made bool) (leave func() error, err error) {
	// The calling thread moves itself by writing 0: the kernel moves
	// `current` without taking the global threadgroup lock, whose write
	// side waits for an RCU grace period — moving a thread by its id
	// costs 4.1 ms an enter and leave when sandboxes start tens of
	// milliseconds apart, 0.28 ms by 0 (cgroup_procs_write_start: a
	// single thread given as 0 cannot exit or exec under the move).
	self := tid == unix.Gettid()
	var back map[string]string
	if self {
		back, err = v.homes()
	} else {
		back, err = threadGroups(tid)
	}
	if err != nil {
		return nil, err
	}
	id := strconv.Itoa(tid)
	if self {
		id = "0"
	}
	leave = func() error {
		err := v.moveTo(back, id)
		if err != nil && self {
			// The daemon may have been moved since its groups were read:
			// find them again and go there.
			if b, rerr := v.daemonHome(); rerr == nil {
				err = v.moveTo(b, id)
			}
		}
		return err
	}
	if made {
		err = v.writeAll(name, "tasks", id)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return leave, err
		}
		// Gone since it was made (the base released): made again below.
	}
	return leave, v.joinAs(name, l, "tasks", id)
}

// moveTo writes id into the tasks file of back's group in each controller.
func (v *v1) moveTo(back map[string]string, id string) error {
	var errs []error
	for _, c := range v.order {
		where, ok := back[c]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: the thread's own cgroup is unknown", c))
			continue
		}
		if err := writeFile(filepath.Join(v.mounts[c], where, "tasks"), id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

// homes returns the daemon's own groups (v1.home), read from the calling
// thread — which must be at home — when older than homeFor.
func (v *v1) homes() (map[string]string, error) {
	v.homeMu.Lock()
	defer v.homeMu.Unlock()
	if v.home != nil && time.Since(v.homeAt) < homeFor {
		return v.home, nil
	}
	b, err := readFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	_, v.home = OwnCgroups(b)
	v.homeAt = time.Now()
	return v.home, nil
}

// daemonHome finds the daemon's own groups for a thread that is inside a
// run's group: those of the first of its threads (the leader first) in none
// of this manager's groups, kept as v1.home.
func (v *v1) daemonHome() (map[string]string, error) {
	tids := []string{strconv.Itoa(os.Getpid())}
	if ents, err := os.ReadDir("/proc/self/task"); err == nil {
		for _, e := range ents {
			tids = append(tids, e.Name())
		}
	}
	for _, tid := range tids {
		b, err := readFile("/proc/self/task/" + tid + "/cgroup")
		if err != nil {
			continue
		}
		_, groups := OwnCgroups(b)
		if v.inside(groups) {
			continue
		}
		v.homeMu.Lock()
		v.home, v.homeAt = groups, time.Now()
		v.homeMu.Unlock()
		return groups, nil
	}
	return nil, errors.New("every thread of the daemon is inside a run's cgroup")
}

// inside reports whether groups lie in this manager's base in any
// controller in use (or lack one).
func (v *v1) inside(groups map[string]string) bool {
	for _, c := range v.order {
		where, ok := groups[c]
		if !ok {
			return true
		}
		base := strings.TrimPrefix(v.dirs[c], v.mounts[c])
		if where == base || strings.HasPrefix(where, base+"/") {
			return true
		}
	}
	return false
}

// threadGroups reads the groups of one thread of the daemon.
func threadGroups(tid int) (map[string]string, error) {
	b, err := readFile("/proc/self/task/" + strconv.Itoa(tid) + "/cgroup")
	if err != nil {
		return nil, err
	}
	_, groups := OwnCgroups(b)
	return groups, nil
}

func (v *v1) join(name string, l limits.Limits, file string, id int) error {
	return v.joinAs(name, l, file, strconv.Itoa(id))
}

// joinAs is join with the id as written ("0": the writing thread).
func (v *v1) joinAs(name string, l limits.Limits, file, id string) error {
	if _, err := v.create(name, l); err != nil {
		return err
	}
	return v.writeAll(name, file, id)
}

// writeAll writes id into file of the group in every controller.
func (v *v1) writeAll(name, file, id string) error {
	for _, c := range v.order {
		if err := writeFile(filepath.Join(v.dirs[c], name, file), id); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	return nil
}

// create makes the group in every controller with its limits; a group
// that exists already is left as it is (made ahead by Group.Prepare), and
// existed says so.
func (v *v1) create(name string, l limits.Limits) (existed bool, err error) {
	for _, c := range v.order {
		dir := filepath.Join(v.dirs[c], name)
		err = os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrNotExist) { // the base was released: make it again
			if err = os.Mkdir(v.dirs[c], 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				err = os.Mkdir(dir, 0o755)
			}
		}
		if err == nil {
			if err = configureV1(c, dir, l); err != nil {
				_ = v.rmdir(dir)
				return false, fmt.Errorf("%s: %w", c, err)
			}
		} else if errors.Is(err, fs.ErrExist) {
			existed = true
		} else {
			return false, fmt.Errorf("%s: %w", c, err)
		}
	}
	return existed, nil
}

// configureV1 writes a new group's limits (before any process joins).
func configureV1(c, dir string, l limits.Limits) error {
	switch c {
	case "pids":
		return writeFile(filepath.Join(dir, "pids.max"), strconv.FormatInt(l.Tasks, 10))
	case "memory":
		if err := writeFile(filepath.Join(dir, "memory.limit_in_bytes"), strconv.FormatInt(l.Memory, 10)); err != nil {
			return err
		}
		if sw := filepath.Join(dir, "memory.memsw.limit_in_bytes"); exists(sw) {
			return writeFile(sw, strconv.FormatInt(l.Memory, 10)) // memory+swap = memory: no swap on top
		}
	case "cpu":
		// cgroup v1 shares: 1024 is the default, as weight 100 is in v2 (systemd's mapping).
		return writeFile(filepath.Join(dir, "cpu.shares"), strconv.FormatInt(max(2, l.CPUWeight*1024/100), 10))
	}
	return nil
}

func (v *v1) procs(name string) ([]int, error) {
	b, err := readFile(filepath.Join(v.dirs["pids"], name, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return parsePids(b), err
}

func (v *v1) kill(name string) error {
	list := func() ([]int, error) { return v.procs(name) }
	fz := v.dirs["freezer"]
	if fz == "" {
		return killLoop(list, nil, nil, 10*time.Second)
	}
	state := filepath.Join(fz, name, "freezer.state")
	freeze := func() error {
		if err := writeFile(state, "FROZEN"); err != nil {
			return err
		}
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if b, err := readFile(state); err == nil && strings.TrimSpace(string(b)) == "FROZEN" {
				return nil
			}
		}
		return nil // still FREEZING (a task in uninterruptible sleep): kill what is listed anyway
	}
	thaw := func() error { return writeFile(state, "THAWED") }
	return killLoop(list, freeze, thaw, 10*time.Second)
}

func (v *v1) remove(name string) error {
	var errs []error
	for _, c := range slices.Backward(v.order) {
		if err := rmdirRetry(v.rmdir, filepath.Join(v.dirs[c], name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (v *v1) release() {
	for _, c := range v.order {
		_ = v.rmdir(v.dirs[c])
	}
}

func (v *v1) leftovers() ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, c := range v.order {
		ents, err := os.ReadDir(v.dirs[c])
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "run-") && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	return out, nil
}

// writeFile writes a cgroup control file: it must exist (cgroupfs files
// are never created by writing), and the write is one call. By the bare
// syscalls: os.OpenFile would register the descriptor with Go's poller
// (cgroupfs files can be polled), an epoll_ctl and two fcntls more, and
// its removal at the close — a quarter of a thread's enter and leave.
func writeFile(path, v string) error {
	fd, err := openRetry(path, unix.O_WRONLY|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	for {
		_, err = unix.Write(fd, []byte(v))
		if err != unix.EINTR {
			break
		}
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readFile reads a cgroupfs or procfs file whole, by the bare syscalls
// (writeFile says why).
func readFile(path string) ([]byte, error) {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// openRetry is open(2), again after EINTR.
func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// rmdirRetry removes a group directory; the kernel may report it busy for
// a moment after its last task was reaped.
func rmdirRetry(rmdir func(string) error, dir string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := rmdir(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
