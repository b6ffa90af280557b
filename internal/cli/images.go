package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/imageblob"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/ipc"
)

// Image input. An image a message attaches — an @PATH mention of a
// workspace file whose magic bytes are an image's, or the absolute path of
// an image pasted into the message (a terminal pastes a dragged file so)
// — is copied by the client into the session's blob store
// (SESSION_DIR/blobs/<sha256>) and sent as a reference (ipc.Image); the
// message keeps its words. The daemon reads the blob back when it builds
// a model's request; events.jsonl holds only the reference.

// attachedImage is an image read for a message, not stored yet.
type attachedImage struct {
	Name      string // the file's base name
	MediaType string // sniffed from its bytes
	Data      []byte
}

// sniffImage reads f as an image when its first bytes are an image's
// magic: the image (at most ipc.MaxImageBytes, else an error naming the
// size and the bound), or nil and no error when f is not an image.
func sniffImage(f *os.File, name string) (*attachedImage, error) {
	var hdr [16]byte
	n, err := f.ReadAt(hdr[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if imageblob.Sniff(hdr[:n]) == "" {
		return nil, nil
	}
	b, mt, err := imageblob.ReadOpen(f)
	if err != nil {
		return nil, fmt.Errorf("image not attached: %w", err)
	}
	return &attachedImage{Name: imageName(name), MediaType: mt, Data: b}, nil
}

// imageName is a base name an image reference accepts: control
// characters replaced, at most ipc.MaxImageName bytes.
func imageName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '/' {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(filepath.Base(name), "_"))
	for len(name) > ipc.MaxImageName {
		_, size := lastRune(name)
		name = name[:len(name)-size]
	}
	if name == "" || name == "." || name == ".." {
		name = "image"
	}
	return name
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, 1
}

// pastedImages returns the images whose absolute paths were pasted into
// msg (see pastedPaths). The read is the person's own client acting for
// them, so the file may be outside the workspace; still its last
// component is never a symbolic link (refused, with the reason, when it
// links to an image), it is a regular file, an image by its magic bytes,
// at most ipc.MaxImageBytes. A path naming nothing, or a file that is not
// an image, is left as text.
func pastedImages(msg string) ([]attachedImage, error) {
	var out []attachedImage
	seen := map[string]bool{}
	for _, p := range pastedPaths(msg) {
		if seen[p] {
			continue
		}
		img, err := readPasted(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if img != nil {
			seen[p] = true
			out = append(out, *img)
		}
	}
	return out, nil
}

func readPasted(p string) (*attachedImage, error) {
	f, _, err := safefs.OpenRegular(p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, safefs.ErrNotRegular):
		return nil, nil // prose, or a directory named in it
	case errors.Is(err, unix.ELOOP):
		// A link: refused when it leads to an image, else prose.
		// Opened without blocking (a link to a FIFO must not hang the
		// chat), its target read only when it is a regular file.
		if t, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			var hdr [16]byte
			n := 0
			if st, err := t.Stat(); err == nil && st.Mode().IsRegular() {
				n, _ = t.ReadAt(hdr[:], 0)
			}
			t.Close()
			if imageblob.Sniff(hdr[:n]) != "" {
				return nil, errors.New("image not attached: a symbolic link; paste the file it links to")
			}
		}
		return nil, nil
	case err != nil:
		return nil, nil // unreadable: not ours to attach
	}
	defer f.Close()
	return sniffImage(f, p)
}

// pastedPaths finds the absolute paths a terminal pastes for dragged
// files: a word starting with "/" (its "\ " and other backslash escapes
// undone), or one in single quotes (taken literally) or double quotes
// (\" and \\ undone). A bare word ending in punctuation also yields the
// path without it ("see /tmp/a.png." names /tmp/a.png).
func pastedPaths(msg string) []string {
	var out []string
	i := 0
	for i < len(msg) {
		if msg[i] == ' ' || msg[i] == '\t' || msg[i] == '\n' || msg[i] == '\r' {
			i++
			continue
		}
		if i > 0 && !isSpace(msg[i-1]) {
			i++
			continue
		}
		switch q := msg[i]; q {
		case '\'', '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(msg) && msg[j] != q; j++ {
				if q == '"' && msg[j] == '\\' && j+1 < len(msg) && (msg[j+1] == '"' || msg[j+1] == '\\') {
					j++
				}
				b.WriteByte(msg[j])
			}
			if j < len(msg) && strings.HasPrefix(b.String(), "/") {
				out = append(out, b.String())
			}
			i = j + 1
		case '/':
			var b strings.Builder
			j := i
			for ; j < len(msg) && !isSpace(msg[j]); j++ {
				if msg[j] == '\\' && j+1 < len(msg) {
					j++
				}
				b.WriteByte(msg[j])
			}
			p := b.String()
			out = append(out, p)
			if t := strings.TrimRight(p, ",.;:!?)"); t != p && t != "" {
				out = append(out, t)
			}
			i = j
		default:
			for i < len(msg) && !isSpace(msg[i]) {
				i++
			}
		}
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// attachImages gathers a message's images — its @PATH mentions that are
// images (given) and its pasted image paths — at most ipc.MaxImages.
func attachImages(msg string, mentioned []attachedImage) ([]attachedImage, error) {
	pasted, err := pastedImages(msg)
	if err != nil {
		return nil, err
	}
	all := append(append([]attachedImage(nil), mentioned...), pasted...)
	if len(all) > ipc.MaxImages {
		return nil, fmt.Errorf("%d images: a message attaches at most %d", len(all), ipc.MaxImages)
	}
	return all, nil
}

// storeImages copies the images into the session's blob store and returns
// the references the send carries.
func storeImages(l layout.Layout, agent, scope, session string, ims []attachedImage) ([]ipc.Image, error) {
	if len(ims) == 0 {
		return nil, nil
	}
	if err := layout.CheckName("session", session); err != nil {
		return nil, err
	}
	dir := l.SessionDir(agent, scope, session)
	refs := make([]ipc.Image, 0, len(ims))
	for _, im := range ims {
		sum, err := imageblob.Put(dir, im.Data)
		if err != nil {
			return nil, fmt.Errorf("image %s not attached: %w", im.Name, err)
		}
		refs = append(refs, ipc.Image{SHA256: sum, MediaType: im.MediaType, Name: im.Name, Size: int64(len(im.Data))})
	}
	return refs, nil
}

// prepareInput is what send and chat do with a typed message: @PATH
// mentions attached (text files inline, images by reference) and pasted
// image paths attached; the images are stored in the session's blob store.
func prepareInput(l layout.Layout, agent, scope, session, msg, workspace string) (string, []ipc.Image, error) {
	text, mentioned, err := attachMentions(msg, workspace)
	if err != nil {
		return "", nil, err
	}
	ims, err := attachImages(msg, mentioned)
	if err != nil {
		return "", nil, err
	}
	refs, err := storeImages(l, agent, scope, session, ims)
	if err != nil {
		return "", nil, err
	}
	return text, refs, nil
}

// pastedFile reports whether a chat line starting with "/" begins with the
// path of an existing file (a dragged file pasted as the message's start)
// rather than a chat command.
func pastedFile(line string) bool {
	ps := pastedPaths(line) // the first is the line's first word
	if len(ps) == 0 {
		return false
	}
	st, err := os.Lstat(ps[0])
	return err == nil && !st.IsDir()
}
