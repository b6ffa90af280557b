package segments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
)

// Segment is one link of a chain as a reader sees it.
type Segment struct {
	Epoch int64  // 0 for events.jsonl
	Path  string // the file
	// Start and End are the chain's bytes of the file: after the epoch
	// record, up to the successor's sealed (the newest: its last complete
	// line). Bytes past End are not the chain's.
	Start, End int64
	Off        int64  // the logical offset of Start
	Seq        int64  // the epoch record's seq (0 for events.jsonl)
	Node       string // the epoch record's node ("" for events.jsonl)
}

// Len is how many logical bytes the segment holds.
func (s *Segment) Len() int64 { return s.End - s.Start }

type link struct {
	Segment
	f *os.File
	// prev and sealed are from the segment's own epoch record.
	prev, sealed int64
}

// Chain is a snapshot of a session's readable log: the segments a reader
// follows, oldest first, each open read-only. Its bytes never change (the
// lines it covers are committed), so it is safe for concurrent ReadAt.
// Close it when done.
type Chain struct {
	links []link
	size  int64
	// seq is the last frame's seq when Activate has learned it (seqKnown);
	// otherwise LastSeq reads it.
	seq      int64
	seqKnown bool
}

// Open returns the readable chain of the session directory dir. Without a
// segments directory (or with none of its segments complete) it is the
// plain events.jsonl up to its last complete line; a session with no log
// at all is an empty chain. A torn last line is left out, never truncated.
func Open(dir string) (*Chain, error) {
	links, err := load(dir)
	if err != nil {
		return nil, err
	}
	c := &Chain{links: links}
	for i := range c.links {
		c.links[i].Off = c.size
		c.size += c.links[i].Len()
	}
	return c, nil
}

// Size is how many logical bytes the chain holds.
func (c *Chain) Size() int64 { return c.size }

// Epoch is the newest segment's epoch (0: events.jsonl or no log).
func (c *Chain) Epoch() int64 {
	if len(c.links) == 0 {
		return 0
	}
	return c.links[len(c.links)-1].Epoch
}

// Segments returns the chain's segments, oldest first.
func (c *Chain) Segments() []Segment {
	out := make([]Segment, len(c.links))
	for i := range c.links {
		out[i] = c.links[i].Segment
	}
	return out
}

// Reader reads the chain's logical bytes from the start.
func (c *Chain) Reader() *io.SectionReader { return io.NewSectionReader(c, 0, c.size) }

