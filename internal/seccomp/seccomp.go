// Package seccomp builds the seccomp BPF filter every sandboxed process
// runs under (bwrap --seccomp FD): the kernel interfaces an agent
// or tool could use to leave or widen its sandbox — terminal injection,
// ptrace, new namespaces, the mount API, io_uring, keyrings, BPF, perf,
// userfaultfd, module and kexec loading, personality changes — fail with
// EPERM (clone3 with ENOSYS, so libcs fall back to clone, whose flags the
// filter can read). Everything else is allowed.
//
// The program is generated here from a per-architecture table (x86_64 and
// aarch64) with a small assembler: no library we found compares only the
// low 32 bits of an argument under a mask, which TIOCSTI (the kernel
// ignores an ioctl request's high bits) and the clone flags need.
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Arch is one architecture's audit number and syscall numbers.
type Arch struct {
	Name  string
	Audit uint32
	// Foreign is another ABI the same kernel accepts from this
	// architecture's processes (i386 on x86_64): refused whole.
	Foreign []uint32
	// X32 marks x86_64, whose x32 ABI sets bit 30 of the syscall number.
	X32 bool
	Nr  map[string]uint32
}

// Denied lists the syscalls refused outright (EPERM) by name.
var Denied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "open_tree_attr", "mount_setattr", "setns",
	"keyctl", "add_key", "request_key", "perf_event_open", "bpf", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
}

// Audit architecture numbers (linux/audit.h).
const (
	AuditX86_64  = 0xC000003E
	AuditI386    = 0x40000003
	AuditAArch64 = 0xC00000B7
	AuditARM     = 0x40000028
)

// Request numbers and flags the filter inspects.
const (
	TIOCSTI   = 0x5412
	TIOCLINUX = 0x541C
	// NamespaceFlags are every CLONE_NEW* flag (and CLONE_NEWTIME).
	NamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | 0x80 /* CLONE_NEWTIME */
	personalityQuery = 0xffffffff
)

// X86_64 and AArch64 are the supported architectures (numbers from the
// kernel's syscall tables; tests compare them with x/sys/unix on each).
var (
	X86_64 = Arch{Name: "x86_64", Audit: AuditX86_64, Foreign: []uint32{AuditI386}, X32: true, Nr: map[string]uint32{
		"ioctl": 16, "clone": 56, "clone3": 435, "unshare": 272, "personality": 135,
		"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "open_tree_attr": 467,
		"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
		"mount": 165, "umount2": 166, "pivot_root": 155, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
		"move_mount": 429, "open_tree": 428, "mount_setattr": 442, "setns": 308,
		"keyctl": 250, "add_key": 248, "request_key": 249, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
		"kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
	}}
	AArch64 = Arch{Name: "aarch64", Audit: AuditAArch64, Foreign: []uint32{AuditARM}, Nr: map[string]uint32{
		"ioctl": 29, "clone": 220, "clone3": 435, "unshare": 97, "personality": 92,
		"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "open_tree_attr": 467,
		"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
		"mount": 40, "umount2": 39, "pivot_root": 41, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
		"move_mount": 429, "open_tree": 428, "mount_setattr": 442, "setns": 268,
		"keyctl": 219, "add_key": 217, "request_key": 218, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
		"kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
	}}
)

// Native is the architecture this binary runs on (nil: unsupported).
func Native() *Arch {
	switch runtime.GOARCH {
	case "amd64":
		return &X86_64
	case "arm64":
		return &AArch64
	}
	return nil
}

// ErrUnsupported: no filter exists for this architecture; sandboxes fail
// closed rather than run without one.
var ErrUnsupported = errors.New("seccomp: no filter for this architecture")

var (
	once    sync.Once
	program []byte
	count   int
	progErr error
)

// Program returns the native filter as bwrap reads it (struct sock_filter
// array) and its instruction count; built once per process.
func Program() ([]byte, int, error) {
	once.Do(func() {
		a := Native()
		if a == nil {
			progErr = fmt.Errorf("%s: %w", runtime.GOARCH, ErrUnsupported)
			return
		}
		var ins []unix.SockFilter
		if ins, progErr = a.Build(); progErr == nil {
			program, count = Encode(ins), len(ins)
		}
	})
	return program, count, progErr
}

// File returns a new descriptor positioned at 0 holding the program, for
// one bwrap (which reads it to EOF): a sealed memfd, closed by the caller
// after the start.
func File() (*os.File, error) {
	b, _, err := Program()
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("ctx-seccomp", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("seccomp: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "ctx-seccomp")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp: write filter: %w", err)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp: rewind: %w", err)
	}
	return f, nil
}

