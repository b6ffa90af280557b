package review

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
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
	h := sha256.New()
	t := time.Now()
	fine, coarse := t.Add(-racy).UnixNano(), t.Add(-coarseRacy).UnixNano()
	usable := true
	var b [8 * 6]byte
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			usable = false
			return nil
		}
		if d.IsDir() && d.Name() == ".git" && p != ws {
			return filepath.SkipDir
		}
		if p == ws {
			return nil
		}
		// Every entry counts against the bound, hashed or not: the walk
		// is the host's work on what the agent wrote.
		if n++; n > MaxFiles {
			over = true
			return filepath.SkipAll
		}
		if d.IsDir() || d.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0 {
			// Counted, not hashed: git takes no directory, only what is in
			// it, and nothing but files and symlinks (a run's placeholders
			// are empty directories and FIFOs).
			return nil
		}
		info, err := d.Info()
		if err != nil {
			usable = false
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			usable = false
			return nil
		}
		if info.Mode().IsRegular() {
			if size += info.Size(); size > MaxBytes {
				over = true
				return filepath.SkipAll
			}
		}
		mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
		limit := fine
		if st.Mtim.Nsec == 0 || st.Ctim.Nsec == 0 {
			limit = coarse
		}
		if mt > limit || ct > limit {
			usable = false
		}
		h.Write([]byte(p))
		h.Write([]byte{0})
		binary.LittleEndian.PutUint64(b[0:], uint64(info.Mode()))
		binary.LittleEndian.PutUint64(b[8:], uint64(info.Size()))
		binary.LittleEndian.PutUint64(b[16:], uint64(mt))
		binary.LittleEndian.PutUint64(b[24:], uint64(ct))
		binary.LittleEndian.PutUint64(b[32:], st.Ino)
		binary.LittleEndian.PutUint64(b[40:], st.Dev)
		h.Write(b[:])
		return nil
	})
	if err != nil || over || !usable {
		return "", n, size, over
	}
	return hex.EncodeToString(h.Sum(nil)), n, size, over
}
