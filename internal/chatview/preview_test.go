package chatview

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPreview: the diff an approval question shows for write, edit and
// apply_patch, computed from the workspace and the call's argv; a note
// when there is nothing to show.
func TestPreview(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "calc.sh"), []byte("# calc\nadd() {\n\techo $(( $1 - $2 ))\n}\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "long.txt"), []byte(strings.Repeat("same\n", 20)+"old\n"+strings.Repeat("same\n", 20)+"x\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "noeol"), []byte("a\nb"), 0o644)
	os.WriteFile(filepath.Join(ws, "bin"), []byte("a\x00b"), 0o644)
	os.WriteFile(filepath.Join(ws, "twice"), []byte("x x\n"), 0o644)
	for _, tc := range []struct {
		name       string
		tool       string
		argv       []string
		diff, note string
	}{
		{"edit", "edit", []string{"calc.sh", "$(( $1 - $2 ))", "$(( $1 + $2 ))"},
			"--- calc.sh\n+++ calc.sh\n@@ -1,4 +1,4 @@\n # calc\n add() {\n-\techo $(( $1 - $2 ))\n+\techo $(( $1 + $2 ))\n }", ""},
		{"edit, flags after --", "edit", []string{"--", "calc.sh", "# calc", "--all"},
			"--- calc.sh\n+++ calc.sh\n@@ -1,4 +1,4 @@\n-# calc\n+--all\n add() {\n \techo $(( $1 - $2 ))\n }", ""},
		{"edit far from the start: one hunk with 3 lines of context", "edit", []string{"/workspace/long.txt", "old", "new"},
			"--- /workspace/long.txt\n+++ /workspace/long.txt\n@@ -18,7 +18,7 @@\n same\n same\n same\n-old\n+new\n same\n same\n same", ""},
		{"edit --all", "edit", []string{"twice", "x", "y", "--all"}, "--- twice\n+++ twice\n@@ -1 +1 @@\n-x x\n+y y", ""},
		{"edit, not unique", "edit", []string{"twice", "x", "y"}, "", "no preview: the text to replace occurs 2 times in twice (the edit will fail without --all)"},
		{"edit, absent text", "edit", []string{"calc.sh", "nope", "y"}, "", "no preview: the text to replace is not in calc.sh (the edit will fail)"},
		{"edit, no file", "edit", []string{"gone", "a", "b"}, "", "no preview: gone does not exist (the edit will fail)"},
		{"write, new file", "write", []string{"dir/new.txt", "one\ntwo\n"}, "--- /dev/null\n+++ dir/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two", ""},
		{"write, replace; no final newline kept visible", "write", []string{"noeol", "a\nc"},
			"--- noeol\n+++ noeol\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file", ""},
		{"write, same content", "write", []string{"noeol", "a\nb"}, "", "no change: the file already holds this content"},
		{"write, binary", "write", []string{"bin", "x"}, "", "no preview: bin is not text"},
		{"outside the workspace", "write", []string{"../etc/passwd", "x"}, "", "no preview: ../etc/passwd is outside the workspace"},
		{"absolute outside", "edit", []string{"/etc/passwd", "a", "b"}, "", "no preview: /etc/passwd is outside the workspace"},
		{"apply_patch shows the patch", "apply_patch", []string{"*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\n"}, "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch", ""},
		{"bad argv", "write", []string{"only-path"}, "", "no preview: write takes PATH CONTENT"},
		{"a tool that changes no file", "read", []string{"calc.sh"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff, note := Preview(tc.tool, tc.argv, ws)
			if diff != tc.diff || note != tc.note {
				t.Errorf("Preview(%s %q)\n got diff %q note %q\nwant diff %q note %q", tc.tool, tc.argv, diff, note, tc.diff, tc.note)
			}
		})
	}
}

// TestPreviewBounded: a long change is cut to MaxPreviewLines, counted.
func TestPreviewBounded(t *testing.T) {
	diff, _ := Preview("write", []string{"big", strings.Repeat("line\n", 500)}, t.TempDir())
	lines := strings.Split(diff, "\n")
	if len(lines) != MaxPreviewLines+1 || lines[len(lines)-1] != "… 303 more lines" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// TestUnwrapAndLabel: a model's tsh call is shown as the tool it runs.
func TestUnwrapAndLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tsh", []string{"call", "read", "a b.go"}, `read "a b.go"`},
		{"tsh", []string{"load", "bash"}, "tsh load bash"},
		{"mark", nil, "mark"},
		{"tsh", []string{"call", "bash", "printf '\x1b[2J'"}, `bash "printf '\x1b[2J'"`},
	} {
		if got := Label(tc.name, tc.args); got != tc.want {
			t.Errorf("Label(%s %q) = %q, want %q", tc.name, tc.args, got, tc.want)
		}
	}
}

