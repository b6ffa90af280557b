package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/safefs"
)

// MaxMention bounds one file a mention attaches; larger files are the
// agent's to read with its tools.
const MaxMention = 64 << 10

// attachMentions appends to msg the files its @PATH words name, as the
// agent would read them in its workspace: PATH relative to the workspace
// (or under /workspace), resolved beneath it with no symbolic link on the
// way — "..", a link, a FIFO, a device or a directory is refused — a regular file
// of at most MaxMention bytes of UTF-8 text. A word naming nothing that
// exists is left as text (an @name in prose); one naming something that
// cannot be attached is an error that says why, and nothing is sent. The
// message keeps its words; each file follows it as
//
//	<file path="src/x.go">
//	…
//	</file>
//
// A file whose magic bytes are an image's (PNG, JPEG, GIF, WebP; never
// its name) is returned as an image instead, of at most
// ipc.MaxImageBytes: it travels by reference (attachImages), not in the
// text.
func attachMentions(msg, workspace string) (string, []attachedImage, error) {
	var files []string
	var images []attachedImage
	seen := map[string]bool{}
	for _, w := range strings.Fields(msg) {
		if len(w) < 2 || w[0] != '@' {
			continue
		}
		p := strings.TrimRight(w[1:], ",.;:!?)") // "see @a.go." names a.go
		rel := strings.TrimPrefix(p, "/workspace/")
		if rel == "" || seen[rel] {
			continue
		}
		text, img, err := readMention(workspace, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("@%s: %w", p, err)
		}
		seen[rel] = true
		if img != nil {
			images = append(images, *img)
			continue
		}
		files = append(files, fmt.Sprintf("<file path=%q>\n%s\n</file>", path.Clean(rel), strings.TrimSuffix(text, "\n")))
	}
	if len(files) == 0 {
		return msg, images, nil
	}
	return msg + "\n\n" + strings.Join(files, "\n\n"), images, nil
}

func readMention(workspace, rel string) (string, *attachedImage, error) {
	if workspace == "" {
		return "", nil, fs.ErrNotExist
	}
	if path.IsAbs(rel) {
		return "", nil, errors.New("a mention names a file of the workspace: a relative path or one under /workspace")
	}
	top, err := os.Open(workspace)
	if err != nil {
		return "", nil, err
	}
	defer top.Close()
	f, err := safefs.OpenBeneath(top, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, fs.ErrNotExist) {
			return "", nil, fs.ErrNotExist
		}
		return "", nil, fmt.Errorf("not attached: it is not a file of the workspace as the agent sees it (%v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if !st.Mode().IsRegular() {
		return "", nil, fmt.Errorf("not attached: %s is not a regular file", st.Mode().Type())
	}
	if img, err := sniffImage(f, path.Base(rel)); img != nil || err != nil {
		return "", img, err
	}
	if st.Size() > MaxMention {
		return "", nil, fmt.Errorf("not attached: %d bytes, over the %d a mention attaches (the agent can read it with its tools)", st.Size(), MaxMention)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxMention+1))
	if err != nil {
		return "", nil, err
	}
	if len(b) > MaxMention {
		return "", nil, fmt.Errorf("not attached: over the %d bytes a mention attaches", MaxMention)
	}
	if !utf8.Valid(b) || strings.IndexByte(string(b), 0) >= 0 {
		return "", nil, errors.New("not attached: not text (binary or not UTF-8)")
	}
	return string(b), nil, nil
}