// ReadAt reads logical bytes at off, from as many segment files as they
// span. It is io.ReaderAt: fewer than len(p) bytes come with an error
// (io.EOF at the chain's end).
func (c *Chain) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("segments: read at %d: negative offset", off)
	}
	// The first segment that ends after off (empty ones never do).
	i := sort.Search(len(c.links), func(i int) bool { return c.links[i].Off+c.links[i].Len() > off })
	n := 0
	for ; n < len(p) && i < len(c.links); i++ {
		l := &c.links[i]
		at := l.Start + (off + int64(n) - l.Off)
		want := min(int64(len(p)-n), l.End-at)
		m, err := l.f.ReadAt(p[n:n+int(want)], at)
		n += m
		if err != nil && !(errors.Is(err, io.EOF) && int64(m) == want) {
			if errors.Is(err, io.EOF) {
				// The file is shorter than when the chain was read: its
				// committed bytes cannot shrink unless someone cut it.
				err = fmt.Errorf("segments: %s shrank below %d bytes: %w", l.Path, l.End, ErrBadChain)
			}
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// LastSeq is the seq of the chain's last frame (0 for an empty log): the
// next frame's seq is LastSeq()+1. It reads the last complete line's "seq"
// (an epoch record carries one too, so a segment without frames yet gives
// the seq it continues from).
func (c *Chain) LastSeq() (int64, error) {
	if c.seqKnown {
		return c.seq, nil
	}
	if len(c.links) == 0 {
		return 0, nil
	}
	l := &c.links[len(c.links)-1]
	return lastSeq(l.f, l.Path, l.End)
}

// Close closes the segment files.
func (c *Chain) Close() error {
	var errs []error
	for i := range c.links {
		errs = append(errs, c.links[i].f.Close())
	}
	c.links, c.size = nil, 0
	return errors.Join(errs...)
}

// load walks the chain from its newest complete segment back to its start
// and returns it oldest first.
func load(dir string) (links []link, err error) {
	defer func() {
		if err != nil {
			for i := range links {
				links[i].f.Close()
			}
			links = nil
		}
	}()
	epochs, err := list(filepath.Join(dir, Dir))
	if err != nil {
		return nil, err
	}
	// The newest segment whose epoch record is complete is the chain's
	// head. One without a complete record is an activation that crashed
	// before its fsync, so its owner never served (or one still being
	// written, whose owner has not served yet): it is no part of the chain.
	var head *link
	for i := len(epochs) - 1; i >= 0 && head == nil; i-- {
		if head, err = openSegment(dir, epochs[i], false); err != nil {
			return nil, err
		}
	}
	if head == nil {
		l, err := openLegacy(dir)
		if err != nil || l == nil {
			return nil, err
		}
		if l.End, err = lastLineEnd(l.f, 0, l.End); err != nil {
			l.f.Close()
			return nil, fmt.Errorf("segments: %s: %w", l.Path, err)
		}
		return []link{*l}, nil
	}
	if head.End, err = lastLineEnd(head.f, head.Start, head.End); err != nil {
		head.f.Close()
		return nil, fmt.Errorf("segments: %s: %w", head.Path, err)
	}
	links = append(links, *head)
	// prev < epoch strictly, so the walk ends.
	for {
		cur := links[len(links)-1]
		if cur.Epoch == 0 {
			break
		}
		var p *link
		if cur.prev == 0 && cur.sealed == 0 && cur.Seq == 0 {
			// A session begun in cluster mode: nothing before it. An
			// events.jsonl that appeared since (the session directory is
			// writable from the agent's sandbox) is never opened: a FIFO
			// there would block every reader, anything else would make
			// the chain unreadable.
			break
		}
		if cur.prev == 0 {
			if p, err = openLegacy(dir); err != nil {
				return links, err
			}
			if p == nil {
				// A session begun in cluster mode: nothing before it.
				if cur.sealed != 0 || cur.Seq != 0 {
					return links, fmt.Errorf("segments: %s: seals %s at %d (seq %d) but there is none: %w", cur.Path, Legacy, cur.sealed, cur.Seq, ErrBadChain)
				}
				break
			}
		} else if p, err = openSegment(dir, cur.prev, true); err != nil {
			return links, fmt.Errorf("segments: %s names it: %w", cur.Path, err)
		}
		links = append(links, *p)
		if err := seal(&links[len(links)-1], &cur); err != nil {
			return links, err
		}
	}
	slices.Reverse(links)
	return links, nil
}

// seal checks that next's epoch record names a length of p that p has and
// that ends a line, and cuts p there. p.End is p's file size on entry.
func seal(p *link, next *link) error {
	n := next.sealed
	bad := func(why string, args ...any) error {
		return fmt.Errorf("segments: %s seals %s at %d: %s: %w", next.Path, p.Path, n, fmt.Sprintf(why, args...), ErrBadChain)
	}
	switch {
	case n > p.End:
		return bad("it has %d bytes", p.End)
	case n < p.Start:
		return bad("inside its epoch record (%d bytes)", p.Start)
	case p.Epoch > 0 && next.Seq < p.Seq:
		return bad("seq %d is before its own %d", next.Seq, p.Seq)
	case n == p.Start && p.Epoch > 0 && next.Seq != p.Seq:
		return bad("it holds no frame, yet seq %d is not its %d", next.Seq, p.Seq)
	case n == 0 && next.Seq != 0:
		return bad("seq %d after an empty log", next.Seq)
	}
	if n > p.Start {
		var b [1]byte
		if _, err := p.f.ReadAt(b[:], n-1); err != nil {
			return fmt.Errorf("segments: %s: %w", p.Path, err)
		}
		if b[0] != '\n' {
			return bad("not a line boundary")
		}
	}
	p.End = n
	return nil
}

// list returns the epochs of the segment files in sd, ascending.
func list(sd string) ([]int64, error) {
	ents, err := os.ReadDir(sd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("segments: %w", err)
	}
	var out []int64
	for _, e := range ents {
		if ep, ok := parseName(e.Name()); ok {
			out = append(out, ep)
		}
	}
	slices.Sort(out)
	return out, nil
}

// openFile opens a log file read-only without following a link (the
// session directory is the host's; a link there is not a segment).
func openFile(path string) (*os.File, int64, error) {
	// O_NONBLOCK: a FIFO put where a segment is expected cannot block the
	// open; it is refused as not regular just below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", path)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// openLegacy opens events.jsonl as segment 0 (End: its size), or returns
// nil when there is none.
func openLegacy(dir string) (*link, error) {
	path := filepath.Join(dir, Legacy)
	f, size, err := openFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("segments: %w", err)
	}
	return &link{Segment: Segment{Path: path, End: size}, f: f}, nil
}

// openSegment opens the segment of epoch e and reads its epoch record
// (End: its size). A segment whose record is not complete yet is nil
// unless named (a successor sealed it, so its record must be there).
func openSegment(dir string, e int64, named bool) (*link, error) {
	path := filepath.Join(dir, Dir, Name(e))
	f, size, err := openFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%s: missing: %w", path, ErrBadChain)
		}
		return nil, fmt.Errorf("segments: %w", err)
	}
	buf := make([]byte, min(size, maxRecord))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		f.Close()
		return nil, fmt.Errorf("segments: %s: %w", path, err)
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		if named || size >= maxRecord {
			f.Close()
			return nil, fmt.Errorf("segments: %s: no complete epoch record in its first %d bytes: %w", path, len(buf), ErrBadChain)
		}
		f.Close()
		return nil, nil
	}
	r, err := ParseRecord(buf[:i+1])
	if err == nil && r.Epoch != e {
		err = fmt.Errorf("epoch record: epoch %d in the file of epoch %d", r.Epoch, e)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("segments: %s: %w: %w", path, err, ErrBadChain)
	}
	l := &link{Segment: Segment{Epoch: e, Path: path, Start: int64(i + 1), End: size, Seq: r.Seq, Node: r.Node}, f: f}
	l.prev, l.sealed = r.Prev, r.Sealed
	return l, nil
}

