package workspace

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// Snapshot records what in a directory runs code on the host: every
// repository the walk finds (new ones matter), its config's settings that
// execute, its hooks, and the protected names a grant made writable. Two
// snapshots, before and after a run, give the run's warning.
type Snapshot struct {
	items map[string]string
	// Truncated: why the walk stopped early, or "". A cut-short snapshot
	// compares only what it reached; its reader must say so.
	Truncated string
}

// maxConfig bounds a git config file read for the snapshot.
const maxConfig = 256 << 10

// Take snapshots dir.
func Take(dir *os.File, g Grants, skip []string) *Snapshot {
	return TakeFound(dir, g, Walk(dir, Grants{}, skip)) // every repository, granted or not
}

// TakeFound snapshots dir from found, a walk of it with skip and no name
// granted writable. A walk with grants (Protect's) serves when g grants
// no name writable: Writable is the only grant that changes what a walk
// goes through and finds, besides the absent names it lists at the top,
// which a snapshot passes over.
func TakeFound(dir *os.File, g Grants, found Found) *Snapshot {
	s := &Snapshot{items: map[string]string{}}
	s.Truncated = found.Truncated
	for _, e := range found.Entries {
		if !e.Repo || e.Kind == KindAbsent {
			continue
		}
		switch path.Base(e.Rel) {
		case ".git":
			switch e.Kind {
			case KindDir:
				// Only a directory with HEAD is a repository to git (an
				// empty placeholder is not); its config and hooks count
				// either way.
				if _, err := readSmall(dir, e.Rel+"/HEAD", 256); err == nil {
					s.items["repo\x00"+e.Rel] = "repository"
				}
				s.gitDir(dir, e.Rel)
			case KindFile:
				b, _ := readSmall(dir, e.Rel, 4<<10)
				s.items["repo\x00"+e.Rel] = "gitfile " + strings.TrimSpace(string(b))
			case KindSymlink:
				t, _ := readlinkBeneath(dir, e.Rel)
				s.items["repo\x00"+e.Rel] = "symlink to " + t
			}
		case "hooks":
			s.hooks(dir, e.Rel)
		case "config":
			s.config(dir, e.Rel)
		}
	}
	for _, b := range found.Bare {
		s.items["repo\x00"+b] = "bare repository"
	}
	for n := range g.Writable {
		if fp := fingerprint(dir, n); fp != "" {
			s.items["granted\x00"+n] = fp
		}
	}
	return s
}

func (s *Snapshot) gitDir(dir *os.File, rel string) {
	s.config(dir, rel+"/config")
	s.hooks(dir, rel+"/hooks")
}

func (s *Snapshot) config(dir *os.File, rel string) {
	b, err := readSmall(dir, rel, maxConfig)
	if err != nil {
		return
	}
	for _, kv := range ParseGitConfig(b) {
		if ExecKey(kv[0]) {
			s.items["config\x00"+rel+"\x00"+kv[0]] = kv[1]
		}
	}
}

func (s *Snapshot) hooks(dir *os.File, rel string) {
	f, err := safefs.OpenBeneath(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return
	}
	defer f.Close()
	ents, _ := f.ReadDir(4096)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sample") {
			continue
		}
		s.items["hook\x00"+rel+"/"+e.Name()] = fingerprint(dir, rel+"/"+e.Name())
	}
}

// Incomplete says, in one sentence, that the comparison of s with after
// (the directory seen at at) did not cover the whole directory because a
// walk was cut short, or "" when both walks were complete. What lies past
// the bound may have changed: the check reports that it could not look,
// never "nothing".
func (s *Snapshot) Incomplete(after *Snapshot, at string) string {
	var why []string
	if s.Truncated != "" {
		why = append(why, "at the run's start: "+s.Truncated)
	}
	if after.Truncated != "" {
		why = append(why, "at its end: "+after.Truncated)
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("the check of %s stopped early (%s): repositories, hooks and git config past that bound were not compared, "+
		"so changes there are not reported", at, strings.Join(why, "; "))
}

// Changes lists, one sentence each, what after has that s had not; paths
// are named below at (where the sandbox saw the directory).
func (s *Snapshot) Changes(after *Snapshot, at string) []string {
	var out []string
	keys := make([]string, 0, len(after.items))
	for k := range after.items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := after.items[k]
		old, had := s.items[k]
		if had && old == v {
			continue
		}
		parts := strings.Split(k, "\x00")
		parts[1] = path.Join(at, parts[1])
		switch parts[0] {
		case "repo":
			what := "a new repository at " + parts[1]
			if had {
				what = parts[1] + " changed"
			}
			out = append(out, fmt.Sprintf("%s (%s): git run there on the host reads its config and hooks", what, v))
		case "config":
			out = append(out, fmt.Sprintf("%s: %s set to %q (runs code when git runs on the host)", parts[1], parts[2], v))
		case "hook":
			verb := "added"
			if had {
				verb = "changed"
			}
			out = append(out, fmt.Sprintf("hook %s %s (git runs it on the host)", parts[1], verb))
		case "granted":
			out = append(out, fmt.Sprintf("%s changed (writable by the grant in .d/protect)", parts[1]))
		}
	}
	for k := range s.items {
		if _, ok := after.items[k]; !ok && strings.HasPrefix(k, "granted\x00") {
			out = append(out, path.Join(at, strings.TrimPrefix(k, "granted\x00"))+" removed (writable by the grant in .d/protect)")
		}
	}
	return out
}

