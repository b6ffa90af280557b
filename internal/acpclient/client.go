// Package acpclient is ctx's side of an ACP agent run under ctx
// (`.d/abi` acp-v1, run by actors/run; see the README): it is the
// agent's acp.Client, mapping its session/updates to ctx frames, its
// fs/read_text_file and fs/write_text_file to reads and writes resolved in
// the agent's own sandbox view (writes only under /workspace), and its permission requests and
// terminals to callbacks the run owns. The JSON-RPC is
// github.com/coder/acp-go-sdk.
package acpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/viewfs"
	"github.com/cortexfs/ctx/ipc"
)

// Bounds on what an ACP agent may send in one run.
const (
	// MaxUpdates is the number of session/update notifications a run takes;
	// past it the run fails (an agent that floods) instead of growing the log.
	MaxUpdates = 10000
	// MaxFileRead is the largest text a fs/read_text_file answers.
	MaxFileRead = 1 << 20
	// MaxFileWrite is the largest text a fs/write_text_file takes.
	MaxFileWrite = 1 << 20
	// MaxContent is a tool result's content (interfaces.md: 16 KiB).
	MaxContent = 16 << 10
)

// Errors the run maps to wire codes.
var (
	ErrOutsideView = errors.New("outside the agent's view")
	ErrReadOnly    = errors.New("writes are allowed only under /workspace")
	ErrFlood       = errors.New("the agent sent too many session updates")
	ErrNoTerminal  = errors.New("terminals are not available to this run")
)

// View opens files inside the agent's own sandbox view (viewfs.Root).
type View interface {
	ReadFile(p string, limit int64) ([]byte, error)
	WriteFile(p string, content []byte) error
}

// Host is what the run provides.
type Host struct {
	// View is the run's sandbox view every fs/* request resolves in;
	// nil: they are refused.
	View View
	// Frame receives each frame to record (delta, tool_call, tool_result).
	Frame func(*ipc.Frame)
	// Approve asks for approval of one call (the run's approval path) and
	// reports whether it is allowed once. nil: everything is refused.
	Approve func(ctx context.Context, callID, name string, args []string) bool
	// Terminals runs terminal/* requests as sandboxed processes; nil: refused.
	Terminals Terminals
	// Flood, when set, is called once when the agent passes MaxUpdates
	// (the run then ends it; a notification's error is only logged by the SDK).
	Flood func()
}

// Terminals is the sandboxed-process side of terminal/*.
type Terminals interface {
	Create(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error)
	Output(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error)
	Wait(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error)
	Kill(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error)
	Release(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error)
}

// Client is the acp.Client of one run.
type Client struct {
	h Host

	mu      sync.Mutex
	updates int
	flooded bool
	calls   map[string]*call // tool call id → what the agent reported of it
	seq     int
	handled int          // session/updates whose frames were all sent
	read    atomic.Int64 // session/updates read from the agent's stdout (Throttle)
	last    atomic.Int64 // unix nanoseconds of the agent's last update or request
	busy    atomic.Int32 // the agent's requests in flight
}

var _ acp.Client = (*Client)(nil)

// New makes the client of one run.
func New(h Host) *Client {
	c := &Client{h: h, calls: map[string]*call{}}
	c.last.Store(time.Now().UnixNano())
	return c
}

// active marks one of the agent's requests in flight until the returned
// func is called.
func (c *Client) active() func() {
	c.busy.Add(1)
	c.last.Store(time.Now().UnixNano())
	return func() {
		c.last.Store(time.Now().UnixNano())
		c.busy.Add(-1)
	}
}

// Idle is how long the agent has been silent: no session/update and no
// request of its own in flight (a terminal being waited for, a permission
// being asked, count as activity). 0 while a request is in flight.
func (c *Client) Idle() time.Duration {
	if c.busy.Load() > 0 {
		return 0
	}
	return time.Since(time.Unix(0, c.last.Load()))
}

// Flooded reports whether the agent passed MaxUpdates.
func (c *Client) Flooded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flooded
}

