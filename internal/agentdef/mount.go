package agentdef

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/netpolicy"
	"github.com/cortexfs/ctx/internal/pathin"
)

// MountEntry is one extra bind of .d/mount.
type MountEntry struct {
	Write    bool
	Src, Dst string // host path, sandbox path
}

// reserved sandbox paths a mount may not cover or replace: what the view
// owns and the system it runs on.
var reserved = append(append([]string(nil), layout.ViewOwned...), layout.SystemDirs...)

// ParseMount parses .d/mount, a line grammar (README "Agent view"):
//
//	# comment
//	ro HOST_DIR SANDBOX_DIR    read-only bind
//	rw HOST_DIR SANDBOX_DIR    writable bind
//	net                        outbound network through the daemon's proxy (default: none)
//	net local HOST:PORT        also this one address (IP literal) that is
//	                           otherwise refused: loopback, private, link-local…
//
// The network is never the host's: see internal/netpolicy and internal/egress.
// Paths are absolute and clean, without spaces; a sandbox path may not be /
// nor lie at or under a path the runtime owns (/ctx, /proc, /dev,
// /run/cortexfs, /home/agent, /workspace, /tmp and the system directories).
// Any other line makes the file invalid, and runs fail closed.
func ParseMount(b []byte) ([]MountEntry, netpolicy.Policy, error) {
	var net netpolicy.Policy
	if len(b) == 0 {
		return nil, net, nil
	}
	if b[len(b)-1] != '\n' || !utf8.Valid(b) || bytes.ContainsAny(b, "\r\x00") {
		return nil, net, errors.New("must be LF-terminated UTF-8 lines")
	}
	var out []MountEntry
	for i, ln := range strings.Split(string(b[:len(b)-1]), "\n") {
		f := strings.Fields(ln)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch {
		case len(f) == 1 && f[0] == "net":
			net.Public = true
		case len(f) == 3 && f[0] == "net" && f[1] == "local":
			ap, err := netpolicy.ParseLocal(f[2])
			if err != nil {
				return nil, netpolicy.Policy{}, fmt.Errorf("line %d: net local %v", i+1, err)
			}
			if !net.Granted(ap) {
				net.Local = append(net.Local, ap)
			}
		case len(f) == 3 && (f[0] == "ro" || f[0] == "rw"):
			for _, p := range f[1:] {
				if !filepath.IsAbs(p) || filepath.Clean(p) != p {
					return nil, netpolicy.Policy{}, fmt.Errorf("line %d: %q is not a clean absolute path", i+1, p)
				}
			}
			dst := f[2]
			if dst == "/" {
				return nil, netpolicy.Policy{}, fmt.Errorf("line %d: cannot mount over /", i+1)
			}
			for _, r := range reserved {
				if pathin.Inside(dst, r) || pathin.Inside(r, dst) {
					return nil, netpolicy.Policy{}, fmt.Errorf("line %d: %s is reserved by the runtime", i+1, dst)
				}
			}
			out = append(out, MountEntry{Write: f[0] == "rw", Src: f[1], Dst: dst})
		default:
			return nil, netpolicy.Policy{}, fmt.Errorf("line %d: want `ro|rw HOST SANDBOX`, `net` or `net local HOST:PORT`", i+1)
		}
	}
	return out, net, nil
}
