// Package diskreserve keeps a reserve of free space on the filesystem
// holding CTX_ROOT, where the daemon appends every session's log: while
// runs are active it checks the free space every Interval, and below the
// reserve it stops the runs whose writable directories on that filesystem
// keep growing, so the daemon and the other agents go on (README "The
// disk").
//
// Which run is "the writing run": every run can write there (its agent
// home is under CTX_ROOT), so being able to write is no evidence. The
// watcher attributes growth instead: once free space is below twice the
// reserve it measures, for each active run, the space used by its
// writable directories on that filesystem (the agent home, and the
// workspace and rw .d/mount sources when they are on it) and stops, once
// below the reserve, each run whose directories grew by more than Slack
// since then. A run that only reads, or only appends its frames, goes on.
// Runs sharing a directory that grew (two sessions of one agent) are
// stopped together: which of them wrote cannot be told apart.
package diskreserve

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/limits"
)

// Tunables.
const (
	// Interval between two checks while runs are active (a tenth of it
	// while free space is below four times the reserve).
	Interval = 500 * time.Millisecond
	// DefaultReserve is kept free unless CTX_DISK_RESERVE says otherwise,
	// or DefaultShare of the filesystem when that is smaller (a small
	// filesystem is not declared full from its start).
	DefaultReserve = 256 << 20
	DefaultShare   = 20 // 1/20 = 5 %
	// Slack: growth a run's directories may show while space is low
	// without being stopped (its own frames, tsh's tools.json).
	Slack = 1 << 20
	// MaxMeasure bounds one measurement of one run's directories (entries
	// looked at). A measurement cut short counts as growing while space is
	// below the reserve: what was not measured cannot be cleared.
	MaxMeasure = 200_000
)

// Options configure a Watcher.
type Options struct {
	// Root is CTX_ROOT: its filesystem is the one watched.
	Root string
	// Reserve in bytes; negative: the default; 0: no reserve (never stops
	// a run).
	Reserve int64
	// Interval between checks; 0: Interval.
	Interval time.Duration
	Log      *slog.Logger
	// Statfs reports the free (available to the daemon) and total bytes
	// of the filesystem holding a path; nil: statfs(2). For tests.
	Statfs func(path string) (free, total int64, err error)
}

// Watcher is the daemon's one disk watcher. Its ticker goroutine runs only
// while runs are registered, and stops with Close.
type Watcher struct {
	o    Options
	mu   sync.Mutex
	runs map[*entry]struct{}
	quit chan struct{} // the running loop's; nil when none runs
	done chan struct{} // closed when the last loop started has returned
	wg   sync.WaitGroup
	shut bool
}

// Run is what the watcher knows of one active run.
type Run struct {
	ID string
	// Dirs are its writable host directories (the agent home, the
	// workspace, rw .d/mount sources); those on CTX_ROOT's filesystem
	// count for the reserve.
	Dirs []string
	// Home is the agent home and HomeLimit the space it may use (`disk`
	// in .d/limits; 0: no limit). Agent names the definition in messages.
	Home      string
	HomeLimit int64
	Agent     string
	// Procs lists the run's processes (nil: none known). Files they hold
	// open after deleting them use space no directory shows: counted.
	Procs func() []int
	// Stop is called once, from the watcher's goroutine (it must not
	// block), with the message that concludes the run.
	Stop func(msg string)
}

type entry struct {
	Run
	// Only the loop touches these (one loop runs at a time).
	base    int64
	hasBase bool
	stopped bool
}

