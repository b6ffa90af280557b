package ipc

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/jsonobj"
)

// Image input: a send names the images attached to its message by
// reference; the bytes live in the session's content-addressed blob store
// (SESSION_DIR/blobs/<sha256 hex>, written by the client), and the user
// frame in events.jsonl carries the same references — never the bytes.
const (
	MaxImages     = 8       // images one send may attach
	MaxImageBytes = 5 << 20 // one image's bytes (5 MiB)
	MaxImageName  = 255     // an image's name, in bytes
)

// The media types an image may have; the daemon sniffs the bytes again
// and never trusts the one a client names.
const (
	MediaPNG  = "image/png"
	MediaJPEG = "image/jpeg"
	MediaGIF  = "image/gif"
	MediaWebP = "image/webp"
)

// Image is one image a send attaches: its blob's sha256 (lowercase hex),
// media type, a display name (a basename) and its size in bytes.
type Image struct {
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
	Name      string `json:"name"`
	Size      int64  `json:"size"`
}

var imageKeys = []string{"sha256", "media_type", "name", "size"}

// checkImageKeys holds a request's image references to the request's own
// strictness: a duplicate key, a key differing from a field only in case
// or an unknown key is refused. (Only requests: a client reading frames
// ignores what it does not know.)
func checkImageKeys(raw json.RawMessage) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return err
	}
	for i, e := range elems {
		keys, err := jsonobj.Keys(e)
		if err != nil {
			return fmt.Errorf("image %d: %v", i+1, err)
		}
		if err := jsonobj.Only(keys, imageKeys...); err != nil {
			return fmt.Errorf("image %d: %v", i+1, err)
		}
	}
	return nil
}

// KnownMediaType reports whether mt is an image type ctx attaches.
func KnownMediaType(mt string) bool {
	switch mt {
	case MediaPNG, MediaJPEG, MediaGIF, MediaWebP:
		return true
	}
	return false
}

// CheckImages validates a send's image references: at most MaxImages, each
// a lowercase 64-hex sha256, a known media type, a basename of at most
// MaxImageName bytes without control characters, and a size in
// (0, MaxImageBytes].
func CheckImages(ims []Image) error {
	if len(ims) > MaxImages {
		return fmt.Errorf("%d images: a send attaches at most %d: %w", len(ims), MaxImages, ErrBadRequest)
	}
	for i, im := range ims {
		if err := im.check(); err != nil {
			return fmt.Errorf("image %d: %v: %w", i+1, err, ErrBadRequest)
		}
	}
	return nil
}

func (im Image) check() error {
	if len(im.SHA256) != 64 || strings.Trim(im.SHA256, "0123456789abcdef") != "" {
		return fmt.Errorf("sha256 %q: must be 64 lowercase hex digits", bounded(im.SHA256))
	}
	if !KnownMediaType(im.MediaType) {
		return fmt.Errorf("media_type %q: must be %s, %s, %s or %s", bounded(im.MediaType), MediaPNG, MediaJPEG, MediaGIF, MediaWebP)
	}
	switch {
	case im.Name == "" || im.Name == "." || im.Name == "..":
		return fmt.Errorf("name %q: must be a file name", bounded(im.Name))
	case len(im.Name) > MaxImageName:
		return fmt.Errorf("name of %d bytes: at most %d", len(im.Name), MaxImageName)
	case !utf8.ValidString(im.Name):
		return fmt.Errorf("name: not UTF-8")
	case strings.ContainsRune(im.Name, '/'):
		return fmt.Errorf("name %q: a basename, without /", bounded(im.Name))
	case strings.IndexFunc(im.Name, func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }) >= 0:
		return fmt.Errorf("name %q: control characters", bounded(im.Name))
	}
	if im.Size <= 0 || im.Size > MaxImageBytes {
		return fmt.Errorf("size %d: must be 1 to %d bytes", im.Size, MaxImageBytes)
	}
	return nil
}

func bounded(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Line is how an image shows wherever a person reads a message (the
// prompt, the history, the chat): a reference, never its bytes.
//
//	[image shot.png, image/png, 123456 bytes, sha256:abcd1234…]
func (im Image) Line() string {
	h := im.SHA256
	if len(h) > 12 {
		h = h[:12] + "…"
	}
	return fmt.Sprintf("[image %s, %s, %d bytes, sha256:%s]", im.Name, im.MediaType, im.Size, h)
}

// ImageLines is the Line of each image, one per line.
func ImageLines(ims []Image) string {
	lines := make([]string, len(ims))
	for i, im := range ims {
		lines[i] = im.Line()
	}
	return strings.Join(lines, "\n")
}
