// Package store is the durable session log: events.jsonl (every frame, the
// source of truth) and messages.jsonl (the raw conversation), one writer per
// session.
//
// Fsync policy: every frame is one write(2) of one whole line to an O_APPEND
// file, so a crash loses at most a torn last line, which Open repairs. The
// file is fsynced after each commit frame (user, tool_result, approval,
// assistant, error, cancelled, done); delta, start, tool_call,
// approval_request and candidate frames reach the disk with the next commit.
// Frames queued together are written line by line and share one fsync
// (group commit), so a conclusion and its done cost one fsync, not two.
// A frame is committed when its line is in events.jsonl; messages.jsonl is
// derived from committed frames and rebuilt from events.jsonl on open when
// the two disagree.
//
// A cluster's session (OpenSegmented) keeps the same policy; only where the
// lines go differs: its owner's own segment of internal/segments instead of
// events.jsonl, with offsets that are logical across the chain.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/segments"
	"github.com/cortexfs/ctx/ipc"
)

// ErrCorrupt means a complete line in the middle of events.jsonl is not a frame.
var ErrCorrupt = errors.New("corrupt session log")

// File names inside a session directory.
const (
	EventsFile   = "events.jsonl"
	MessagesFile = "messages.jsonl"
)

// syncFile is fsync; tests replace it to count or fail syncs.
var syncFile = (*os.File).Sync

// Record is one committed frame: its parsed form and its exact line.
type Record struct {
	Frame ipc.Frame
	Line  []byte // with trailing newline
	// Off is where Line starts in events.jsonl (a segmented log: in the
	// chain's logical bytes): the log's committed lines never move, so a
	// reader can serve them from the file (OpenChain).
	Off int64
}

// End is the offset just past the record's line.
func (r *Record) End() int64 { return r.Off + int64(len(r.Line)) }

// Log is an open session log. It is not safe for concurrent use: the session
// actor's writer goroutine owns it.
type Log struct {
	dir string
	// events is where lines go: events.jsonl, or the owner's segment file
	// (OpenSegmented), both O_APPEND.
	events   *os.File
	messages *os.File
	seq      int64
	size     int64 // the log's logical length: the next line's Off
	failed   error // a failed write: every later append is refused
	// messagesErr is the first failed write of messages.jsonl: no line is
	// written after a gap; Open rebuilds the file.
	messagesErr error
	// NoSync turns off fsync (benchmarks only).
	NoSync bool
	// prevOwner: PrevOwner.
	prevOwner string
	// Fence, set on a cluster owner's log, is checked after every batch:
	// such a log fsyncs every batch, not only commit points, and an
	// error (the ownership deadline passed) fails the append — nothing
	// past the deadline is released to a client (docs/cluster.md "The
	// owner's deadline").
	Fence func() error
}

// Open opens (creating if needed) the session log in dir, repairs a torn
// last line (kept aside as events.jsonl.broken-<n>) and returns every
// committed record. A corrupt complete line is a hard error naming it.
func Open(dir string) (*Log, []Record, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("session %s: %w", dir, err)
	}
	path := filepath.Join(dir, EventsFile)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("session log %s: %w", path, err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		torn := data[i+1:]
		if err := keepBroken(dir, torn); err != nil {
			return nil, nil, err
		}
		if err := os.Truncate(path, int64(i+1)); err != nil {
			return nil, nil, fmt.Errorf("session log %s: cut torn line: %w", path, err)
		}
		data = data[:i+1]
	}
	recs, err := parse(data, path, 0, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("session log %s: %w", path, err)
	}
	l := &Log{dir: dir, events: f, size: int64(len(data))}
	if err := l.start(recs, false); err != nil {
		return nil, nil, err
	}
	return l, recs, nil
}

// OpenSegmented opens a cluster session's log as its owner at epoch, the
// create revision of its ownership key (docs/cluster.md, "The segmented
// log"). segments.Activate seals the chain's newest segment at its last
// complete line — nothing is truncated: a torn line stays in that file,
// outside the chain — and creates this owner's segment. It returns every
// committed record of the chain (Off logical across it); appends go to the
// new segment under the same write and fsync policy as Open's.
// messages.jsonl is always replaced by a rename, so a superseded owner
// that still holds the old file writes to an inode no one reads.
// A newer owner's segment is segments.ErrSuperseded.
func OpenSegmented(dir string, epoch int64, node string) (*Log, []Record, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("session %s: %w", dir, err)
	}
	// The same ownership opening again (a restarted session actor)
	// continues its own segment; a new ownership activates its own.
	w, ch, err := segments.Reopen(dir, epoch, node)
	activated := errors.Is(err, segments.ErrNotOwn)
	if activated {
		w, ch, err = segments.Activate(dir, epoch, node)
	}
	if errors.Is(err, segments.ErrBadChain) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("session %s: %w", dir, err)
	}
	defer ch.Close()
	recs, err := readChain(ch)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	l := &Log{dir: dir, events: w.File(), size: w.Base()}
	if segs := ch.Segments(); activated && len(segs) > 1 {
		l.prevOwner = segs[len(segs)-2].Node
	}
	if err := l.start(recs, true); err != nil {
		return nil, nil, err
	}
	return l, recs, nil
}

