package acpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// MaxMessage bounds one JSON-RPC line from the editor (the SDK's own
// scanner limit).
const MaxMessage = 10 << 20

// Serve runs the bridge on an editor's stdin/stdout until the editor closes
// its end or ctx ends, then gives the prompts in flight up to grace to
// cancel their runs and answer.
//
// Lines that are not one JSON object get a JSON-RPC error answer here
// (-32700 parse error, -32600 invalid request, id null): the SDK logs and
// drops them, which would leave an editor waiting. Everything else is the
// SDK's.
func Serve(ctx context.Context, a *Agent, in io.Reader, out io.Writer, grace time.Duration) error {
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	conn := acp.NewAgentSideConnection(a, w, pr)
	conn.SetLogger(a.opt.Log)
	a.SetConnection(conn)
	filterDone := make(chan error, 1)
	go func() { filterDone <- filter(in, pw, w) }()
	var err error
	select {
	case <-conn.Done():
	case err = <-filterDone:
		// stdin ended: the pipe is closed, the SDK sees EOF and cancels
		// every prompt's context (each then sends cancel and waits for done).
		<-conn.Done()
	case <-ctx.Done():
		_ = pw.CloseWithError(ctx.Err())
		<-conn.Done()
	}
	if !a.Wait(grace) {
		a.opt.Log.Warn("acp: prompts still running at exit; their runs continue in the daemon")
	}
	if err != nil {
		return fmt.Errorf("acp: reading stdin: %w", err)
	}
	return nil
}

// filter copies well-formed lines to the SDK and answers the others.
func filter(in io.Reader, to *io.PipeWriter, errs io.Writer) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readLine(br, MaxMessage)
		if len(bytes.TrimSpace(line)) > 0 {
			if code, msg := Malformed(line); code != 0 {
				_, _ = errs.Write(errorLine(code, msg))
			} else if _, werr := to.Write(append(line, '\n')); werr != nil {
				err = werr
				break
			}
		}
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	_ = to.CloseWithError(io.EOF)
	return err
}

// errTooLong is a line over MaxMessage.
var errTooLong = fmt.Errorf("a line over %d bytes", MaxMessage)

func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			// Drop the rest of the line; answer it as a parse error.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
			return []byte("\x00too-long"), err
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// Malformed judges one line before the SDK sees it: 0 when it is a JSON
// object, else the JSON-RPC error code and message to answer with.
func Malformed(line []byte) (int, string) {
	if bytes.Equal(line, []byte("\x00too-long")) {
		return -32700, "Parse error: " + errTooLong.Error()
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		if json.Valid(line) {
			return -32600, "Invalid Request: not a JSON object (batches are not supported)"
		}
		return -32700, "Parse error: " + err.Error()
	}
	if _, ok := m["method"]; !ok {
		if _, ok := m["id"]; !ok {
			return -32600, "Invalid Request: neither method nor id"
		}
	}
	return 0, ""
}

func errorLine(code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	return append(b, '\n')
}

// lockedWriter serialises whole messages from the SDK and the filter.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
