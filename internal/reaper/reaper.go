// Package reaper kills what a dead daemon's runs left running: a small
// process outside the daemon that sweeps its CTX_ROOT's run cgroups once
// the daemon is gone, whether or not another daemon ever starts.
//
// The daemon starts it (its own binary, `ctxd reap`) in a process group of
// its own, without a parent-death signal, holding the read end of a pipe
// whose write end only the daemon has. A daemon that exits, crashes or is
// SIGKILLed closes that pipe; the reaper reads EOF, kills and removes every
// run cgroup of the CTX_ROOT (cgroup.Manager.Sweep, the same code the next
// daemon runs at start) and exits. It ignores SIGINT, SIGTERM and SIGHUP,
// so a terminal's or a service manager's stop signal meant for the daemon
// does not cut the sweep short.
//
// A reaper must not sweep the runs of the daemon that follows its own: it
// holds a lock (reaper.lock in CTX_RUNTIME_DIR, handed over by the daemon)
// until its sweep is done, and a starting daemon takes that lock before its
// own sweep, so it waits for the previous reaper to finish.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/cgroup"
)

// Command is the subcommand of the daemon's binary that runs the reaper.
const Command = "reap"

// LockName is the lock file in CTX_RUNTIME_DIR.
const LockName = "reaper.lock"

// ErrLockTimeout: a previous reaper still holds the lock after the wait.
var ErrLockTimeout = errors.New("a previous daemon's reaper is still sweeping")

// Lock takes the reaper lock in dir, waiting up to wait for a previous
// reaper to finish its sweep. The caller sweeps, then hands the locked
// file to Start (which keeps the lock held by the new reaper).
func Lock(dir string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("reaper lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				err = ErrLockTimeout
			}
			return nil, fmt.Errorf("reaper lock: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Reaper is a started reaper, seen from the daemon.
type Reaper struct {
	w    *os.File
	done chan struct{}
}

// Start starts the reaper: argv is the daemon's binary and Command (use
// /proc/self/exe: the file the daemon runs, even if replaced on disk);
// root and uid name the run cgroups it sweeps; lock (from Lock, may be
// nil) is shared with the reaper, which holds it until its sweep is done.
// stderr receives its log.
func Start(argv []string, root string, uid int, lock, stderr *os.File, log *slog.Logger) (*Reaper, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	defer pr.Close()
	cmd := exec.Command(argv[0], append(argv[1:], root, strconv.Itoa(uid))...)
	cmd.Env = os.Environ()
	cmd.Dir = "/"
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{pr} // fd 3
	if lock != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, lock) // fd 4: held until the reaper exits
	}
	// Its own process group (a signal to the daemon's group misses it) and
	// no parent-death signal: it must outlive the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("reaper: %w", err)
	}
	r := &Reaper{w: pw, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := cmd.Wait(); err != nil {
			log.Warn("the reaper exited", "err", err)
		}
	}()
	return r, nil
}

// Close tells the reaper the daemon is done (as its death would) and waits
// up to wait for its sweep.
func (r *Reaper) Close(wait time.Duration) {
	if r == nil {
		return
	}
	_ = r.w.Close()
	select {
	case <-r.done:
	case <-time.After(wait):
	}
}

// Run is the reaper process (`ctxd reap ROOT UID`): it waits for EOF on
// in (fd 3), then kills and removes every run cgroup of root: no
// sandbox outlives its daemon (docs/walls.md).
func Run(args []string, in *os.File, stderr io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: ctxd %s ROOT UID", Command)
	}
	root := args[0]
	uid, err := strconv.Atoi(args[1])
	if err != nil || !filepath.IsAbs(root) {
		return fmt.Errorf("usage: ctxd %s ROOT UID", Command)
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "reaper", "pid", os.Getpid())
	_, _ = io.Copy(io.Discard, in) // until the daemon is gone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := cgroup.New(ctx, uid, root, log)
	n, err := m.Sweep()
	m.Release()
	if n > 0 {
		log.Warn("swept the run cgroups of a daemon that is gone", "groups", n)
	}
	if err != nil {
		return fmt.Errorf("reaper: sweep: %w", err)
	}
	return nil
}