// PrevOwner is the node this owner took the segmented log over from: the
// one whose segment it sealed ("" for the single daemon's log, the first
// owner, and an owner that reopened its own segment — a run open there
// was interrupted by this node, not a lost one). The interrupted
// conclusion names the node that was lost.
func (l *Log) PrevOwner() string { return l.prevOwner }

// start takes the committed records of a log whose events file is open:
// the seq to continue from, messages.jsonl reconciled (replaced even when
// it agrees, if asked) and opened for appending. On error it closes the
// events file.
func (l *Log) start(recs []Record, replace bool) error {
	if n := len(recs); n > 0 {
		l.seq = recs[n-1].Frame.Seq
	}
	if err := l.reconcileMessages(recs, replace); err != nil {
		l.events.Close()
		return err
	}
	m, err := os.OpenFile(filepath.Join(l.dir, MessagesFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		l.events.Close()
		return fmt.Errorf("session messages: %w", err)
	}
	l.messages = m
	return nil
}

// readChain parses every segment of a chain, each file's lines named by
// their own line numbers; an epoch record must continue the seq the log
// before it ends at.
func readChain(ch *segments.Chain) ([]Record, error) {
	var recs []Record
	var prev int64
	for _, s := range ch.Segments() {
		line0 := 0
		if s.Epoch > 0 {
			line0 = 1 // the epoch record
			if s.Seq != prev {
				return nil, fmt.Errorf("%s:1: epoch record continues seq %d, the log before it ends at %d: %w", s.Path, s.Seq, prev, ErrCorrupt)
			}
		}
		data := make([]byte, s.Len())
		if _, err := ch.ReadAt(data, s.Off); err != nil {
			return nil, fmt.Errorf("session log %s: %w", s.Path, err)
		}
		rs, err := parse(data, s.Path, line0, s.Off, prev)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rs...)
		if n := len(recs); n > 0 {
			prev = recs[n-1].Frame.Seq
		}
	}
	return recs, nil
}

// OpenChain opens a session's committed log read-only, in either layout:
// the segment chain, or a plain events.jsonl when there is no segments
// directory; a torn last line is left out (and not repaired). The chain is
// an io.ReaderAt over the same offsets as Record.Off, with Size; close it.
func OpenChain(dir string) (*segments.Chain, error) {
	c, err := segments.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("session log %s: %w", dir, err)
	}
	return c, nil
}

// ChainSource is a session directory whose committed log a connection
// serves by offset (ipc.LogRange.Src), in either layout.
type ChainSource string

var _ ipc.LogSource = ChainSource("")

// OpenLog opens the session's chain (OpenChain).
func (d ChainSource) OpenLog() (ipc.LogReader, error) {
	c, err := OpenChain(string(d))
	if err != nil {
		return nil, err
	}
	return c, nil
}

func keepBroken(dir string, torn []byte) error {
	for n := 1; ; n++ {
		p := filepath.Join(dir, EventsFile+".broken-"+strconv.Itoa(n))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("session log: keep torn line: %w", err)
		}
		_, werr := f.Write(torn)
		serr := syncFile(f)
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			return fmt.Errorf("session log: keep torn line: %w", err)
		}
		return atomicfile.SyncDir(dir)
	}
}

// parse reads complete lines of frames from data: data's first line is
// line line0+1 of path and starts at offset off; seqs must rise above prev.
func parse(data []byte, path string, line0 int, off, prev int64) ([]Record, error) {
	var recs []Record
	for n := line0 + 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		line := data[:i+1]
		data = data[i+1:]
		at := off
		off += int64(len(line))
		var f ipc.Frame
		if err := json.Unmarshal(line, &f); err != nil || f.Type == "" || f.Seq <= prev {
			why := "not a frame"
			if err != nil {
				why = err.Error()
			} else if f.Seq <= prev {
				why = fmt.Sprintf("seq %d does not follow %d", f.Seq, prev)
			}
			return nil, fmt.Errorf("%s:%d: %s: %w", path, n, why, ErrCorrupt)
		}
		prev = f.Seq
		recs = append(recs, Record{Frame: f, Line: line, Off: at})
	}
	return recs, nil
}

// Seq is the last committed sequence number.
func (l *Log) Seq() int64 { return l.seq }

// IsCommitPoint reports whether the log fsyncs after this frame.
func IsCommitPoint(t string) bool {
	switch t {
	case ipc.TypeUser, ipc.TypeToolResult, ipc.TypeApproval, ipc.TypeAssistant,
		ipc.TypeError, ipc.TypeCancelled, ipc.TypeDone:
		return true
	}
	return false
}