// lastLineEnd is where the last complete line in [lo, end) of f ends
// (just past its newline), or lo if there is none. It reads backwards in
// chunks, so a long torn tail costs reads, not memory.
func lastLineEnd(f *os.File, lo, end int64) (int64, error) {
	const chunk = 64 << 10
	var buf [chunk]byte
	for hi := end; hi > lo; {
		from := max(lo, hi-chunk)
		b := buf[:hi-from]
		if _, err := f.ReadAt(b, from); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return from + int64(i) + 1, nil
		}
		hi = from
	}
	return lo, nil
}

// lastSeq reads the "seq" of the last line of f before end.
func lastSeq(f *os.File, path string, end int64) (int64, error) {
	if end == 0 {
		return 0, nil
	}
	from, err := lastLineEnd(f, max(0, end-maxLine), end-1)
	if err != nil {
		return 0, fmt.Errorf("segments: %s: %w", path, err)
	}
	if from == max(0, end-maxLine) && from > 0 {
		return 0, fmt.Errorf("segments: %s: last line longer than %d bytes: %w", path, maxLine, ErrBadChain)
	}
	line := make([]byte, end-from)
	if _, err := f.ReadAt(line, from); err != nil {
		return 0, fmt.Errorf("segments: %s: %w", path, err)
	}
	var v struct {
		Seq *int64 `json:"seq"`
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Seq == nil || *v.Seq < 0 {
		return 0, fmt.Errorf("segments: %s: its last line (at byte %d) has no seq: %w", path, from, ErrBadChain)
	}
	return *v.Seq, nil
}
