package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/seccomp"
)

// CheckSeccomp: every sandbox runs under the seccomp filter; a
// machine where it cannot be built or bwrap refuses it runs no sandbox.
// probeErr is nil when a sandbox started with the filter and the filter
// refused unshare(CLONE_NEWUSER) inside it.
func CheckSeccomp(arch string, instructions int, buildErr, probeErr error) Check {
	c := Check{Name: "seccomp"}
	switch {
	case buildErr != nil:
		c.Status, c.Message = Fail, fmt.Sprintf("no filter for %s: %v; every sandbox start fails closed", arch, buildErr)
		c.Fix = "run ctx on x86_64 or aarch64"
	case probeErr != nil:
		c.Status, c.Message = Fail, fmt.Sprintf("%s filter of %d instructions: %v", arch, instructions, probeErr)
		c.Fix = "bwrap must support --seccomp (bubblewrap ≥ 0.3) and the kernel seccomp filters (CONFIG_SECCOMP_FILTER)"
	default:
		c.Status = OK
		c.Message = fmt.Sprintf("%s filter of %d instructions on every sandbox: no TIOCSTI/TIOCLINUX, ptrace, namespaces, mount API, io_uring, keyrings, bpf, perf, userfaultfd, personality changes (a probe's unshare -U was refused)", arch, instructions)
	}
	return c
}

func (e *Env) seccompCheck(ctx context.Context, bw BwrapResult) Check {
	_, n, err := seccomp.Program()
	if err != nil {
		return CheckSeccomp(runtime.GOARCH, 0, err, nil)
	}
	arch := seccomp.Native().Name
	if bw.Path == "" {
		return CheckSeccomp(arch, n, nil, errors.New("not probed: no usable bwrap"))
	}
	if e.ProbeSeccomp == nil {
		return CheckSeccomp(arch, n, nil, errors.New("not probed"))
	}
	return CheckSeccomp(arch, n, nil, e.ProbeSeccomp(ctx, bw.Path))
}

// probeSeccomp starts a sandbox the way the runtime does (internal/proc
// adds the filter) and has it try unshare -U: it must be refused.
func probeSeccomp(ctx context.Context, bw string) error {
	script := "if [ -x /usr/bin/unshare ]; then if /usr/bin/unshare -U /bin/true 2>/dev/null; then echo NOT-REFUSED; fi; fi; echo done"
	p, err := proc.Start(proc.Options{Bwrap: bw, Spec: bwrap.Spec{System: true, Argv: []string{"/bin/sh", "-c", script}}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		<-ctx.Done()
		p.Kill()
	}()
	out, _ := io.ReadAll(io.LimitReader(p.Stdout, 4<<10))
	werr := p.Wait()
	switch {
	case string(out) == "NOT-REFUSED\ndone\n":
		return errors.New("unshare -U succeeded inside the sandbox: the filter is not in force")
	case werr != nil || string(out) != "done\n":
		return fmt.Errorf("the probe sandbox failed: %v: %s", werr, p.Stderr())
	}
	return nil
}