// SessionUpdate maps the agent's updates to frames: message chunks to
// delta, a tool_call to tool_call (name "acp", args [kind, title, then
// what it said it did: the command, the paths; input: its rawInput), a
// tool_call_update that completes or fails it to tool_result (content, or
// rawOutput when content is empty); thoughts, plans and the rest are not
// recorded.
func (c *Client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.last.Store(time.Now().UnixNano())
	c.mu.Lock()
	c.updates++
	if c.updates > MaxUpdates {
		first := !c.flooded
		c.flooded = true
		c.mu.Unlock()
		if first && c.h.Flood != nil {
			c.h.Flood()
		}
		return fmt.Errorf("session/update %d: %w", c.updates, ErrFlood)
	}
	c.mu.Unlock()
	for _, f := range c.Frames(n.Update) {
		c.h.Frame(f)
	}
	c.mu.Lock()
	c.handled++
	c.mu.Unlock()
	return nil
}

// caughtUp waits (at most a second) until the session/updates read before
// now have been handled: the SDK handles a request on its own goroutine,
// so a terminal/create can overtake the tool_call the agent sent just
// before it, which must be recorded first to be counted once.
func (c *Client) caughtUp() {
	target := int(c.read.Load())
	for i := 0; i < 1000; i++ {
		c.mu.Lock()
		done := c.handled >= target || c.flooded
		c.mu.Unlock()
		if done {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Frames maps one update to frames (see SessionUpdate).
func (c *Client) Frames(u acp.SessionUpdate) []*ipc.Frame {
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil && t.Text != "" {
			return []*ipc.Frame{{Type: ipc.TypeDelta, Text: t.Text}}
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		return c.toolCall(string(tc.ToolCallId), tc.Status, string(tc.Kind), tc.Title, tc.RawInput, tc.Locations, tc.Content, tc.RawOutput)
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		var st acp.ToolCallStatus
		if tu.Status != nil {
			st = *tu.Status
		}
		kind, title := "", ""
		if tu.Kind != nil {
			kind = string(*tu.Kind)
		}
		if tu.Title != nil {
			title = *tu.Title
		}
		return c.toolCall(string(tu.ToolCallId), st, kind, title, tu.RawInput, tu.Locations, tu.Content, tu.RawOutput)
	}
	return nil
}

func contentText(cs []acp.ToolCallContent) string {
	var b strings.Builder
	for _, c := range cs {
		switch {
		case c.Content != nil && c.Content.Content.Text != nil:
			b.WriteString(c.Content.Content.Text.Text)
		case c.Diff != nil:
			fmt.Fprintf(&b, "diff %s\n", c.Diff.Path)
		case c.Terminal != nil:
			fmt.Fprintf(&b, "terminal %s\n", c.Terminal.TerminalId)
		}
	}
	return b.String()
}

// cut bounds s to max bytes on a character boundary, valid UTF-8.
func cut(s string, max int) (string, bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s, false
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// Scope is where fs/* requests may reach in the view (spec: the README's
// "ACP agents under ctx"): reads under /workspace and /home/agent, writes
// under /workspace only. It is the ACP surface, not a list of what is
// protected: what inside it may be read or written is the view's to say
// (its read-only binds, hidden trees and placeholders, through View).
// /proc, /dev and the rest of the view stay out of reach: the daemon
// reads there with more privilege than the agent has.
func Scope(p string, write bool) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q: not absolute: %w", p, ErrOutsideView)
	}
	clean := path.Clean(p)
	under := func(root string) bool { return clean == root || strings.HasPrefix(clean, root+"/") }
	switch {
	case under("/workspace"):
		return clean, nil
	case write:
		return "", fmt.Errorf("path %q: %w", p, ErrReadOnly)
	case under("/home/agent"):
		return clean, nil
	}
	return "", fmt.Errorf("path %q: %w", p, ErrOutsideView)
}

// fsError maps a refused file request to a JSON-RPC error the way agents
// expect: a missing file, or a missing directory on the way (ENOENT,
// ENOTDIR), is ACP's resource-not-found (-32002), which agents take as
// "create it"; any other refusal is -32602 with a message that starts as
// Node's fs errors do ("EACCES: permission denied, open '/workspace/x'"),
// the form agents' error normalisers recognise. data.reason says why in
// ctx's words.
func fsError(p string, write bool, err error) error {
	data := map[string]any{"path": p, "error": err.Error()}
	code, words, reason := fsErrno(err)
	switch code {
	case "ENOENT":
		data["code"] = code
		return &acp.RequestError{Code: -32002, Message: fmt.Sprintf("Resource not found: ENOENT: no such file or directory, open '%s'", p), Data: data}
	case "":
		return acp.NewInternalError(data)
	}
	op := "open"
	if write && code == "EISDIR" {
		op = "write"
	}
	data["code"], data["reason"] = code, reason
	return &acp.RequestError{Code: -32602, Message: fmt.Sprintf("%s: %s, %s '%s'", code, words, op, p), Data: data}
}

// fsErrno names err as Node does (code and its words) and gives ctx's own
// reason; code "" for an unexpected error, "ENOENT" for not found.
func fsErrno(err error) (code, words, reason string) {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		return "ENOENT", "no such file or directory", "not found"
	case errors.Is(err, ErrOutsideView):
		return "EACCES", "permission denied", "reads are allowed only under /workspace and /home/agent"
	case errors.Is(err, ErrReadOnly):
		return "EROFS", "read-only file system", ErrReadOnly.Error()
	case errors.Is(err, unix.EROFS):
		return "EROFS", "read-only file system", "the agent's view is read-only there"
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return "EACCES", "permission denied", "permission denied in the agent's view"
	case errors.Is(err, viewfs.ErrSymlink), errors.Is(err, unix.ELOOP):
		return "ELOOP", "too many symbolic links encountered", "the path goes through a symlink: not followed"
	case errors.Is(err, unix.EISDIR):
		return "EISDIR", "illegal operation on a directory", "a directory, not a file"
	case errors.Is(err, viewfs.ErrNotRegular):
		return "EINVAL", "invalid argument", "not a regular file"
	case errors.Is(err, viewfs.ErrTooLarge):
		return "EFBIG", "file too large", fmt.Sprintf("file over %d bytes", MaxFileRead)
	case errors.Is(err, unix.ENOSPC):
		return "ENOSPC", "no space left on device", "no space left"
	case errors.Is(err, unix.EDQUOT):
		return "EDQUOT", "disk quota exceeded", "no space left"
	case errors.Is(err, viewfs.ErrGone):
		return "EIO", "i/o error", "the agent's sandbox is not running"
	}
	return "", "", ""
}

// ReadTextFile reads a file through the agent's own view (spec: the view
// is the one authority), bounded, with the ACP line and limit window.
func (c *Client) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	defer c.active()()
	vp, err := Scope(p.Path, false)
	if err != nil {
		return acp.ReadTextFileResponse{}, fsError(p.Path, false, err)
	}
	if c.h.View == nil {
		return acp.ReadTextFileResponse{}, fsError(p.Path, false, viewfs.ErrGone)
	}
	b, err := c.h.View.ReadFile(vp, MaxFileRead)
	if err != nil {
		return acp.ReadTextFileResponse{}, fsError(p.Path, false, err)
	}
	return acp.ReadTextFileResponse{Content: window(string(b), p.Line, p.Limit)}, nil
}