// New returns a watcher; nothing runs until a run registers.
func New(o Options) *Watcher {
	if o.Interval <= 0 {
		o.Interval = Interval
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Statfs == nil {
		o.Statfs = statfs
	}
	return &Watcher{o: o, runs: map[*entry]struct{}{}}
}

// Reserve is the reserve kept on a filesystem of total bytes.
func (w *Watcher) Reserve(total int64) int64 {
	if w.o.Reserve >= 0 {
		return w.o.Reserve
	}
	return min(int64(DefaultReserve), total/DefaultShare)
}

// Register watches r until the returned function unregisters it. A nil
// Watcher watches nothing.
func (w *Watcher) Register(r Run) (unregister func()) {
	if w == nil {
		return func() {}
	}
	e := &entry{Run: r}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shut {
		return func() {}
	}
	w.runs[e] = struct{}{}
	if w.quit == nil {
		// The ticker lives only while runs are active; a new loop waits
		// for the previous one so that one loop at a time touches entries.
		q, d, prev := make(chan struct{}), make(chan struct{}), w.done
		w.quit, w.done = q, d
		w.wg.Add(1)
		go w.loop(q, prev, d)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(w.runs, e)
			if len(w.runs) == 0 && w.quit != nil {
				close(w.quit)
				w.quit = nil
			}
		})
	}
}

// Close stops the watcher's goroutine and waits for it.
func (w *Watcher) Close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.shut = true
	if w.quit != nil {
		close(w.quit)
		w.quit = nil
	}
	w.mu.Unlock()
	w.wg.Wait()
}

func (w *Watcher) loop(quit, prev, done chan struct{}) {
	defer w.wg.Done()
	defer close(done)
	if prev != nil {
		select {
		case <-prev:
		case <-quit:
			return
		}
	}
	t := time.NewTimer(w.o.Interval)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		near, err := w.check()
		// Near the reserve the free space is read ten times as often: a
		// fast writer passes less of it between two checks.
		if near {
			t.Reset(w.o.Interval / 10)
		} else {
			t.Reset(w.o.Interval)
		}
		if err != nil {
			if !failed {
				w.o.Log.Warn("disk reserve: cannot read the free space of CTX_ROOT's filesystem", "root", w.o.Root, "err", err)
			}
			failed = true
		} else {
			failed = false
		}
	}
}

// check is one tick: the free space, and below twice the reserve the
// runs' growth; near says free space is below four times the reserve. It
// runs on the loop's goroutine only.
func (w *Watcher) check() (near bool, err error) {
	free, total, err := w.o.Statfs(w.o.Root)
	if err != nil {
		return false, err
	}
	reserve := w.Reserve(total)
	w.mu.Lock()
	list := make([]*entry, 0, len(w.runs))
	for e := range w.runs {
		list = append(list, e)
	}
	w.mu.Unlock()
	near = reserve > 0 && free < 4*reserve
	dev, err := device(w.o.Root)
	if err != nil {
		return near, err
	}
	for _, e := range list {
		if e.HomeLimit <= 0 || e.stopped {
			continue
		}
		// The home's own limit, whatever the free space: measured at
		// every tick while a run of the agent is active.
		used, cut := measure([]string{e.Home}, 0)
		used += openDeleted(e.Procs, homeDev(e.Home))
		if used > e.HomeLimit || cut {
			e.stopped = true
			w.o.Log.Warn("agent home over its disk limit: stopping the run", "run", e.ID, "home", e.Home, "used", used, "limit", e.HomeLimit, "measure_cut_short", cut)
			e.Stop(homeMessage(e, used, cut))
		}
	}
	if reserve <= 0 || free >= 2*reserve {
		for _, e := range list {
			e.hasBase = false
		}
		return near, nil
	}
	for _, e := range list {
		if e.stopped {
			continue
		}
		used, cut := measure(e.Dirs, dev)
		used += openDeleted(e.Procs, dev)
		if !e.hasBase {
			e.base, e.hasBase = used, true
		}
		grew := used - e.base
		if free >= reserve || (grew <= Slack && !cut) {
			continue
		}
		e.stopped = true
		msg := w.message(e, free, reserve, grew, cut)
		w.o.Log.Warn("disk reserve crossed: stopping a run whose directories grow", "run", e.ID, "free", free,
			"reserve", reserve, "grew", grew, "measure_cut_short", cut)
		e.Stop(msg)
	}
	return near, nil
}

