package prompt

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingFS wraps the OS file system and counts opens and bytes read per path.
type countingFS struct {
	osFS
	mu    sync.Mutex
	opens map[string]int
	read  map[string]int64
}

func newCountingFS() *countingFS {
	return &countingFS{opens: map[string]int{}, read: map[string]int64{}}
}

func (c *countingFS) open(p string, nofollow bool) (io.ReadCloser, error) {
	f, err := c.osFS.open(p, nofollow)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.opens[p]++
	c.mu.Unlock()
	return &countingReader{ReadCloser: f, c: c, p: p}, nil
}

type countingReader struct {
	io.ReadCloser
	c *countingFS
	p string
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.c.mu.Lock()
	r.c.read[r.p] += int64(n)
	r.c.mu.Unlock()
	return n, err
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\nlicense: MIT\n---\n" + body
}

// fixture builds a CTX_ROOT-like tree and Inputs for an agent "coder" whose
// session cwd is /workspace/sub inside a git repository.
func fixture(t testing.TB) (Inputs, string) {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "ctx", "home", "1000")
	agentHome := filepath.Join(home, "agent", "coder")
	ctrl := filepath.Join(root, "ctx", "agent", "coder.d")
	ws := filepath.Join(root, "ws")
	write(t, filepath.Join(ctrl, "system.md"), "You are coder, a careful software engineer.\n")
	write(t, filepath.Join(home, "AGENTS.md"), "Answer in English.\n")
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(ws, "AGENTS.md"), "Run `make test` before you finish.\n")
	write(t, filepath.Join(ws, "sub", "AGENTS.md"), "This directory holds the parser; keep it pure.\n")
	write(t, filepath.Join(ws, ".agents", "skills", "go-fuzz", "SKILL.md"), skillMD("go-fuzz", "Write Go fuzz targets with seeds.", "# Body\nnever read\n"))
	write(t, filepath.Join(agentHome, "skills", "review", "SKILL.md"), skillMD("review", `"Review a diff: correctness, tests, style."`, "body"))
	write(t, filepath.Join(home, "skills", "pdf", "SKILL.md"), skillMD("pdf", "Extract text and tables from PDF files.", "body"))
	in := Inputs{
		ControlDir:  ctrl,
		Cwd:         filepath.Join(ws, "sub"),
		Workspace:   Dir{Host: ws, View: "/workspace"},
		AgentHome:   Dir{Host: agentHome, View: "/home/agent"},
		CtxHome:     Dir{Host: home, View: "/ctx/home/1000"},
		ToolContext: "bash: run a shell command (pinned)",
		History: []Message{
			{Role: "user", Content: "What does the parser do?"},
			{Role: "assistant", Content: "It reads the window control file."},
		},
		Input:        "Add a fuzz target.",
		Time:         time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		WindowTokens: 200000,
		WindowKnown:  true,
	}
	return in, root
}

func dump(r *Result) string {
	var b strings.Builder
	for _, m := range r.Messages() {
		b.WriteString("=== " + m.Role + " ===\n" + m.Content + "\n")
	}
	b.WriteString("=== hash ===\n" + r.Hash + "\n")
	return b.String()
}