// Append assigns the next seq and a timestamp, writes the frame as one line
// and fsyncs at commit points. The returned record is committed.
func (l *Log) Append(f ipc.Frame) (Record, error) {
	recs, err := l.AppendBatch([]ipc.Frame{f})
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// AppendBatch appends frames in order, one write(2) per line, and fsyncs
// once at the end if any of them is a commit point (group commit: frames
// that arrive together, such as an assistant conclusion and its done, share
// one fsync). The records are committed when it returns.
func (l *Log) AppendBatch(fs []ipc.Frame) ([]Record, error) {
	if l.failed != nil {
		return nil, l.failed
	}
	recs := make([]Record, 0, len(fs))
	sync := false
	for _, f := range fs {
		f.Seq = l.seq + 1
		if f.TS == "" {
			f.TS = ipc.Now()
		}
		line := f.Line()
		if _, err := l.events.Write(line); err != nil {
			// What was written may be partial: the log refuses every later
			// append (the next Open repairs a torn line) so no seq is reused.
			l.failed = fmt.Errorf("session append: %w", err)
			return nil, l.failed
		}
		l.seq = f.Seq
		sync = sync || IsCommitPoint(f.Type)
		recs = append(recs, Record{Frame: f, Line: line, Off: l.size})
		l.size += int64(len(line))
	}
	if (sync || l.Fence != nil) && !l.NoSync {
		if err := syncFile(l.events); err != nil {
			l.failed = fmt.Errorf("session append: fsync: %w", err)
			return nil, l.failed
		}
	}
	if l.Fence != nil {
		if err := l.Fence(); err != nil {
			l.failed = fmt.Errorf("session append: %w", err)
			return nil, l.failed
		}
	}
	for i := range recs {
		if m := messageOf(&recs[i].Frame); m != nil && l.messagesErr == nil {
			// messages.jsonl is derived from events.jsonl: a failed write
			// does not undo the commit; it is logged once, no later line is
			// written after the gap, and the next Open rebuilds the file
			// from the committed events.
			if _, err := l.messages.Write(m); err != nil {
				l.messagesErr = err
				slog.Warn("session messages.jsonl write failed; it is rebuilt from events.jsonl when the session is next opened", "dir", l.dir, "err", err)
			}
		}
	}
	return recs, nil
}

// Close closes the files.
func (l *Log) Close() error {
	var errs []error
	if l.events != nil {
		errs = append(errs, syncFile(l.events), l.events.Close())
	}
	if l.messages != nil {
		// messages.jsonl is fsynced when the session closes, not at every
		// commit: it is rebuilt from events.jsonl on open when it differs.
		errs = append(errs, syncFile(l.messages), l.messages.Close())
	}
	return errors.Join(errs...)
}

// Message is one line of messages.jsonl: the raw conversation (P5, X7).
type Message struct {
	Role      string `json:"role"` // user | tool | assistant | error
	Run       string `json:"run"`
	Seq       int64  `json:"seq"`
	TS        string `json:"ts"`
	Text      string `json:"text,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Status    string `json:"status,omitempty"`
	Content   string `json:"content,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Code      string `json:"code,omitempty"`
	// Images, on a user message, are the images it attaches (references;
	// the bytes are in the session's blob store).
	Images []ipc.Image `json:"images,omitempty"`
}

// MessageOf returns the conversation message a committed frame contributes, if any.
func MessageOf(f *ipc.Frame) *Message {
	m := &Message{Run: f.Run, Seq: f.Seq, TS: f.TS}
	switch f.Type {
	case ipc.TypeUser:
		m.Role, m.Text, m.Images = "user", f.Text, f.Images
	case ipc.TypeToolResult:
		m.Role, m.CallID, m.Name, m.Status, m.Content, m.Truncated = "tool", f.CallID, f.Name, f.Status, f.Content, f.Truncated
	case ipc.TypeAssistant:
		m.Role, m.Text = "assistant", f.Text
	case ipc.TypeError:
		if f.Run == "" {
			return nil
		}
		m.Role, m.Code, m.Text = "error", f.Code, f.Message
	default:
		return nil
	}
	return m
}

func messageOf(f *ipc.Frame) []byte {
	m := MessageOf(f)
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return append(b, '\n')
}

// reconcileMessages rewrites messages.jsonl from the committed records when
// it does not hold exactly the messages they imply, or always if replace.
func (l *Log) reconcileMessages(recs []Record, replace bool) error {
	var want bytes.Buffer
	for i := range recs {
		want.Write(messageOf(&recs[i].Frame))
	}
	path := filepath.Join(l.dir, MessagesFile)
	if !replace {
		have, err := os.ReadFile(path)
		if err == nil && bytes.Equal(have, want.Bytes()) {
			return nil
		}
	}
	if err := atomicfile.WriteFile(path, want.Bytes(), 0o600); err != nil {
		return fmt.Errorf("session messages: rebuild: %w", err)
	}
	return nil
}