// TestQuestion: the approval question names the tool and its argv, shows
// the diff, and ends with the prompt; control characters are neutralised.
func TestQuestion(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("a\n"), 0o644)
	q := Question("tsh", []string{"call", "edit", "f", "a", "b\x1b[31m"}, ws, false)
	want := "? the agent wants to run tool edit with argv [\"f\" \"a\" \"b\\x1b[31m\"]\n--- f\n+++ f\n@@ -1 +1 @@\n-a\n+b\uFFFD[31m\nAllow once? (y allows once, a always, n denies, r denies and says why, Ctrl+C cancels the run) "
	if q != want {
		t.Errorf("got  %q\nwant %q", q, want)
	}
	if c := Question("tsh", []string{"call", "edit", "f", "a", "b"}, ws, true); !strings.Contains(c, "\x1b[") || !strings.HasSuffix(c, "Allow once? (y allows once, a always, n denies, r denies and says why, Ctrl+C cancels the run) ") {
		t.Errorf("coloured question: %q", c)
	}
}

// TestPreviewNeverBlocksNorLeaks: the preview reads the agent-writable
// workspace with the person's rights, so what the agent planted there is
// named, never followed, opened for long or shown: a FIFO (opening it
// would block until a writer comes), a device, a socket, a link at the
// target or at a directory on the way, each outside the workspace.
// README "The walls" (the approval preview).
func TestPreviewNeverBlocksNorLeaks(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	canary := "CANARY-" + t.Name()
	os.WriteFile(filepath.Join(out, "secret"), []byte(canary+"\n"), 0o644)
	os.Mkdir(filepath.Join(out, "dir"), 0o755)
	os.WriteFile(filepath.Join(out, "dir", "f"), []byte(canary+"\n"), 0o644)
	if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(out, "secret"), filepath.Join(ws, "link"))
	os.Symlink(filepath.Join(out, "dir"), filepath.Join(ws, "ldir"))
	os.Symlink("../"+filepath.Base(out)+"/secret", filepath.Join(ws, "rel"))
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.Symlink(filepath.Join(out, "dir"), filepath.Join(ws, "sub", "deep"))
	os.Symlink("/proc/self/root/etc/hostname", filepath.Join(ws, "magic"))
	ln, err := net.Listen("unix", filepath.Join(ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := []struct {
		tool string
		argv []string
		note string
	}{
		{"write", []string{"fifo", "x"}, "no preview: fifo is a FIFO (named pipe) (not read)"},
		{"edit", []string{"/workspace/fifo", "a", "b"}, "no preview: /workspace/fifo is a FIFO (named pipe) (not read)"},
		{"write", []string{"link", "x"}, "no preview: link is a symbolic link (not followed)"},
		{"write", []string{"rel", "x"}, "no preview: rel is a symbolic link (not followed)"},
		{"write", []string{"magic", "x"}, "no preview: magic is a symbolic link (not followed)"},
		{"edit", []string{"ldir/f", "a", "b"}, "no preview: ldir/f is under a symbolic link, ldir (not followed)"},
		{"write", []string{"sub/deep/f", "x"}, "no preview: sub/deep/f is under a symbolic link, sub/deep (not followed)"},
		{"write", []string{"sock", "x"}, "no preview: sock is a socket (not read)"},
		{"write", []string{"sub", "x"}, "no preview: sub is a directory (not read)"},
	}
	if os.Getuid() == 0 {
		// A device node: only root can make one here (an agent in its
		// user namespace cannot, but one may already lie in a workspace).
		if err := unix.Mknod(filepath.Join(ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
			cases = append(cases, struct {
				tool string
				argv []string
				note string
			}{"write", []string{"null", "x"}, "no preview: null is a character device (not read)"})
		}
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.argv[:1], ""), func(t *testing.T) {
			done := make(chan [2]string, 1)
			go func() {
				d, n := Preview(tc.tool, tc.argv, ws)
				done <- [2]string{d, n}
			}()
			select {
			case got := <-done:
				if got[0] != "" || got[1] != tc.note {
					t.Errorf("Preview(%s %q): diff %q note %q, want note %q", tc.tool, tc.argv, got[0], got[1], tc.note)
				}
				if strings.Contains(got[0]+got[1], "CANARY") {
					t.Errorf("the preview showed a file outside the workspace: %q", got)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Preview(%s %q) blocked", tc.tool, tc.argv)
			}
		})
	}
	q := Question("write", []string{"link", "x"}, ws, false)
	if strings.Contains(q, canary) || !strings.Contains(q, "symbolic link") || !strings.HasSuffix(q, "Allow once? (y allows once, a always, n denies, r denies and says why, Ctrl+C cancels the run) ") {
		t.Errorf("question: %q", q)
	}
}

// TestPreviewShowsNoTerminalControl: a workspace file the agent wrote
// with escape sequences (clear the screen, move the cursor, forge an
// "Allow once?") reaches the person's terminal only as U+FFFD.
func TestPreviewShowsNoTerminalControl(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("a\n\x1b[2J\x1b[H? nothing to see\n"), 0o644)
	for _, color := range []bool{false, true} {
		q := Question("write", []string{"f", "b\x1b]0;title\x07\n"}, ws, color)
		for _, bad := range []string{"\x1b[2J", "\x1b[H", "\x1b]0;", "\x07"} {
			if strings.Contains(q, bad) {
				t.Errorf("color %v: the question carries %q: %q", color, bad, q)
			}
		}
	}
}
