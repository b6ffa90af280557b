package stdtool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// newFileMode is the mode of a file a tool creates.
const newFileMode fs.FileMode = 0o644

func init() {
	register(&Tool{
		Name:  "write",
		Usage: "write PATH CONTENT",
		Min:   2, Max: 2,
		Meta: Meta{Description: `Create a file, or replace all of it, with CONTENT exactly; missing parent directories are created.
argv: write PATH CONTENT — CONTENT is one argument holding the whole text, newlines included.
example: write notes/todo.md "# TODO\n- ship it\n" (the \n are real newlines)
CONTENT is written byte for byte: end it with a newline if the file should have one; it is not converted to the old file's line endings. The file is replaced atomically and keeps its mode (new files: 0644). To change part of a file use edit or apply_patch. A directory, a special file or a symlink that leads out of the workspace is refused.`},
		Run: runWrite,
	})
}

func runWrite(_ context.Context, a *Args, out *Output) error {
	shown, content := a.Pos[0], a.Pos[1]
	abs, err := Abs(shown)
	if err != nil {
		return err
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return Failf("%s is a directory; give the path of a file", shown)
	}
	target, err := CheckWritable(abs)
	if err != nil {
		return err
	}
	existed, wasCRLF := false, false
	switch st, err := os.Stat(target); {
	case err == nil:
		if st.IsDir() {
			return Failf("%s is a directory; give the path of a file", shown)
		}
		if !st.Mode().IsRegular() {
			return Failf("%s is not a regular file but %s; write replaces regular files only", shown, fileKind(st.Mode()))
		}
		existed = true
		wasCRLF = headHasCRLF(target)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return pathErr("write", shown, err)
	}
	if err := WriteAtomic(target, []byte(content), newFileMode); err != nil {
		var f *Failure
		if errors.As(err, &f) {
			return err
		}
		return pathErr("write", shown, err)
	}
	lines := textLines(content)
	how := "new file"
	if existed {
		how = "replaced"
	}
	out.Printf("wrote %d %s (%d %s) to %s (%s)\n", lines, plural(lines, "line"), len(content), plural(len(content), "byte"), shown, how)
	if content != "" && !strings.HasSuffix(content, "\n") {
		out.Printf("(CONTENT does not end with a newline, so neither does the file)\n")
	}
	if wasCRLF && strings.Contains(content, "\n") && !strings.Contains(content, "\r\n") {
		out.Printf("(the old file had CRLF line endings; CONTENT has LF ones and was written as given)\n")
	}
	return nil
}

// textLines counts the lines of s: a last line without a newline counts.
func textLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// headHasCRLF reports whether the file's first bytes hold a CRLF.
func headHasCRLF(path string) bool {
	f, _, err := openRegular(path, path, "read")
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, SniffLen)
	n, _ := io.ReadFull(f, head)
	return bytes.Contains(head[:n], []byte("\r\n"))
}

// fmtCount is "N word(s)".
func fmtCount[N int | int64](n N, word string) string {
	return fmt.Sprintf("%d %s", n, plural(n, word))
}
