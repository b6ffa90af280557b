package acpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/viewfs"
	"github.com/cortexfs/ctx/ipc"
)

// TestFSError: a missing file or a missing directory on the way is
// resource-not-found (-32002); every other refusal starts the way Node's
// fs errors do, which agents' error normalisers parse.
func TestFSError(t *testing.T) {
	wrap := func(e error) error { return fmt.Errorf("open beneath: %w", e) }
	cases := []struct {
		err   error
		write bool
		code  int
		msg   string
	}{
		{fs.ErrNotExist, false, -32002, "ENOENT: no such file or directory, open '/workspace/x'"},
		{wrap(unix.ENOENT), false, -32002, "ENOENT: no such file or directory, open '/workspace/x'"},
		{wrap(unix.ENOTDIR), false, -32002, "ENOENT: no such file or directory, open '/workspace/x'"},
		{wrap(unix.ENOENT), true, -32002, "ENOENT"},
		{wrap(unix.EACCES), false, -32602, "EACCES: permission denied, open '/workspace/x'"},
		{wrap(unix.EPERM), true, -32602, "EACCES: permission denied, open '/workspace/x'"},
		{wrap(unix.EROFS), true, -32602, "EROFS: read-only file system, open '/workspace/x'"},
		{ErrReadOnly, true, -32602, "EROFS: read-only file system, open '/workspace/x'"},
		{ErrOutsideView, false, -32602, "EACCES: permission denied, open '/workspace/x'"},
		{wrap(unix.EISDIR), false, -32602, "EISDIR: illegal operation on a directory, open '/workspace/x'"},
		{wrap(unix.EISDIR), true, -32602, "EISDIR: illegal operation on a directory, write '/workspace/x'"},
		{wrap(viewfs.ErrSymlink), false, -32602, "ELOOP: "},
		{wrap(unix.ELOOP), false, -32602, "ELOOP: "},
		{viewfs.ErrNotRegular, false, -32602, "EINVAL: "},
		{viewfs.ErrTooLarge, false, -32602, "EFBIG: file too large"},
		{wrap(unix.ENOSPC), true, -32602, "ENOSPC: no space left on device"},
		{wrap(unix.EDQUOT), true, -32602, "EDQUOT: "},
		{viewfs.ErrGone, false, -32602, "EIO: "},
		{errors.New("surprise"), false, -32603, ""},
	}
	for _, c := range cases {
		var re *acp.RequestError
		if err := fsError("/workspace/x", c.write, c.err); !errors.As(err, &re) || re.Code != c.code || !strings.HasPrefix(re.Message, c.msg) && !strings.Contains(re.Message, c.msg) {
			t.Errorf("fsError(%v, write=%v) = %v, want code %d and %q", c.err, c.write, err, c.code, c.msg)
		}
	}
	// Node's form is the message's start for every errno but not-found.
	var re *acp.RequestError
	errors.As(fsError("/workspace/x", false, unix.EACCES), &re)
	if !strings.HasPrefix(re.Message, "EACCES: ") {
		t.Errorf("message %q", re.Message)
	}
}

