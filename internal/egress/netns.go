package egress

import (
	"github.com/cortexfs/ctx/internal/netpolicy"

	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HelperArg is the hidden subcommand of ctxd that runs inside a
// sandbox's network namespace (see Helper).
const HelperArg = "__egress-listen"

// Nsenter is util-linux nsenter, by absolute path (never through PATH).
var Nsenter = "/usr/bin/nsenter"

// Attach gives the sandbox whose held child is pid its network: a helper
// inside the child's network (and user) namespace opens the listening
// sockets of pol.Listens() there and hands them back; the returned Proxy
// serves them from the daemon, on the host's network, until Close. exe is
// the daemon's own binary (it has the helper subcommand).
//
// The sandbox must have a network namespace of its own: one equal to the
// daemon's is refused (it would be the host's network).
func Attach(pid int, exe string, pol netpolicy.Policy, log *slog.Logger) (*Proxy, error) {
	netns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("egress: sandbox netns: %w", err)
	}
	defer netns.Close()
	same, err := sameNS(netns, "/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	if same {
		// spec: V3 — a net sandbox never shares the host's network.
		return nil, errors.New("egress: the sandbox has the host's network namespace")
	}
	files, err := listenInProcess(netns, pol.Listens())
	if errors.Is(err, unix.EPERM) {
		// An unprivileged daemon may not enter the sandbox's network
		// namespace from its own user namespace: a helper joins the
		// sandbox's user namespace first.
		files, err = listenViaHelper(netns, exe, pol.Listens())
	}
	if err != nil {
		return nil, err
	}
	p := &Proxy{Policy: pol, Log: log}
	if os.Getenv(EnvLoopbackOnly) == "1" {
		p.Dialer = loopbackOnly{}
		p.Resolver = loopbackOnly{}
	}
	lns := make([]net.Listener, len(files))
	for i, f := range files {
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			for _, l := range lns[:i] {
				l.Close()
			}
			for _, f := range files[i+1:] {
				f.Close()
			}
			return nil, fmt.Errorf("egress: listener: %w", err)
		}
		lns[i] = ln
	}
	for i, ln := range lns {
		if i == 0 {
			p.ServeProxy(ln)
		} else {
			p.ServeForward(ln, pol.Listens()[i])
		}
	}
	return p, nil
}

// listenViaHelper runs the helper (this binary's HelperArg, through
// nsenter) in the sandbox's network namespace and the user namespace
// that owns it: a multithreaded Go process cannot join a user namespace
// itself. It returns the listening sockets the helper sent back.
func listenViaHelper(netns *os.File, exe string, listens []netip.AddrPort) ([]*os.File, error) {
	// The owner, asked of the network namespace itself — not the sandbox
	// process's user namespace: an unprivileged bwrap that mounts devpts
	// moves its child into a nested user namespace before the block pipe,
	// one with no capability over the network namespace made with the
	// clone, so which namespace /proc/PID/ns/user named depended on how
	// far the child had got.
	userns, err := ownerOf(netns)
	if err != nil {
		return nil, fmt.Errorf("egress: sandbox netns: %w", err)
	}
	defer userns.Close()
	sameUser, err := sameNS(userns, "/proc/self/ns/user")
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "egress"), os.NewFile(uintptr(fds[1]), "egress-helper")
	defer ours.Close()
	// The helper gets fd 3 (the socket), 4 (netns), 5 (userns); nsenter
	// joins the namespaces by those descriptors, so a pid reused in
	// between changes nothing.
	args := []string{"--preserve-credentials"}
	if !sameUser {
		// A user namespace of its own (an unprivileged daemon): join it
		// first, for the capability to enter its network namespace.
		// Joining the daemon's own would fail (EINVAL).
		args = append(args, "--user=/proc/self/fd/5")
	}
	args = append(args, "--net=/proc/self/fd/4", "--", exe, HelperArg)
	for _, l := range listens {
		args = append(args, l.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Nsenter, args...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs, netns, userns}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	theirs.Close()
	if err != nil {
		return nil, fmt.Errorf("egress: netns helper: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	files, err := recvFDs(ours, len(listens))
	if err != nil {
		return nil, fmt.Errorf("egress: netns helper: %w", err)
	}
	return files, nil
}

// listenInProcess opens the listeners inside netns from one OS thread of
// the daemon that enters it and comes back (a daemon with CAP_SYS_ADMIN:
// root); sockets keep the namespace they were made in. EPERM means the
// daemon may not enter it (use the helper). A thread that cannot come
// back is never unlocked, so Go ends it with its goroutine.
func listenInProcess(netns *os.File, listens []netip.AddrPort) ([]*os.File, error) {
	type result struct {
		files []*os.File
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("egress: own netns: %w", err)}
			return
		}
		defer home.Close()
		if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("egress: enter the sandbox's netns: %w", err)}
			return
		}
		var r result
		for _, ap := range listens {
			ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
			if err != nil {
				r.err = fmt.Errorf("egress: listen %s in the sandbox: %w", ap, err)
				break
			}
			f, err := ln.File()
			ln.Close()
			if err != nil {
				r.err = fmt.Errorf("egress: listen %s: %w", ap, err)
				break
			}
			r.files = append(r.files, f)
		}
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// stay locked: this thread must not run other goroutines
			for _, f := range r.files {
				f.Close()
			}
			ch <- result{err: fmt.Errorf("egress: leave the sandbox's netns: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		if r.err != nil {
			for _, f := range r.files {
				f.Close()
			}
			r.files = nil
		}
		ch <- r
	}()
	r := <-ch
	return r.files, r.err
}

