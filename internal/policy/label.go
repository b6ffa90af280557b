package policy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
)

// ReadLabel reads agent/<name>.d/label: one LF-terminated line holding a
// label ([A-Za-z0-9][A-Za-z0-9._-]{0,63}). An absent file is the empty label
// (matched only by '*'); anything else malformed is an error, and the caller
// fails closed.
func ReadLabel(path string) (string, error) {
	f, _, err := safefs.OpenRegular(path) // was the one copy without the regular-file check
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("label %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", fmt.Errorf("label %s: %w", path, err)
	}
	return ParseLabel(path, data)
}

// ParseLabel parses the content of a .d/label file.
func ParseLabel(file string, data []byte) (string, error) {
	s := string(data)
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		return "", &ParseError{File: file, Line: 1, Msg: "want exactly one LF-terminated line", Kind: ErrInvalid}
	}
	s = strings.TrimSuffix(s, "\n")
	if err := layout.CheckName("label", s); err != nil {
		return "", &ParseError{File: file, Line: 1, Msg: err.Error(), Kind: ErrInvalid}
	}
	return s, nil
}
