package review

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fingerprintWalkDir is the fingerprint as filepath.WalkDir made it: the
// reference the descriptor walk must equal, byte for byte.
func fingerprintWalkDir(ws string) (fp string, n int, size int64, over bool) {
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
		if n++; n > MaxFiles {
			over = true
			return filepath.SkipAll
		}
		if d.IsDir() || d.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			usable = false
			return nil
		}
		st := info.Sys().(*syscall.Stat_t)
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

// TestFingerprintIsWalkDirs: the descriptor walk hashes what WalkDir's
// walk hashed, in its order — nested directories, names that sort
// differently from their directory order, a .git directory skipped and a
// .git file kept, symlinks, a FIFO, special mode bits, an unreadable
// directory — and Go's own src.
func TestFingerprintIsWalkDirs(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"b/z/y", "a", ".git/objects", "sub/.git/x", "empty", "Z"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	for i, f := range []string{"b/z/y/f", "a/2", "a/10", "a/1", ".git/HEAD", "sub/.git/x/y", "wt/.git", "Z/x", "setuid", "sticky", "k-ä"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), make([]byte, i), 0o644)
	}
	os.Chmod(filepath.Join(ws, "setuid"), 0o4755)
	os.Chmod(filepath.Join(ws, "sticky"), 0o1644)
	os.Symlink("a/1", filepath.Join(ws, "link"))
	os.Symlink("b", filepath.Join(ws, "dirlink"))
	syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600)
	time.Sleep(racy + 50*time.Millisecond) // older than the racy window
	check := func(name, dir string, wantFP bool) {
		t.Helper()
		fp, n, size, over := fingerprint(dir)
		rfp, rn, rsize, rover := fingerprintWalkDir(dir)
		if fp != rfp || n != rn || size != rsize || over != rover {
			t.Errorf("%s: descriptor walk %q %d %d %v, WalkDir's %q %d %d %v", name, fp, n, size, over, rfp, rn, rsize, rover)
		}
		if wantFP && fp == "" {
			t.Errorf("%s: no fingerprint (n %d)", name, n)
		}
	}
	check("fixture", ws, true)
	check("fixture, path not clean", ws+"/", true)
	if src := goSrc(); src != "" && dirExists(src) {
		check("Go's src", src, false) // a fresh toolchain's files may be racy
	}
	if os.Getuid() != 0 { // root reads any directory
		os.Chmod(filepath.Join(ws, "b/z"), 0)
		defer os.Chmod(filepath.Join(ws, "b/z"), 0o755)
		check("unreadable directory", ws, false)
		if fp, _, _, _ := fingerprint(ws); fp != "" {
			t.Error("a directory that could not be read gave a fingerprint")
		}
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// BenchmarkFingerprint: the fingerprint of Go's own src (~11k files)
// against the same fingerprint made by filepath.WalkDir, interleaved.
func BenchmarkFingerprint(b *testing.B) {
	src := goSrc()
	if src == "" || !dirExists(src) {
		b.Skip("no Go src")
	}
	var fd, wd time.Duration
	for b.Loop() {
		t0 := time.Now()
		fingerprint(src)
		fd += time.Since(t0)
		t0 = time.Now()
		fingerprintWalkDir(src)
		wd += time.Since(t0)
	}
	b.ReportMetric(float64(fd.Microseconds())/float64(b.N)/1000, "fd-ms")
	b.ReportMetric(float64(wd.Microseconds())/float64(b.N)/1000, "walkdir-ms")
	b.ReportMetric(float64(fd)/float64(wd), "fd/walkdir")
}

// goSrc is the Go toolchain's src directory (a large, read-only tree
// present wherever go test runs), or "" when go cannot say.
func goSrc() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}
