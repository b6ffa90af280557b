package cgroup

import (
	"bufio"
	"bytes"
	"strings"
)

// Mounts are the cgroup hierarchies of this mount namespace.
type Mounts struct {
	V1 map[string]string // controller → mount point (co-mounted controllers share one)
	V2 string            // the unified hierarchy's mount point, "" when none
}

// ParseMountinfo reads /proc/self/mountinfo: cgroup v1 mounts by their
// controllers (super options), the first cgroup2 mount. Only mounts of a
// hierarchy's root ("/") count: a bind of a sub-cgroup is not the hierarchy.
func ParseMountinfo(b []byte) Mounts {
	m := Mounts{V1: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue
		}
		point := unescape(f[4])
		switch g[0] {
		case "cgroup2":
			if m.V2 == "" {
				m.V2 = point
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				switch o {
				case "pids", "memory", "cpu", "freezer":
					if _, dup := m.V1[o]; !dup {
						m.V1[o] = point
					}
				}
			}
		}
	}
	return m
}

// unescape undoes mountinfo's octal escapes (\040 for a space …).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return s[0] <= '3'
}

// OwnCgroups reads /proc/self/cgroup: the v2 path ("0::/…") and the v1
// path of each controller.
func OwnCgroups(b []byte) (v2 string, v1 map[string]string) {
	v1 = map[string]string{}
	for _, ln := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(ln, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			v1[c] = parts[2]
		}
	}
	return v2, v1
}