// TestToolCallFrames: what an agent says of a call it runs itself reaches
// the tool_call frame (command, paths, rawInput) and the tool_result
// (content, or rawOutput when content is empty); a pending call with no
// input yet is recorded once it says more.
func TestToolCallFrames(t *testing.T) {
	var raw = func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	st := func(s acp.ToolCallStatus) *acp.ToolCallStatus { return &s }
	kind := acp.ToolKindExecute
	cases := []struct {
		name    string
		updates []acp.SessionUpdate
		want    []string // type|args|input|content
	}{
		{"claude bash", []acp.SessionUpdate{
			{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "b1", Title: "`ls -la`", Kind: acp.ToolKindExecute, Status: acp.ToolCallStatusPending, RawInput: raw(`{"command":"ls -la","description":"list"}`)}},
			{ToolCallUpdate: &acp.SessionToolCallUpdate{ToolCallId: "b1", Status: st(acp.ToolCallStatusCompleted), RawOutput: raw(`[{"type":"text","text":"a.txt\nb.txt"}]`)}},
		}, []string{`tool_call|execute,` + "`ls -la`" + `,ls -la|{"command":"ls -la","description":"list"}|`, "tool_result|||a.txt\nb.txt"}},
		{"opencode streams input", []acp.SessionUpdate{
			{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "o1", Title: "bash", Kind: acp.ToolKindExecute, Status: acp.ToolCallStatusPending, RawInput: raw(`{}`)}},
			{ToolCallUpdate: &acp.SessionToolCallUpdate{ToolCallId: "o1", Status: st(acp.ToolCallStatusInProgress), Kind: &kind, RawInput: raw(`{"command":"echo hi"}`)}},
			{ToolCallUpdate: &acp.SessionToolCallUpdate{ToolCallId: "o1", Status: st(acp.ToolCallStatusCompleted), RawOutput: raw(`{"output":"hi\n","metadata":{"exit":0}}`)}},
		}, []string{`tool_call|execute,bash,echo hi|{"command":"echo hi"}|`, "tool_result|||hi\n"}},
		{"read with locations", []acp.SessionUpdate{
			{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "r1", Title: "Read", Kind: acp.ToolKindRead, Status: acp.ToolCallStatusPending,
				RawInput: raw(`{"file_path":"/workspace/a.go"}`), Locations: []acp.ToolCallLocation{{Path: "/workspace/a.go"}, {Path: "/workspace/b.go"}}}},
			{ToolCallUpdate: &acp.SessionToolCallUpdate{ToolCallId: "r1", Status: st(acp.ToolCallStatusFailed),
				Content: []acp.ToolCallContent{acp.ToolContent(acp.TextBlock("boom"))}, RawOutput: raw(`"ignored"`)}},
		}, []string{`tool_call|read,Read,/workspace/a.go,/workspace/b.go|{"file_path":"/workspace/a.go"}|`, "tool_result|||boom"}},
		{"stdout and stderr", []acp.SessionUpdate{
			{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "s1", Title: "sh", Status: acp.ToolCallStatusInProgress, RawInput: raw(`{"command":["sh","-c","x"]}`)}},
			{ToolCallUpdate: &acp.SessionToolCallUpdate{ToolCallId: "s1", Status: st(acp.ToolCallStatusFailed), RawOutput: raw(`{"stdout":"out","stderr":"err","exitCode":2}`)}},
		}, []string{`tool_call|other,sh,sh -c x|{"command":["sh","-c","x"]}|`, "tool_result|||out\nerr"}},
		{"only an exit code", []acp.SessionUpdate{
			{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "e1", Title: "t", Kind: acp.ToolKindExecute, Status: acp.ToolCallStatusCompleted, RawOutput: raw(`{"exitCode":0}`)}},
		}, []string{`tool_call|execute,t||`, "tool_result|||exit code 0"}},
		{"pending, nothing said", []acp.SessionUpdate{
			{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "p1", Title: "Terminal", Kind: acp.ToolKindExecute, Status: acp.ToolCallStatusPending}},
		}, nil},
	}
	for _, c := range cases {
		cl := New(Host{Frame: func(*ipc.Frame) {}})
		var got []string
		for _, u := range c.updates {
			for _, f := range cl.Frames(u) {
				got = append(got, f.Type+"|"+strings.Join(f.Args, ",")+"|"+f.Input+"|"+f.Content)
			}
		}
		if strings.Join(got, "\n~\n") != strings.Join(c.want, "\n~\n") {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// Flush records a call that never said more, once.
	var flushed []*ipc.Frame
	cl := New(Host{Frame: func(f *ipc.Frame) { flushed = append(flushed, f) }})
	cl.Frames(acp.SessionUpdate{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "p1", Title: "Terminal", Kind: acp.ToolKindExecute, Status: acp.ToolCallStatusPending}})
	cl.Flush()
	cl.Flush()
	if len(flushed) != 1 || flushed[0].CallID != "p1" || strings.Join(flushed[0].Args, ",") != "execute,Terminal" {
		t.Errorf("flushed %v", flushed)
	}
	// Details are bounded.
	long := strings.Repeat("x", 5000)
	fs := New(Host{}).Frames(acp.SessionUpdate{ToolCall: &acp.SessionUpdateToolCall{ToolCallId: "l", Status: acp.ToolCallStatusInProgress, RawInput: map[string]any{"command": long, "blob": long}}})
	if len(fs) != 1 || len(fs[0].Args[2]) != MaxArg || len(fs[0].Input) != MaxRawInput {
		t.Errorf("bounds: args %d, input %d", len(fs[0].Args[2]), len(fs[0].Input))
	}
}

// FuzzOutputText: any rawOutput JSON maps to valid text without panicking.
func FuzzOutputText(f *testing.F) {
	for _, s := range []string{`"x"`, `[{"type":"text","text":"a"}]`, `{"stdout":"o","stderr":"e"}`, `{"exitCode":1}`, `null`, `[[[]]]`, `{"output":{"text":"deep"}}`, `3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		s := outputText(v)
		if v == nil && s != "" {
			t.Fatalf("nil gave %q", s)
		}
	})
}
