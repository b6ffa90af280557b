package segments

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Writer appends to the segment its owner created.
type Writer struct {
	f     *os.File
	path  string
	epoch int64
	base  int64
}

// Epoch is the segment's epoch.
func (w *Writer) Epoch() int64 { return w.epoch }

// Path is the segment file.
func (w *Writer) Path() string { return w.path }

// Base is the logical offset where the writer's next line goes when it
// was made: the chain's size at Activate (the segment's first frame byte)
// or at Reopen. A line written n bytes later starts at Base()+n.
func (w *Writer) Base() int64 { return w.base }

// File is the segment file (opened O_APPEND), for a caller that applies
// its own write and fsync policy (store.Log). Whatever is written to it
// must be whole lines, one write(2) each.
func (w *Writer) File() *os.File { return w.f }

// Write appends one whole line (ending in its only newline) in one
// write(2), so a crash leaves at most a torn last line, which readers skip.
func (w *Writer) Write(line []byte) (int, error) {
	if len(line) == 0 || bytes.IndexByte(line, '\n') != len(line)-1 {
		return 0, fmt.Errorf("segments: %s: append: not one whole line", w.path)
	}
	n, err := w.f.Write(line)
	if err != nil {
		return n, fmt.Errorf("segments: %s: append: %w", w.path, err)
	}
	return n, nil
}

// Sync makes the written lines durable.
func (w *Writer) Sync() error {
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("segments: %s: fsync: %w", w.path, err)
	}
	return nil
}

// Close closes the segment file.
func (w *Writer) Close() error { return w.f.Close() }

// Activate makes this process the session's writer at epoch (the create
// revision of its ownership key, docs/cluster.md). It seals the newest
// segment of the chain at its last complete line (a torn tail is left in
// place, outside the chain), creates segments/<epoch>.jsonl with O_EXCL,
// writes the epoch record and fsyncs the file and the directory: only then
// may the owner serve. It returns the writer and the chain ending in the
// new, still empty segment (Size and LastSeq say where writing continues).
//
// A segment of this epoch or a newer one means a newer owner exists:
// ErrSuperseded, and nothing is written.
func Activate(dir string, epoch int64, node string) (*Writer, *Chain, error) {
	if epoch < 1 || node == "" {
		return nil, nil, fmt.Errorf("segments: activate %s: epoch %d, node %q: need epoch ≥ 1 and a node", dir, epoch, node)
	}
	sd := filepath.Join(dir, Dir)
	switch err := os.Mkdir(sd, 0o700); {
	case err == nil:
		if err := syncDir(dir); err != nil {
			return nil, nil, err
		}
	case !errors.Is(err, fs.ErrExist):
		return nil, nil, fmt.Errorf("segments: %w", err)
	}
	if st, err := os.Lstat(sd); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("segments: %s is not a directory: %w", sd, ErrBadChain)
	}
	if err := newerThan(sd, epoch-1); err != nil {
		return nil, nil, err
	}
	c, err := Open(dir)
	if err != nil {
		return nil, nil, err
	}
	w, err := activate(c, sd, epoch, node)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return w, c, nil
}

func activate(c *Chain, sd string, epoch int64, node string) (*Writer, error) {
	seq, err := c.LastSeq()
	if err != nil {
		return nil, err
	}
	rec := Record{Epoch: epoch, Seq: seq, Node: node}
	if n := len(c.links); n > 0 {
		rec.Prev, rec.Sealed = c.links[n-1].Epoch, c.links[n-1].End
	}
	line := rec.Line()
	path := filepath.Join(sd, Name(epoch))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("segments: %s exists: %w", path, ErrSuperseded)
	}
	if err != nil {
		return nil, fmt.Errorf("segments: %w", err)
	}
	fail := func(err error) (*Writer, error) {
		f.Close()
		return nil, err
	}
	if _, err := f.Write(line); err != nil {
		return fail(fmt.Errorf("segments: %s: epoch record: %w", path, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("segments: %s: fsync: %w", path, err))
	}
	if err := syncDir(sd); err != nil {
		return fail(err)
	}
	// A newer owner that listed the directory before our file existed
	// chained past us: we are stale before serving anything.
	if err := newerThan(sd, epoch); err != nil {
		return fail(err)
	}
	rf, size, err := openFile(path)
	if err != nil {
		return fail(fmt.Errorf("segments: %w", err))
	}
	start := int64(len(line))
	if size < start {
		rf.Close()
		return fail(fmt.Errorf("segments: %s: %d bytes after writing its epoch record: %w", path, size, ErrBadChain))
	}
	c.links = append(c.links, link{
		Segment: Segment{Epoch: epoch, Path: path, Start: start, End: start, Off: c.size, Seq: seq, Node: node},
		f:       rf, prev: rec.Prev, sealed: rec.Sealed,
	})
	c.seq, c.seqKnown = seq, true
	return &Writer{f: f, path: path, epoch: epoch, base: c.size}, nil
}

// newerThan fails with ErrSuperseded when sd holds a segment newer than e.
func newerThan(sd string, e int64) error {
	epochs, err := list(sd)
	if err != nil {
		return err
	}
	if n := len(epochs); n > 0 && epochs[n-1] > e {
		return fmt.Errorf("segments: %s: %w", filepath.Join(sd, Name(epochs[n-1])), ErrSuperseded)
	}
	return nil
}

// syncDir fsyncs a directory so a file created in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("segments: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("segments: fsync %s: %w", dir, err)
	}
	return nil
}

// ErrNotOwn means the newest segment is not the one the caller's
// ownership made: there is nothing of its own to reopen (Activate).
var ErrNotOwn = errors.New("the newest segment is not this owner's")

// Reopen continues this owner's own segment — the newest of the chain,
// made by Activate at the same epoch by the same node — after the
// session's writer was restarted within one ownership (a crashed session
// actor; a restarted node has a new lease, so a new epoch, and
// activates). A torn tail of that segment is cut: this owner is its only
// writer and wrote it, and nothing past the last complete line was ever
// committed. A newer segment is ErrSuperseded; a newest segment of another
// epoch or node is ErrNotOwn.
func Reopen(dir string, epoch int64, node string) (*Writer, *Chain, error) {
	sd := filepath.Join(dir, Dir)
	if err := newerThan(sd, epoch); err != nil {
		return nil, nil, err
	}
	c, err := Open(dir)
	if err != nil {
		return nil, nil, err
	}
	n := len(c.links)
	if n == 0 || c.links[n-1].Epoch != epoch || c.links[n-1].Node != node {
		c.Close()
		return nil, nil, fmt.Errorf("segments: %s at epoch %d of %s: %w", dir, epoch, node, ErrNotOwn)
	}
	last := c.links[n-1]
	f, err := os.OpenFile(last.Path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("segments: %w", err)
	}
	if st, err := f.Stat(); err != nil || st.Size() > last.End {
		if err == nil {
			err = f.Truncate(last.End)
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			c.Close()
			return nil, nil, fmt.Errorf("segments: %s: cut own torn tail: %w", last.Path, err)
		}
	}
	return &Writer{f: f, path: last.Path, epoch: epoch, base: c.Size()}, c, nil
}