func (w *Watcher) message(e *entry, free, reserve, grew int64, cut bool) string {
	how := "grew by " + human(grew) + " while space was low"
	if cut {
		how = "could not be measured in full (an unreadable directory, or more than " + fmt.Sprint(MaxMeasure) + " entries) while space was low"
	}
	return fmt.Sprintf("stopped: the filesystem holding CTX_ROOT (%s) has %s free, below the disk reserve of %s "+
		"kept for the daemon's logs and the other agents; this run's writable directories there (%s) %s. "+
		"Free space there (remove what the run wrote, e.g. in the agent home), or give the daemon a smaller "+
		"CTX_DISK_RESERVE (0 turns the reserve off)",
		w.o.Root, human(free), human(reserve), strings.Join(e.Dirs, ", "), how)
}

func homeMessage(e *entry, used int64, cut bool) string {
	how := "uses " + human(used)
	if cut {
		how = "could not be measured in full (an unreadable directory, or more than " + fmt.Sprint(MaxMeasure) + " entries)"
	}
	return fmt.Sprintf("stopped: the agent home %s %s, over its disk limit of %s (`disk` in agent/%s.d/limits; "+
		"the daemon measures the home every %s while a run is active, the kernel does not enforce it). "+
		"Remove files from the agent home, or raise the limit",
		e.Home, how, human(e.HomeLimit), e.Agent, Interval)
}

// human prints a byte count in MiB (or KiB when smaller) with one decimal.
func human(n int64) string {
	if n < 1<<20 && n > -(1<<20) {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func statfs(path string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, nil
}

func device(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Dev, nil
}

// measure sums the space allocated to everything below dirs that is on
// device dev (a directory elsewhere, or a mount below one, is not
// counted; dev 0: each directory's own device), never following a
// symlink; cut is true when MaxMeasure entries did not suffice or a
// directory could not be read.
func measure(dirs []string, dev uint64) (used int64, cut bool) {
	budget := MaxMeasure
	for _, d := range dirs {
		var st unix.Stat_t
		if unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		want := dev
		if want == 0 {
			want = st.Dev
		}
		if st.Dev != want {
			continue
		}
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		used += st.Blocks * 512
		n, c := walk(fd, want, &budget)
		used += n
		if c {
			return used, true
		}
	}
	return used, false
}

func homeDev(home string) uint64 {
	var st unix.Stat_t
	if unix.Stat(home, &st) != nil {
		return 0
	}
	return st.Dev
}

// openDeleted sums the space of regular files on device dev that the
// processes hold open after they were deleted (the space is used, but no
// directory shows it), each file once.
func openDeleted(procs func() []int, dev uint64) int64 {
	if procs == nil || dev == 0 {
		return 0
	}
	type key struct{ dev, ino uint64 }
	seen := map[key]bool{}
	var used int64
	for _, pid := range procs() {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			target, err := os.Readlink(dir + "/" + n)
			if err != nil || !strings.HasSuffix(target, " (deleted)") {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(dir+"/"+n, &st) != nil || st.Dev != dev || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			if k := (key{st.Dev, st.Ino}); !seen[k] {
				seen[k] = true
				used += st.Blocks * 512
			}
		}
	}
	return used
}

// walk sums below the open directory fd (which it closes).
func walk(fd int, dev uint64, budget *int) (used int64, cut bool) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if *budget--; *budget < 0 {
				return used, true
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Dev != dev {
				continue
			}
			used += st.Blocks * 512
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
				switch {
				case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
					continue // gone or replaced since it was listed
				case err != nil:
					// Unreadable (a run can chmod a directory it writes
					// into): not measured, so not cleared.
					return used, true
				}
				u, c := walk(sub, dev, budget)
				used += u
				if c {
					return used, true
				}
			}
		}
		if err != nil || len(names) == 0 {
			return used, false
		}
	}
}

// ParseReserve parses CTX_DISK_RESERVE: a size as .d/limits writes one
// (bytes, or a number with K, M, G or T, powers of 1024); 0 turns the
// reserve off.
func ParseReserve(s string) (int64, error) {
	n, err := limits.Size(s)
	if err != nil {
		return 0, errors.New("want a size such as 256M (0 turns the reserve off)")
	}
	return n, nil
}
