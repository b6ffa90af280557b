package seccomp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the filter over one seccomp_data, as the kernel would,
// for the instructions Build emits.
func run(t testing.TB, prog []unix.SockFilter, arch, nr uint32, args [6]uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var ok bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				ok = acc == in.K
			case unix.BPF_JGE:
				ok = acc >= in.K
			case unix.BPF_JSET:
				ok = acc&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		default:
			t.Fatalf("pc %d: unexpected code %#x", pc, in.Code)
		}
	}
	t.Fatal("fell off the end of the program")
	return 0
}

const (
	eperm  = RetErrno | uint32(unix.EPERM)
	enosys = RetErrno | uint32(unix.ENOSYS)
)

// TestFilterTable: what each architecture's filter answers. seccomp
func TestFilterTable(t *testing.T) {
	for _, a := range []Arch{X86_64, AArch64} {
		prog, err := a.Build()
		if err != nil {
			t.Fatal(err)
		}
		n := a.Nr
		cases := []struct {
			name string
			arch uint32
			nr   uint32
			args [6]uint64
			want uint32
		}{
			{"read", a.Audit, 0, [6]uint64{}, RetAllow},
			{"ioctl TCGETS", a.Audit, n["ioctl"], [6]uint64{0, unix.TCGETS}, RetAllow},
			{"ioctl TIOCSTI", a.Audit, n["ioctl"], [6]uint64{0, TIOCSTI}, eperm},
			{"ioctl TIOCSTI high bits", a.Audit, n["ioctl"], [6]uint64{0, 0xdead00000000 | TIOCSTI}, eperm},
			{"ioctl TIOCLINUX", a.Audit, n["ioctl"], [6]uint64{0, TIOCLINUX}, eperm},
			{"clone thread", a.Audit, n["clone"], [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_FS}, RetAllow},
			{"clone newuser", a.Audit, n["clone"], [6]uint64{unix.CLONE_NEWUSER}, eperm},
			{"clone newtime", a.Audit, n["clone"], [6]uint64{0x80}, eperm},
			{"clone3", a.Audit, n["clone3"], [6]uint64{}, enosys},
			{"unshare files", a.Audit, n["unshare"], [6]uint64{unix.CLONE_FILES}, RetAllow},
			{"unshare newns", a.Audit, n["unshare"], [6]uint64{unix.CLONE_NEWNS}, eperm},
			{"personality query", a.Audit, n["personality"], [6]uint64{0xffffffff}, RetAllow},
			{"personality linux", a.Audit, n["personality"], [6]uint64{0}, RetAllow},
			{"personality addr_no_randomize", a.Audit, n["personality"], [6]uint64{0x0040000}, eperm},
			{"foreign arch", a.Foreign[0], 0, [6]uint64{}, RetKillProcess},
			{"unknown arch", 0x12345678, 0, [6]uint64{}, RetKillProcess},
		}
		for _, name := range Denied {
			cases = append(cases, struct {
				name string
				arch uint32
				nr   uint32
				args [6]uint64
				want uint32
			}{name, a.Audit, n[name], [6]uint64{}, eperm})
		}
		if a.X32 {
			cases = append(cases, struct {
				name string
				arch uint32
				nr   uint32
				args [6]uint64
				want uint32
			}{"x32 read", a.Audit, 0x40000000, [6]uint64{}, eperm})
		}
		for _, c := range cases {
			if got := run(t, prog, c.arch, c.nr, c.args); got != c.want {
				t.Errorf("%s %s: got %#x want %#x", a.Name, c.name, got, c.want)
			}
		}
	}
}

// TestProgramEncodes: the native program builds, has 8 bytes an
// instruction, and File hands out independent descriptors at offset 0.
func TestProgramEncodes(t *testing.T) {
	b, n, err := Program()
	if err != nil {
		t.Skip(err)
	}
	if len(b) != 8*n || n < 40 {
		t.Fatalf("%d bytes for %d instructions", len(b), n)
	}
	for i := 0; i < 2; i++ {
		f, err := File()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(b)+1)
		m, _ := f.Read(got)
		f.Close()
		if m != len(b) || string(got[:m]) != string(b) {
			t.Fatalf("file %d: read %d bytes", i, m)
		}
	}
}

// FuzzFilter: for any syscall data the program ends in one of its three
// verdicts, never falls off, and never allows a namespace flag to clone.
func FuzzFilter(f *testing.F) {
	f.Add(uint32(AuditX86_64), uint32(56), uint64(unix.CLONE_NEWUSER), uint64(0))
	f.Add(uint32(AuditAArch64), uint32(29), uint64(0), uint64(TIOCSTI))
	f.Add(uint32(AuditI386), uint32(1), uint64(0), uint64(0))
	progs := map[uint32][]unix.SockFilter{}
	for _, a := range []Arch{X86_64, AArch64} {
		p, err := a.Build()
		if err != nil {
			f.Fatal(err)
		}
		progs[a.Audit] = p
	}
	f.Fuzz(func(t *testing.T, arch, nr uint32, a0, a1 uint64) {
		for audit, p := range progs {
			got := run(t, p, arch, nr, [6]uint64{a0, a1})
			if got != RetAllow && got != eperm && got != enosys && got != RetKillProcess {
				t.Fatalf("verdict %#x", got)
			}
			if arch != audit && got == RetAllow {
				t.Fatalf("arch %#x allowed by the %#x filter", arch, audit)
			}
			a := X86_64
			if audit == AuditAArch64 {
				a = AArch64
			}
			if arch == audit && nr == a.Nr["clone"] && uint32(a0)&NamespaceFlags != 0 && got == RetAllow {
				t.Fatalf("clone %#x allowed", a0)
			}
			if arch == audit && nr == a.Nr["ioctl"] && uint32(a1) == TIOCSTI && got == RetAllow {
				t.Fatalf("TIOCSTI %#x allowed", a1)
			}
		}
	})
}
