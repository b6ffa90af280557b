package viewfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortexfs/ctx/internal/workspace"
)

// tree is a view root with /workspace, a host file outside it, a symlink
// to it, a FIFO and a regular file.
func tree(t *testing.T) (*Root, string, string) {
	top, outside := t.TempDir(), t.TempDir()
	ws := filepath.Join(top, "workspace")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600)
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("hello"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link"))
	os.Symlink(outside, filepath.Join(ws, "dirlink"))
	os.Symlink("/proc/self/root", filepath.Join(ws, "magic"))
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := At(top)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, ws, outside
}

// The view root is the only root: ".." and absolute paths stay inside it,
// no symlink is followed, a FIFO is refused without blocking, reads are
// bounded, a missing file is fs.ErrNotExist.
func TestRootConfines(t *testing.T) {
	r, ws, outside := tree(t)
	if b, err := r.ReadFile("/workspace/in.txt", 100); err != nil || string(b) != "hello" {
		t.Fatalf("read: %q %v", b, err)
	}
	if _, err := r.ReadFile("/workspace/in.txt", 2); !errors.Is(err, ErrTooLarge) {
		t.Errorf("bound: %v", err)
	}
	if _, err := r.ReadFile("/workspace/none", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	for _, p := range []string{"/workspace/link", "/workspace/dirlink/secret", "/workspace/magic" + outside + "/secret"} {
		if b, err := r.ReadFile(p, 100); !errors.Is(err, ErrSymlink) {
			t.Errorf("read %s: %q %v", p, b, err)
		}
		if err := r.WriteFile(p, []byte("x")); !errors.Is(err, ErrSymlink) {
			t.Errorf("write %s: %v", p, err)
		}
	}
	if _, err := r.ReadFile("/../../.."+outside+"/secret", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".. left the root: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := r.ReadFile("/workspace/fifo", 100); !errors.Is(err, ErrNotRegular) {
			t.Errorf("fifo read: %v", err)
		}
		if err := r.WriteFile("/workspace/fifo", []byte("x")); !errors.Is(err, ErrNotRegular) {
			t.Errorf("fifo write: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO blocked")
	}
	if err := r.WriteFile("/workspace/out.txt", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("/workspace/in.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "in.txt")); string(b) != "hi" {
		t.Errorf("truncated write: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "host secret" {
		t.Errorf("host file changed: %q", b)
	}
}

// Close waits for requests in flight and refuses later ones.
func TestRootClose(t *testing.T) {
	r, _, _ := tree(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if _, err := r.ReadFile("/workspace/in.txt", 100); err != nil && !errors.Is(err, ErrGone) {
					t.Error(err)
					return
				}
			}
		}()
	}
	r.Close()
	wg.Wait()
	if _, err := r.ReadFile("/workspace/in.txt", 100); !errors.Is(err, ErrGone) {
		t.Errorf("after close: %v", err)
	}
}

// A pid that is not bwrap's child gives no root.
func TestOpenRootNeedsTheChild(t *testing.T) {
	if _, err := New(os.Getpid()).ReadFile("/x", 1); !errors.Is(err, ErrGone) {
		t.Errorf("no child: %v", err)
	}
}

// An absent source (what a view binds over an absent protected name) reads
// as a missing file through the view, by identity: the empty file and the
// empty directory alike; another empty file still reads as empty.
func TestAbsentSourceIsNotExist(t *testing.T) {
	run := t.TempDir()
	for _, name := range []string{".envrc", ".claude", ".mcp.json"} {
		f, _, err := workspace.AbsentSource(run, name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	os.WriteFile(filepath.Join(run, "absent", "other"), nil, 0o644)
	r, err := At(filepath.Join(run, "absent"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range []string{"/file", "/dir", "/mcp.json"} {
		if _, err := r.ReadFile(p, 1<<10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read %s: %v, want not exist", p, err)
		}
	}
	if b, err := r.ReadFile("/other", 1<<10); err != nil || len(b) != 0 {
		t.Errorf("read /other: %q %v", b, err)
	}
}
