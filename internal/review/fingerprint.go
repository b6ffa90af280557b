package review

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/cortexfs/ctx/internal/safefs"
	"golang.org/x/sys/unix"
)

// racy is how recent a change may be for its times to be trusted: a file
// changed twice within a timestamp tick keeps its times, so an entry
// changed this recently makes the fingerprint unusable (as git re-hashes
// its racily clean entries). The kernel stamps times from a clock of one
// tick (1–10 ms), so a tenth of a second is safe on filesystems that keep
// nanoseconds; a time with no nanoseconds (a filesystem of whole seconds,
// or two) gets coarseRacy.
const (
	racy       = 100 * time.Millisecond
	coarseRacy = 2 * time.Second
)

// fingerprint is a hash of what a walk of the workspace finds that git
// can take into a tree — every regular file's and symlink's path, type
// and mode, size, mtime, ctime and inode, .git directories skipped — so
// that a workspace with the same fingerprint as when a snapshot was taken
// holds the same files: its tree is reused and no git process runs (a run
// that changed nothing costs two walks). What git never takes is left
// out: a directory by itself (its files are in the walk) and anything
// neither a file nor a symlink (a FIFO, a socket, a device) — the
// placeholders other runs in the same workspace hold while they last
// (internal/workspace: empty directories and FIFOs, made moments ago)
// would otherwise change the fingerprint, or make it unusable as too
// recent, for every run that overlaps one. "" when it cannot tell: the
// walk was cut (over MaxFiles entries or MaxBytes), an entry could not
// be read, or a file changed within racy of the walk. n counts every
// entry, hashed or not (a workspace of FIFOs is bounded as one of
// files), size the files' bytes; over says the walk passed a bound.
func fingerprint(ws string) (fp string, n int, size int64, over bool) {
	t := time.Now()
	w := &fpWalk{
		h:      sha256.New(),
		fine:   t.Add(-racy).UnixNano(),
		coarse: t.Add(-coarseRacy).UnixNano(),
		usable: true,
		buf:    make([]byte, 32<<10),
		path:   append(make([]byte, 0, 4096), filepath.Clean(ws)...), // WalkDir's children are Join(ws, name)
	}
	top, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", 0, 0, false
	}
	w.dir(top)
	unix.Close(top)
	if w.over || !w.usable {
		return "", w.n, w.size, w.over
	}
	return hex.EncodeToString(w.h.Sum(nil)), w.n, w.size, w.over
}

// fpWalk is one fingerprint's walk.
type fpWalk struct {
	h            hash.Hash
	fine, coarse int64
	usable, over bool
	n            int
	size         int64
	buf          []byte // getdents, shared by every directory
	path         []byte // the current directory's path, as WalkDir spells it
	rec          [8 * 6]byte
}

type fpEntry struct {
	name string
	typ  byte // DT_*
}

// dir hashes the entries below the directory fd (whose path is w.path);
// it reports false once the walk is to stop (a bound passed).
func (w *fpWalk) dir(fd int) bool {
	ents, ok := w.list(fd)
	if !ok {
		w.usable = false // what was listed is still walked, as WalkDir does
	}
	slices.SortFunc(ents, func(a, b fpEntry) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	base := len(w.path)
	for _, e := range ents {
		if e.typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				w.usable = false
				continue
			}
			e.typ = safefs.DirentType(st.Mode)
		}
		if e.typ == unix.DT_DIR && e.name == ".git" {
			continue // never counted: git keeps its own
		}
		// Every entry counts against the bound, hashed or not: the walk
		// is the host's work on what the agent wrote.
		if w.n++; w.n > MaxFiles {
			w.over = true
			return false
		}
		w.path = append(append(w.path[:base], '/'), e.name...)
		if base == 1 && w.path[0] == '/' {
			w.path = append(w.path[:1], e.name...) // below "/": no doubled slash
		}
		switch e.typ {
		case unix.DT_DIR:
			sub, err := unix.Openat(fd, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				w.usable = false
				continue
			}
			more := w.dir(sub)
			unix.Close(sub)
			if !more {
				return false
			}
		case unix.DT_REG, unix.DT_LNK:
			if !w.file(fd, e.name) {
				return false
			}
		default:
			// Counted, not hashed: git takes no directory, only what is
			// in it, and nothing but files and symlinks (a run's
			// placeholders are empty directories and FIFOs).
		}
	}
	w.path = w.path[:base]
	return true
}

// file hashes one file or symlink of the directory fd (its path is
// w.path); false once the bytes bound is passed.
func (w *fpWalk) file(fd int, name string) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		w.usable = false
		return true
	}
	mode := fileMode(st.Mode)
	if mode.IsRegular() {
		if w.size += st.Size; w.size > MaxBytes {
			w.over = true
			return false
		}
	}
	mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
	limit := w.fine
	if st.Mtim.Nsec == 0 || st.Ctim.Nsec == 0 {
		limit = w.coarse
	}
	if mt > limit || ct > limit {
		w.usable = false
	}
	w.h.Write(w.path)
	w.h.Write([]byte{0})
	b := w.rec[:]
	binary.LittleEndian.PutUint64(b[0:], uint64(mode))
	binary.LittleEndian.PutUint64(b[8:], uint64(st.Size))
	binary.LittleEndian.PutUint64(b[16:], uint64(mt))
	binary.LittleEndian.PutUint64(b[24:], uint64(ct))
	binary.LittleEndian.PutUint64(b[32:], st.Ino)
	binary.LittleEndian.PutUint64(b[40:], st.Dev)
	w.h.Write(b)
	return true
}

// list reads the directory fd's entries ("." and ".." left out); ok is
// false when a read failed (the entries read before are returned).
func (w *fpWalk) list(fd int) (ents []fpEntry, ok bool) {
	err := safefs.ReadDirents(fd, w.buf, func(name []byte, typ byte) error {
		ents = append(ents, fpEntry{string(name), typ})
		return nil
	})
	return ents, err == nil
}

// fileMode is os.FileMode of a stat mode, as package os makes it (the
// hashed bytes are the ones WalkDir's Info gave).
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
