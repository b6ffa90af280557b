package prompt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/window"
)

// What a prompt costs once sent as JSON, and the small helpers of reading
// and hashing it.

func readControl(fsys fileSystem, dir, name string) (string, bool, error) {
	if dir == "" {
		return "", false, nil
	}
	p := filepath.Join(dir, name)
	b, truncated, err := readBounded(fsys, p, ControlFileMax, false)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("prompt: control file %s: %w", name, err)
	}
	if truncated {
		return "", false, fmt.Errorf("prompt: control file %s: larger than %d bytes", name, ControlFileMax)
	}
	return clean(string(b)), true, nil
}

// clean makes text valid UTF-8 (invalid bytes become U+FFFD).
func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func marshal(msgs []Message) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msgs); err != nil {
		return nil, fmt.Errorf("prompt: serialize messages: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// jsonCost is the length of s as a JSON string body (without the quotes), as
// encoding/json writes it with HTML escaping off.
func jsonCost(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// msgCost is the JSON length of one {"role":…,"content":…} object.
func msgCost(m Message) int {
	if !m.plain() {
		b, _ := marshal([]Message{m})
		return len(b) - 2 + len(m.Images)*ImageChars
	}
	return len(`{"role":"","content":""}`) + jsonCost(m.Role) + jsonCost(m.Content)
}

// arrayCost is the JSON length of the array: brackets, objects, commas.
func arrayCost(msgs []Message) int {
	n := 2
	for i, m := range msgs {
		if i > 0 {
			n++
		}
		n += msgCost(m)
	}
	return n
}

// ImageTokens is what one attached image is charged against the context
// window: a fixed estimate (providers bill an image by its pixels, about
// 1,600 tokens for a 1,092×1,092 image at Anthropic, less when smaller;
// ctx does not decode images, so it charges that ceiling-ish figure for
// each). In the byte budget it is ImageChars, besides the reference's own
// JSON.
const ImageTokens = 1600

// ImageChars is ImageTokens in the budget's bytes (W7's estimate).
const ImageChars = ImageTokens * window.CharsPerToken

// imageCharge is the fixed charge of the images the array attaches.
func imageCharge(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images) * ImageChars
	}
	return n
}