// window applies ACP's 1-based line and line limit.
func window(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	start := 0
	if line != nil && *line > 1 {
		start = *line - 1
	}
	if start > len(lines) {
		start = len(lines)
	}
	end := len(lines)
	if limit != nil && *limit >= 0 && start+*limit < end {
		end = start + *limit
	}
	return strings.Join(lines[start:end], "")
}

// WriteTextFile writes a file under /workspace through the agent's own
// view: what the view refuses (a read-only bind such as .git, a hidden
// tree, a placeholder) is refused with the host file untouched; the file
// is created 0644 or truncated, never through a symlink, never a FIFO.
func (c *Client) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	defer c.active()()
	vp, err := Scope(p.Path, true)
	if err != nil {
		return acp.WriteTextFileResponse{}, fsError(p.Path, true, err)
	}
	if vp == "/workspace" || len(p.Content) > MaxFileWrite {
		return acp.WriteTextFileResponse{}, acp.NewInvalidParams(map[string]any{"path": p.Path, "error": "not a file path, or content too large"})
	}
	if c.h.View == nil {
		return acp.WriteTextFileResponse{}, fsError(p.Path, true, viewfs.ErrGone)
	}
	if err := c.h.View.WriteFile(vp, []byte(p.Content)); err != nil {
		return acp.WriteTextFileResponse{}, fsError(p.Path, true, err)
	}
	return acp.WriteTextFileResponse{}, nil
}

