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
	"time"

	"github.com/cortexfs/ctx/internal/limits"
)

// v2 confines runs in a writable cgroup v2 subtree:
// <parent>/ctx-<uid>-<hash>/run-<id> with pids.max, memory.max,
// memory.swap.max 0 and cpu.weight; the kill is cgroup.kill (or freeze and
// SIGKILL on kernels before 5.14).
type v2 struct {
	base  string
	ctrls []string // enabled below base
	mkdir func(string) error
	rmdir func(string) error
}

// newV2 looks for a parent it may write, best first — the parent of the
// daemon's own cgroup (a delegated subtree), then the hierarchy's root —
// enables pids and memory (and cpu where offered) below it and below the
// base, and proves a group gets its limit files.
func newV2(mount, own, baseName string) (*v2, error) {
	var parents []string
	if own != "" && own != "/" {
		parents = append(parents, filepath.Join(mount, filepath.Dir(own)))
	}
	parents = append(parents, mount)
	var errs []error
	for _, p := range slices.Compact(parents) {
		v, err := tryV2(p, filepath.Join(p, baseName))
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p, err))
	}
	return nil, errors.Join(errs...)
}

func tryV2(parent, base string) (*v2, error) {
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(b))
	want := []string{"pids", "memory"}
	for _, c := range want {
		if !slices.Contains(have, c) {
			return nil, fmt.Errorf("controller %s not available (cgroup.controllers: %q)", c, strings.TrimSpace(string(b)))
		}
	}
	if slices.Contains(have, "cpu") {
		want = append(want, "cpu")
	}
	if err := enable(parent, want); err != nil {
		return nil, err
	}
	v := &v2{base: base, ctrls: want, mkdir: func(d string) error { return os.Mkdir(d, 0o755) }, rmdir: os.Remove}
	if err := v.mkdir(base); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := enable(base, want); err != nil {
		return nil, err
	}
	probe := filepath.Join(base, "probe-"+strconv.Itoa(os.Getpid()))
	if err := v.mkdir(probe); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	defer rmdirRetry(v.rmdir, probe)
	for _, f := range []string{"pids.max", "memory.max", "cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(probe, f)); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// enable turns controllers on for dir's children (cgroup.subtree_control).
func enable(dir string, ctrls []string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	on := strings.Fields(string(b))
	var add []string
	for _, c := range ctrls {
		if !slices.Contains(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return writeFile(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(add, " "))
}

func (v *v2) mode() Mode { return ModeV2 }

func (v *v2) describe() string {
	return "cgroup v2 " + v.base + " (pids.max, memory.max, memory.swap.max 0, cpu.weight; kill: cgroup.kill)"
}

func (v *v2) place(name string, l limits.Limits, pid int) error {
	if _, err := v.create(name, l); err != nil {
		return err
	}
	return writeFile(filepath.Join(v.base, name, "cgroup.procs"), strconv.Itoa(pid))
}

// create makes the group with its limits; one that exists already is left
// as it is (made ahead by Group.Prepare), and existed says so.
func (v *v2) create(name string, l limits.Limits) (existed bool, err error) {
	dir := filepath.Join(v.base, name)
	err = v.mkdir(dir)
	if errors.Is(err, fs.ErrNotExist) { // the base was released: make it again
		if err = v.mkdir(v.base); err == nil || errors.Is(err, fs.ErrExist) {
			if err = enable(v.base, v.ctrls); err == nil {
				err = v.mkdir(dir)
			}
		}
	}
	switch {
	case err == nil:
		if err := configureV2(dir, l); err != nil {
			_ = v.rmdir(dir)
			return false, err
		}
	case errors.Is(err, fs.ErrExist):
		return true, nil
	default:
		return false, err
	}
	return false, nil
}

// configureV2 writes a new group's limits (before any process joins).
func configureV2(dir string, l limits.Limits) error {
	if err := writeFile(filepath.Join(dir, "pids.max"), strconv.FormatInt(l.Tasks, 10)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(l.Memory, 10)); err != nil {
		return err
	}
	if sw := filepath.Join(dir, "memory.swap.max"); exists(sw) {
		if err := writeFile(sw, "0"); err != nil {
			return err
		}
	}
	if w := filepath.Join(dir, "cpu.weight"); exists(w) {
		return writeFile(w, strconv.FormatInt(l.CPUWeight, 10))
	}
	return nil
}

func (v *v2) procs(name string) ([]int, error) {
	b, err := readFile(filepath.Join(v.base, name, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return parsePids(b), err
}

func (v *v2) kill(name string) error {
	dir := filepath.Join(v.base, name)
	if !exists(dir) {
		return nil
	}
	list := func() ([]int, error) { return v.procs(name) }
	if k := filepath.Join(dir, "cgroup.kill"); exists(k) {
		if err := writeFile(k, "1"); err == nil {
			return killLoop(list, nil, nil, 10*time.Second) // cgroup.kill is asynchronous: wait (and mop up)
		}
	}
	freeze := func() error { return writeFile(filepath.Join(dir, "cgroup.freeze"), "1") }
	thaw := func() error { return writeFile(filepath.Join(dir, "cgroup.freeze"), "0") }
	return killLoop(list, freeze, thaw, 10*time.Second)
}

func (v *v2) remove(name string) error { return rmdirRetry(v.rmdir, filepath.Join(v.base, name)) }

func (v *v2) release() { _ = v.rmdir(v.base) }

func (v *v2) leftovers() ([]string, error) {
	ents, err := os.ReadDir(v.base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "run-") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
