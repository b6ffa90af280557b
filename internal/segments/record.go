// Package segments is a cluster session's fenced log: one append-only
// segment file per owner, chained newest to oldest by the epoch record each
// owner writes first, so that bytes a superseded owner appends after it was
// sealed are never read (docs/cluster.md, "The segmented log").
//
// Layout of a session directory:
//
//	events.jsonl                      segment 0: a single daemon's log (never written here)
//	segments/<epoch %020d>.jsonl      one per owner; line 1 is its epoch record
//
// An epoch record {"epoch":E,"prev":P,"sealed":N,"seq":S,"node":ID} seals
// segment P at byte N (P's last complete line when E took over; P is never
// truncated) and says the last frame before it has seq S. Readers start at
// the newest segment and follow prev back; each segment is read up to its
// successor's sealed, the newest up to its last complete line. A segment no
// successor names is never read. Offsets are logical: the frames' bytes of
// the chain laid end to end, epoch records excluded, so a plain
// events.jsonl and its segmented continuation have the same offsets for the
// same lines.
//
// The package holds no lock: the cluster's ownership (an etcd key whose
// create revision is the epoch) decides who may call Activate, and the
// epoch order decides which segment wins when a stale owner still writes.
package segments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrBadChain means the segment files do not form a valid chain: an epoch
// record that is malformed, names a missing segment, or seals one at a
// length it does not have or inside a line.
var ErrBadChain = errors.New("bad segment chain")

// ErrSuperseded means a segment with this epoch or a newer one exists: a
// newer owner has taken the session over.
var ErrSuperseded = errors.New("a newer owner's segment exists")

const (
	// Dir is the directory of segment files inside a session directory.
	Dir = "segments"
	// Legacy is segment 0: the single daemon's events.jsonl.
	Legacy = "events.jsonl"

	// maxRecord bounds an epoch record's line: its numbers take at most 20
	// digits each, so only a node id of kilobytes comes near it.
	maxRecord = 4096
	// maxLine bounds the one frame line read to learn a log's last seq
	// (frames are far shorter: ipc.MaxFrameLine is 8 MiB).
	maxLine = 16 << 20
)

// Name is the file name of the segment of epoch e inside Dir.
func Name(e int64) string { return fmt.Sprintf("%020d.jsonl", e) }

// parseName returns the epoch a segment file name stands for. Only the
// names Name gives for epochs ≥ 1 are segments; anything else in Dir (a
// temp file, a stray copy) is not part of any chain.
func parseName(name string) (int64, bool) {
	if len(name) != 26 || name[20:] != ".jsonl" {
		return 0, false
	}
	e, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || e < 1 || Name(e) != name {
		return 0, false
	}
	return e, true
}

// Record is an epoch record, the first line of every segment but segment 0.
type Record struct {
	Epoch  int64  // this segment's epoch; equals its file name's
	Prev   int64  // the segment it continues (0: events.jsonl)
	Sealed int64  // Prev's length that belongs to the chain, in bytes of Prev's file
	Seq    int64  // the seq of the chain's last frame before this segment (0: none)
	Node   string // the owner that wrote it
}

// Line is the record's canonical line, with its newline.
func (r Record) Line() []byte {
	node, _ := json.Marshal(r.Node) // never fails for a string
	b := fmt.Appendf(nil, `{"epoch":%d,"prev":%d,"sealed":%d,"seq":%d,"node":%s}`, r.Epoch, r.Prev, r.Sealed, r.Seq, node)
	return append(b, '\n')
}

func (r Record) validate() error {
	switch {
	case r.Epoch < 1:
		return fmt.Errorf("epoch %d is not ≥ 1", r.Epoch)
	case r.Prev < 0 || r.Prev >= r.Epoch:
		return fmt.Errorf("prev %d is not in [0, epoch %d)", r.Prev, r.Epoch)
	case r.Sealed < 0:
		return fmt.Errorf("sealed %d is negative", r.Sealed)
	case r.Seq < 0:
		return fmt.Errorf("seq %d is negative", r.Seq)
	case r.Node == "":
		return errors.New("node is empty")
	}
	return nil
}

// recordKeys are the epoch record's keys, exactly.
var recordKeys = []string{"epoch", "prev", "sealed", "seq", "node"}

// ParseRecord parses one epoch record line (with its newline). It is
// strict: exactly the five keys, integers without fraction or exponent,
// prev < epoch, sealed ≥ 0, seq ≥ 0, a non-empty node, and the line must be
// the record's canonical form (Line), so a duplicate key, extra space or a
// reordered object is refused rather than read one way here and another
// way elsewhere.
func ParseRecord(line []byte) (Record, error) {
	if len(line) == 0 || line[len(line)-1] != '\n' || bytes.IndexByte(line, '\n') != len(line)-1 {
		return Record{}, errors.New("epoch record: not one line")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return Record{}, fmt.Errorf("epoch record: %w", err)
	}
	if len(m) != len(recordKeys) {
		return Record{}, fmt.Errorf("epoch record: %d keys, want exactly %v", len(m), recordKeys)
	}
	var r Record
	for _, k := range recordKeys {
		raw, ok := m[k]
		if !ok {
			return Record{}, fmt.Errorf("epoch record: no %q", k)
		}
		if k == "node" {
			if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &r.Node) != nil {
				return Record{}, fmt.Errorf("epoch record: node is not a string")
			}
			continue
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return Record{}, fmt.Errorf("epoch record: %s is not an integer", k)
		}
		switch k {
		case "epoch":
			r.Epoch = n
		case "prev":
			r.Prev = n
		case "sealed":
			r.Sealed = n
		case "seq":
			r.Seq = n
		}
	}
	if err := r.validate(); err != nil {
		return Record{}, fmt.Errorf("epoch record: %w", err)
	}
	if !bytes.Equal(r.Line(), line) {
		return Record{}, errors.New("epoch record: not in canonical form")
	}
	return r, nil
}
