package acpclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/cortexfs/ctx/internal/viewfs"
	"github.com/cortexfs/ctx/ipc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// view is a tree with /workspace and /home/agent, opened as a view root.
func view(t *testing.T) (*viewfs.Root, string, string) {
	top := t.TempDir()
	ws, home := filepath.Join(top, "workspace"), filepath.Join(top, "home", "agent")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := viewfs.At(top)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, ws, home
}

// The fs/* scope (docs/walls.md, "ACP file requests"): reads under /workspace and
// /home/agent, writes under /workspace only.
func TestScope(t *testing.T) {
	cases := []struct {
		p     string
		write bool
		clean string
		err   error
	}{
		{"/workspace/a.txt", true, "/workspace/a.txt", nil},
		{"/workspace/d/../a.txt", true, "/workspace/a.txt", nil},
		{"/workspace/../etc/passwd", false, "", ErrOutsideView},
		{"/workspace/../etc/passwd", true, "", ErrReadOnly},
		{"/home/agent/x", false, "/home/agent/x", nil},
		{"/home/agent/x", true, "", ErrReadOnly},
		{"/etc/passwd", false, "", ErrOutsideView},
		{"/proc/self/root/etc/passwd", false, "", ErrOutsideView},
		{"relative", false, "", ErrOutsideView},
		{"/workspacex/a", false, "", ErrOutsideView},
	}
	for _, tc := range cases {
		got, err := Scope(tc.p, tc.write)
		if !errors.Is(err, tc.err) || (err == nil && got != tc.clean) {
			t.Errorf("%s write=%v: %q %v", tc.p, tc.write, got, err)
		}
	}
}

func FuzzScope(f *testing.F) {
	for _, s := range []string{"/workspace/a", "/workspace/../x", "//workspace//a/./b", "/home/agent"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, p string, write bool) {
		got, err := Scope(p, write)
		if err != nil {
			return
		}
		if strings.Contains(got, "/../") || strings.HasSuffix(got, "/..") {
			t.Fatalf("%q → %q not clean", p, got)
		}
		if !(got == "/workspace" || strings.HasPrefix(got, "/workspace/")) && (write || !(got == "/home/agent" || strings.HasPrefix(got, "/home/agent/"))) {
			t.Fatalf("%q → %q out of scope (write=%v)", p, got, write)
		}
	})
}

// pair connects a Go SDK agent-side connection to a Client in process.
func pair(t *testing.T, c *Client) *acp.AgentSideConnection {
	ar, cw := ioPipe()
	cr, aw := ioPipe()
	asc := acp.NewAgentSideConnection(nopAgent{}, aw, ar)
	// Throttle, as the run does: without it a fast flood can overflow the
	// SDK's notification queue (1024), which closes the connection and
	// leaves the writer blocked on the pipe.
	csc := acp.NewClientSideConnection(c, cw, c.Throttle(cr))
	t.Cleanup(func() {
		cw.Close()
		aw.Close()
		<-asc.Done()
		<-csc.Done()
	})
	return asc
}

// spec: an ACP agent's file requests, updates and permission
// requests through the SDK: a read and a write inside the workspace work, a
// write outside is refused, updates become frames, a flood is cut off.
func TestClientThroughSDK(t *testing.T) {
	rs, ws, _ := view(t)
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	var mu sync.Mutex
	var frames []*ipc.Frame
	c := New(Host{View: rs, Frame: func(f *ipc.Frame) { mu.Lock(); frames = append(frames, f); mu.Unlock() },
		Approve: func(ctx context.Context, id, name string, args []string) bool { return id == "ok" }})
	a := pair(t, c)
	ctx := context.Background()
	line, limit := 2, 1
	r, err := a.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: "/workspace/in.txt", Line: &line, Limit: &limit})
	if err != nil || r.Content != "two\n" {
		t.Fatalf("read: %q %v", r.Content, err)
	}
	if _, err := a.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: "/etc/passwd"}); err == nil {
		t.Fatal("read outside the view")
	}
	var re *acp.RequestError
	if _, err := a.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s", Path: "/workspace/missing.txt"}); !errors.As(err, &re) || re.Code != -32002 {
		t.Fatalf("missing file: %v, want resource-not-found -32002", err)
	}
	if _, err := a.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: "s", Path: "/workspace/out.txt", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "hi" {
		t.Fatalf("wrote %q", b)
	}
	for _, p := range []string{"/home/agent/x", "/tmp/x", "/workspace/../x"} {
		if _, err := a.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: "s", Path: p, Content: "no"}); err == nil {
			t.Errorf("write to %s allowed", p)
		}
	}
	os.Symlink("/tmp", filepath.Join(ws, "link"))
	if _, err := a.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: "s", Path: "/workspace/link/x", Content: "no"}); err == nil {
		t.Error("write through a symlink allowed")
	}
	perm := func(id string) string {
		resp, err := a.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: "s", ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(id)},
			Options: []acp.PermissionOption{{Kind: acp.PermissionOptionKindAllowOnce, OptionId: "a", Name: "a"}, {Kind: acp.PermissionOptionKindRejectOnce, OptionId: "r", Name: "r"}}})
		if err != nil || resp.Outcome.Selected == nil {
			t.Fatalf("permission: %v", err)
		}
		return string(resp.Outcome.Selected.OptionId)
	}
	if perm("ok") != "a" || perm("no") != "r" {
		t.Error("permission mapping")
	}
	if _, err := a.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s", Command: "ls"}); err == nil {
		t.Error("terminal without a host")
	}
	send := func(u acp.SessionUpdate) {
		_ = a.SessionUpdate(ctx, acp.SessionNotification{SessionId: "s", Update: u})
	}
	send(acp.UpdateAgentMessageText("hello"))
	send(acp.StartToolCall("t1", "read in.txt", acp.WithStartKind(acp.ToolKindRead)))
	send(acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted), acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("two"))})))
	send(acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted))) // a second end is ignored
	// Notifications are processed in order, on their own goroutine.
	eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(frames) >= 3 })
	mu.Lock()
	var got []string
	for _, f := range frames {
		got = append(got, f.Type+":"+f.Text+f.Content)
	}
	mu.Unlock()
	if strings.Join(got, ",") != "delta:hello,tool_call:,tool_result:two" {
		t.Errorf("frames %v", got)
	}
	for i := 0; i < MaxUpdates+5; i++ {
		send(acp.UpdateAgentThoughtText("x"))
	}
	eventually(t, c.Flooded)
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

// TestThrottle: a reader full of updates waits (bounded) for the client
// to handle them instead of racing ahead of the SDK's queue.
func TestThrottle(t *testing.T) {
	c := New(Host{Frame: func(*ipc.Frame) {}})
	line := `{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n"
	r := c.Throttle(strings.NewReader(strings.Repeat(line, maxQueued)))
	buf := make([]byte, 1<<20)
	if n, _ := r.Read(buf); n == 0 {
		t.Fatal("first read returned nothing")
	}
	start := time.Now()
	_, _ = r.Read(buf) // maxQueued unhandled: waits its bound, then goes on
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("second read waited %v, want about 250ms", d)
	}
	for range maxQueued {
		_ = c.SessionUpdate(context.Background(), acp.SessionNotification{})
	}
	start = time.Now()
	_, _ = r.Read(buf)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("read after the queue drained waited %v", d)
	}
}