// fingerprint describes a file or directory without reading it: type,
// size, mode, inode and mtime; a directory's entries one level down.
func fingerprint(dir *os.File, rel string) string {
	var st unix.Stat_t
	if unix.Fstatat(int(dir.Fd()), rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return ""
	}
	fp := fmt.Sprintf("%o %d %d %d.%d", st.Mode, st.Size, st.Ino, st.Mtim.Sec, st.Mtim.Nsec)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if f, err := safefs.OpenBeneath(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
			ents, _ := f.ReadDir(4096)
			f.Close()
			for _, e := range ents {
				if fi, err := e.Info(); err == nil {
					fp += fmt.Sprintf(";%s %o %d %d", e.Name(), fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
				}
			}
		}
	}
	return fp
}

// readSmall reads at most max bytes of a regular file below dir, without
// following a symlink or blocking on a FIFO.
func readSmall(dir *os.File, rel string, max int64) ([]byte, error) {
	f, err := safefs.OpenBeneath(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, os.ErrInvalid
	}
	return io.ReadAll(io.LimitReader(f, max))
}

func readlinkBeneath(dir *os.File, rel string) (string, error) {
	parent, err := safefs.OpenBeneath(dir, path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", err
	}
	defer parent.Close()
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(int(parent.Fd()), path.Base(rel), buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// ParseGitConfig reads a git config file leniently into (key, value)
// pairs, the key lower-cased "section.subsection.name" (subsection kept as
// written). It never fails: what it cannot read it skips.
func ParseGitConfig(b []byte) [][2]string {
	var out [][2]string
	section := ""
	for _, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' || ln[0] == ';' {
			continue
		}
		if ln[0] == '[' {
			end := strings.IndexByte(ln, ']')
			if end < 0 {
				section = ""
				continue
			}
			h := strings.TrimSpace(ln[1:end])
			if name, sub, ok := strings.Cut(h, " "); ok {
				sub = strings.TrimSpace(sub)
				if uq, err := strconv.Unquote(sub); err == nil {
					sub = uq
				}
				section = strings.ToLower(name) + "." + sub
			} else {
				section = strings.ToLower(h)
			}
			ln = strings.TrimSpace(ln[end+1:])
			if ln == "" {
				continue
			}
		}
		if section == "" {
			continue
		}
		k, v, _ := strings.Cut(ln, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "" || strings.ContainsAny(k, " \t\"") {
			continue
		}
		out = append(out, [2]string{section + "." + k, strings.TrimSpace(v)})
	}
	return out
}

// execNames are config variable names (the last part) whose value git or
// a program it starts runs as a command or loads as more configuration.
var execNames = map[string]bool{
	"fsmonitor": true, "hookspath": true, "sshcommand": true, "pager": true, "editor": true,
	"askpass": true, "gitproxy": true, "alternaterefscommand": true, "external": true,
	"helper": true, "program": true, "packobjectshook": true, "textconv": true, "command": true,
	"clean": true, "smudge": true, "process": true, "driver": true, "uploadpack": true,
	"receivepack": true, "cmd": true, "path": true, "tool": true, "proxycommand": true,
}

// ExecKey says whether a config key (as ParseGitConfig writes it) can make
// git run a command: core.fsmonitor, core.hooksPath, core.sshCommand,
// filter.*.smudge, include.path, aliases, pagers and the like.
func ExecKey(k string) bool {
	sec, _, _ := strings.Cut(k, ".")
	if sec == "alias" || sec == "pager" || sec == "include" || sec == "includeif" {
		return true
	}
	return execNames[k[strings.LastIndexByte(k, '.')+1:]]
}
