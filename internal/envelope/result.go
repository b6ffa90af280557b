package envelope

import (
	"strings"
	"unicode/utf8"
)

// Result statuses of tool_result frames.
const (
	StatusOK        = "ok"
	StatusError     = "error"
	StatusDenied    = "denied"
	StatusCancelled = "cancelled"
)

// Normalize makes a tool's output into a result the same way everywhere
// (interfaces.md): content is stdout byte for byte; on a non-zero exit stdout
// then stderr with status error; invalid UTF-8 becomes U+FFFD; cut on a
// character boundary to at most MaxContent bytes with truncated set.
func Normalize(stdout, stderr []byte, ok bool) (status, content string, truncated bool) {
	status = StatusOK
	raw := stdout
	if !ok {
		status = StatusError
		raw = append(append([]byte{}, stdout...), stderr...)
	}
	content, truncated = Cut(strings.ToValidUTF8(string(raw), "\uFFFD"), MaxContent)
	return status, content, truncated
}

// Cut shortens valid UTF-8 s to at most n bytes on a character boundary.
func Cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}
