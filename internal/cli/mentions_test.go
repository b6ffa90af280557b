package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAttachMentions: @PATH attaches a workspace file as the agent sees
// it; a word naming nothing stays text; what cannot be attached is refused
// with the reason, never half-sent.
func TestAttachMentions(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("CANARY\n"), 0o600)
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.WriteFile(filepath.Join(ws, "src", "a.go"), []byte("package a\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "big"), []byte(strings.Repeat("x", MaxMention+1)), 0o644)
	os.WriteFile(filepath.Join(ws, "bin"), []byte{0x7f, 'E', 'L', 'F', 0, 1}, 0o644)
	syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "link"))
	for _, tc := range []struct {
		msg, want, err string
	}{
		{"see @src/a.go.", "see @src/a.go.\n\n<file path=\"src/a.go\">\npackage a\n</file>", ""},
		{"@/workspace/src/a.go and @src/a.go", "@/workspace/src/a.go and @src/a.go\n\n<file path=\"src/a.go\">\npackage a\n</file>", ""},
		{"ask @nobody, mail a@b.com", "ask @nobody, mail a@b.com", ""},
		{"@big", "", "over the 65536"},
		{"@bin", "", "not text"},
		{"@fifo", "", "not a regular file"},
		{"@link", "", "not a file of the workspace"},
		{"@src", "", "not a regular file"},
		{"@../" + filepath.Base(filepath.Dir(outside)) + "/secret", "", "not a file of the workspace"},
		{"@/etc/passwd", "", "relative path"},
	} {
		got, _, err := attachMentions(tc.msg, ws)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %q, %v; want an error with %q", tc.msg, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %q, %v\nwant %q", tc.msg, got, err, tc.want)
		}
		if strings.Contains(got, "CANARY") {
			t.Errorf("%q: a file outside the workspace attached", tc.msg)
		}
	}
}