// Encode lays instructions out as the kernel's struct sock_filter array.
func Encode(ins []unix.SockFilter) []byte {
	b := make([]byte, 0, 8*len(ins))
	for _, i := range ins {
		b = binary.NativeEndian.AppendUint16(b, i.Code)
		b = append(b, i.Jt, i.Jf)
		b = binary.NativeEndian.AppendUint32(b, i.K)
	}
	return b
}

// Return values (linux/seccomp.h).
const (
	RetAllow       = 0x7fff0000
	RetErrno       = 0x00050000
	RetKillProcess = 0x80000000
)

// seccomp_data offsets: nr, arch, then args[i] (64-bit each; both supported
// architectures are little-endian, so the low word comes first).
const (
	offNr   = 0
	offArch = 4
)

func offArgLow(i int) uint32 { return 16 + 8*uint32(i) }

// Build assembles the filter for a.
func (a Arch) Build() ([]unix.SockFilter, error) {
	var p asm
	p.ld(offArch)
	for _, f := range a.Foreign {
		p.jeq(f, "kill", "") // i386 int 0x80 on x86_64 would skip every check below
	}
	p.jeq(a.Audit, "", "kill") // an unknown ABI: nothing it calls is understood
	p.ld(offNr)
	if a.X32 {
		p.jge(0x40000000, "eperm", "") // the x32 ABI: refused whole
	}
	nr := func(name string) (uint32, error) {
		n, ok := a.Nr[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: %s: no number for %s", a.Name, name)
		}
		return n, nil
	}
	for _, name := range Denied {
		n, err := nr(name)
		if err != nil {
			return nil, err
		}
		p.jeq(n, "eperm", "")
	}
	for _, c := range []struct{ name, label string }{
		{"clone3", "enosys"}, {"ioctl", "ioctl"}, {"clone", "nsflags"}, {"unshare", "nsflags"}, {"personality", "personality"},
	} {
		n, err := nr(c.name)
		if err != nil {
			return nil, err
		}
		p.jeq(n, c.label, "")
	}
	p.ret(RetAllow)

	p.label("ioctl") // compare the request's low 32 bits only
	p.ld(offArgLow(1))
	p.jeq(TIOCSTI, "eperm", "")
	p.jeq(TIOCLINUX, "eperm", "")
	p.ret(RetAllow)

	p.label("nsflags") // clone(flags, …) and unshare(flags) on both arches
	p.ld(offArgLow(0))
	p.jset(NamespaceFlags, "eperm", "")
	p.ret(RetAllow)

	p.label("personality")
	p.ld(offArgLow(0))
	p.jeq(0, "allow", "")
	p.jeq(personalityQuery, "allow", "eperm")

	p.label("allow")
	p.ret(RetAllow)
	p.label("eperm")
	p.ret(RetErrno | uint32(unix.EPERM))
	p.label("enosys")
	p.ret(RetErrno | uint32(unix.ENOSYS))
	p.label("kill")
	p.ret(RetKillProcess)
	return p.link()
}

// asm is a tiny BPF assembler with forward labels.
type asm struct {
	ins    []unix.SockFilter
	fix    []fixup
	labels map[string]int
}

type fixup struct {
	at     int
	jt, jf string
}

func (p *asm) ld(off uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

func (p *asm) ret(k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

func (p *asm) jump(op uint16, k uint32, jt, jf string) {
	p.fix = append(p.fix, fixup{at: len(p.ins), jt: jt, jf: jf})
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (p *asm) jeq(k uint32, jt, jf string)  { p.jump(unix.BPF_JEQ, k, jt, jf) }
func (p *asm) jge(k uint32, jt, jf string)  { p.jump(unix.BPF_JGE, k, jt, jf) }
func (p *asm) jset(k uint32, jt, jf string) { p.jump(unix.BPF_JSET, k, jt, jf) }

func (p *asm) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.ins)
}

// link resolves labels ("" = the next instruction) into relative offsets.
func (p *asm) link() ([]unix.SockFilter, error) {
	off := func(from int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := p.labels[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: undefined label %q", name)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp: jump to %q out of range (%d)", name, d)
		}
		return uint8(d), nil
	}
	for _, f := range p.fix {
		var err error
		if p.ins[f.at].Jt, err = off(f.at, f.jt); err != nil {
			return nil, err
		}
		if p.ins[f.at].Jf, err = off(f.at, f.jf); err != nil {
			return nil, err
		}
	}
	return p.ins, nil
}