// RequestPermission asks the run's approval path; only an allow-once
// option is ever chosen, and only when approved.
func (c *Client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	defer c.active()()
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	var allow, reject *acp.PermissionOption
	for i := range p.Options {
		switch p.Options[i].Kind {
		case acp.PermissionOptionKindAllowOnce:
			allow = &p.Options[i]
		case acp.PermissionOptionKindRejectOnce:
			reject = &p.Options[i]
		}
	}
	c.caughtUp()
	c.Flush() // the call asked about is recorded before the question
	if allow != nil && c.h.Approve != nil && c.h.Approve(ctx, string(p.ToolCall.ToolCallId), "acp", []string{title}) {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(allow.OptionId)}, nil
	}
	if reject != nil {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(reject.OptionId)}, nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}

func (c *Client) terms() (Terminals, error) {
	if c.h.Terminals == nil {
		return nil, acp.NewMethodNotFound("terminal/*: " + ErrNoTerminal.Error())
	}
	return c.h.Terminals, nil
}

// CreateTerminal is the run's sandboxed process start.
func (c *Client) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	defer c.active()()
	t, err := c.terms()
	if err != nil {
		return acp.CreateTerminalResponse{}, err
	}
	c.caughtUp()
	c.Flush() // the reported call this terminal backs is open before it (counted once)
	return t.Create(ctx, p)
}

// TerminalOutput reports a terminal's output so far.
func (c *Client) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	defer c.active()()
	t, err := c.terms()
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	return t.Output(ctx, p)
}

// WaitForTerminalExit waits for a terminal's process.
func (c *Client) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	defer c.active()()
	t, err := c.terms()
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	return t.Wait(ctx, p)
}

// KillTerminal kills a terminal's process.
func (c *Client) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	defer c.active()()
	t, err := c.terms()
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	return t.Kill(ctx, p)
}

// ReleaseTerminal frees a terminal.
func (c *Client) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	defer c.active()()
	t, err := c.terms()
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	return t.Release(ctx, p)
}

// Updates is the number of session/update notifications handled so far.
func (c *Client) Updates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates
}

// maxQueued is how many session/updates may wait in the SDK's queue (its
// capacity is 1024; past it the SDK closes the connection).
const maxQueued = 256

// Throttle wraps the agent's stdout so that an agent sending updates
// faster than they are handled is slowed down (its writes block on the
// pipe) instead of overflowing the SDK's notification queue, which would
// close the connection with no reason given: the run's own bound
// (MaxUpdates) then ends a flood with a clear error. The count is
// approximate (occurrences of "session/update" in what was read); each
// read waits at most 250ms for the queue to drain, so a miscount cannot
// stall the connection.
func (c *Client) Throttle(r io.Reader) io.Reader { return &throttle{r: r, c: c} }

type throttle struct {
	r    io.Reader
	c    *Client
	seen int
}

var updateMethod = []byte(`"session/update"`)

func (t *throttle) Read(p []byte) (int, error) {
	for i := 0; i < 250 && t.seen-t.c.Updates() >= maxQueued && !t.c.Flooded(); i++ {
		time.Sleep(time.Millisecond)
	}
	n, err := t.r.Read(p)
	k := bytes.Count(p[:n], updateMethod)
	t.seen += k
	t.c.read.Add(int64(k))
	return n, err
}