// EnvLoopbackOnly, set to 1 in the daemon's environment, makes its proxy
// dial nothing but loopback addresses: the e2e tests run with it so that a
// broken check fails a test without a packet to any other address.
const EnvLoopbackOnly = "CTX_EGRESS_LOOPBACK_ONLY"

// ForDaemon is a Proxy for the daemon's own connections on an agent's
// behalf (DialContext), honouring EnvLoopbackOnly like a sandbox's proxy.
func ForDaemon(pol netpolicy.Policy) *Proxy {
	p := &Proxy{Policy: pol}
	if os.Getenv(EnvLoopbackOnly) == "1" {
		p.Dialer = loopbackOnly{}
	}
	return p
}

// loopbackOnly is the dialer under EnvLoopbackOnly.
type loopbackOnly struct{}

func (loopbackOnly) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return nil, fmt.Errorf("%s is set: not dialling %s", EnvLoopbackOnly, addr)
	}
	return (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, network, addr)
}

// LookupNetIP answers localhost without a query and refuses every other
// name: under EnvLoopbackOnly a name a sandbox asks for (an agent's
// telemetry host, a package registry) must not become a DNS packet to the
// host's resolver either.
func (loopbackOnly) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, nil
	}
	return nil, fmt.Errorf("%s is set: not resolving %s", EnvLoopbackOnly, host)
}

// sameNS compares the namespace f with the one at path.
func sameNS(f *os.File, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return false, fmt.Errorf("stat namespace: %w", err)
	}
	if err := unix.Stat(path, &b); err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// nsGetUserns is NS_GET_USERNS (linux/nsfs.h, _IO(0xb7, 0x1)), which
// golang.org/x/sys does not name.
const nsGetUserns = 0xb701

// ownerOf opens the user namespace that owns the namespace ns.
func ownerOf(ns *os.File) (*os.File, error) {
	fd, err := unix.IoctlRetInt(int(ns.Fd()), nsGetUserns)
	if err != nil {
		return nil, fmt.Errorf("owning user namespace: %w", err)
	}
	// The kernel opens it close-on-exec (open_related_ns).
	return os.NewFile(uintptr(fd), "userns"), nil
}

// recvFDs reads one message carrying n descriptors.
func recvFDs(sock *os.File, n int) ([]*os.File, error) {
	buf := make([]byte, 64)
	oob := make([]byte, unix.CmsgSpace(4*n))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
	if err != nil {
		return nil, fmt.Errorf("receive listeners: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("receive listeners: %w", err)
	}
	var got []int
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err == nil {
			got = append(got, fds...)
		}
	}
	if len(got) != n {
		for _, fd := range got {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("receive listeners: got %d descriptors, want %d", len(got), n)
	}
	out := make([]*os.File, n)
	for i, fd := range got {
		out[i] = os.NewFile(uintptr(fd), "egress-listener")
	}
	return out, nil
}

// Helper is the hidden subcommand, run by nsenter inside a sandbox's
// network namespace: it listens on each address of args and sends the
// listening sockets on descriptor 3, then exits. It runs no code of the
// sandbox and never accepts a connection.
func Helper(args []string) int {
	sock := os.NewFile(3, "egress")
	var fds []int
	for _, a := range args {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().IsLoopback() {
			fmt.Fprintf(os.Stderr, "egress helper: %q: not a loopback HOST:PORT\n", a)
			return 2
		}
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
		if err != nil {
			fmt.Fprintf(os.Stderr, "egress helper: listen %s: %v\n", a, err)
			return 1
		}
		f, err := ln.File()
		if err != nil {
			fmt.Fprintf(os.Stderr, "egress helper: %v\n", err)
			return 1
		}
		fds = append(fds, int(f.Fd()))
	}
	if err := unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(fds...), nil, 0); err != nil {
		fmt.Fprintf(os.Stderr, "egress helper: send listeners: %v\n", err)
		return 1
	}
	return 0
}
