package ipc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// LogRange is a stretch of committed lines of a session's events.jsonl,
// served from the file by the connection's writer, so a resume or a replay
// costs the session actor neither memory nor file I/O.
// The lines in [From, To) never change once committed.
type LogRange struct {
	Path string
	// Src, when set, is read instead of the file at Path: the logical
	// bytes of a cluster session's segmented log (docs/cluster.md).
	Src      LogSource
	From, To int64
	// Run, when set, keeps only the lines of that run.
	Run string
}

// LogSource opens committed log bytes by offset.
type LogSource interface {
	OpenLog() (LogReader, error)
}

// LogReader reads a log's committed bytes; Size is how many there are.
type LogReader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// fileLog is a LogReader over a plain events.jsonl.
type fileLog struct {
	*os.File
	size int64
}

func (f fileLog) Size() int64 { return f.size }

// open opens what r's offsets are in, holding at least r.To bytes.
func (r *LogRange) open() (LogReader, string, error) {
	if r.Src != nil {
		rd, err := r.Src.OpenLog()
		if err != nil {
			return nil, "", fmt.Errorf("session log: %w", err)
		}
		if rd.Size() < r.To {
			rd.Close()
			return nil, "", fmt.Errorf("session log: %d bytes, not the %d committed", rd.Size(), r.To)
		}
		return rd, "session log", nil
	}
	f, err := os.OpenFile(r.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("session log: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() < r.To {
		f.Close()
		return nil, "", fmt.Errorf("session log %s: not a regular file of at least %d bytes", r.Path, r.To)
	}
	return fileLog{f, st.Size()}, "session log " + r.Path, nil
}

// SendLog queues r as one unit, marked as replay if asked; the file is
// opened and read when the writer reaches it. It reports whether it was
// queued. A range that cannot be read in full closes the connection: the
// client sees the stream end without its caught_up or done.
func (k *Conn) SendLog(r LogRange, replay bool) bool {
	if r.To <= r.From {
		return true
	}
	return k.enqueue(item{log: &r, replay: replay})
}

// logChunk is how much is written to the client at a time.
const logChunk = 64 << 10

func (k *Conn) writeLog(r *LogRange, replay bool) error {
	f, name, err := r.open()
	if err != nil {
		return err
	}
	defer f.Close()
	sec := io.NewSectionReader(f, r.From, r.To-r.From)
	if r.Run == "" && !replay {
		_ = k.c.SetWriteDeadline(time.Now().Add(WriteTimeout))
		_, err := io.Copy(deadlineWriter{k.c}, sec)
		return err
	}
	br := bufio.NewReaderSize(sec, logChunk)
	var out net.Buffers
	size := 0
	flush := func() error {
		_ = k.c.SetWriteDeadline(time.Now().Add(WriteTimeout))
		_, err := out.WriteTo(k.c)
		out, size = nil, 0
		return err
	}
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if r.Run != "" {
			var f struct {
				Run string `json:"run"`
			}
			if json.Unmarshal(line, &f) != nil || f.Run != r.Run {
				continue
			}
		}
		if replay {
			line = MarkReplay(line)
		}
		out = append(out, line)
		if size += len(line); size >= logChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// deadlineWriter renews the write deadline for every chunk, so a long
// history is bounded per chunk, not as a whole.
type deadlineWriter struct{ c *net.UnixConn }

func (w deadlineWriter) Write(b []byte) (int, error) {
	_ = w.c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	return w.c.Write(b)
}
