// Package tshrc parses CTX_HOME/.tshrc, the standalone tsh search-path file
// (runtime.md K3), as data: it is never executed and nothing in it is expanded.
//
// # Format
//
// UTF-8 text, at most 64 KiB, LF line endings. Each line is one of:
//
//	(empty)                 blank lines are allowed
//	# comment               '#' in the first column
//	CTX_PATH=/a:/b          at most once in the file
//
// The CTX_PATH line starts in the first column with exactly "CTX_PATH=" (no
// "export", no spaces around '='). Its value is one or more absolute
// directories separated by ':'. Each directory must start with '/', contain
// no '.' or '..' component and no empty entry, and consist only of letters,
// digits and the characters / . _ - + , @ = % (a trailing '/' is allowed and
// cleaned away). Shell syntax — '$', backticks, quotes, backslashes, spaces,
// ';', '&', '|', '<', '>', '(', ')', '{', '}', '*', '?', '[', ']', '~', '!',
// '#' — is an error, not a literal. Any other line is an error. Every error
// names file:line.
//
// A file without a CTX_PATH line contributes no directories.
package tshrc

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/cortexfs/ctx/internal/fileerr"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// MaxSize bounds the file.
const MaxSize = 64 << 10

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid .tshrc")

// Error names the file and line that made the file invalid.
type Error = fileerr.Error

const prefix = "CTX_PATH="

// Parse parses the content of a .tshrc and returns its directories in order.
// file is used only in errors.
func Parse(file string, data []byte) ([]string, error) {
	bad := func(line int, format string, a ...any) ([]string, error) {
		return nil, &Error{File: file, Line: line, Msg: fmt.Sprintf(format, a...), Kind: ErrInvalid}
	}
	if len(data) > MaxSize {
		return bad(0, "over %d bytes", MaxSize)
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	var dirs []string
	seen := 0
	for i, raw := range lines {
		n := i + 1
		if !utf8.Valid(raw) {
			return bad(n, "invalid UTF-8")
		}
		line := string(raw)
		switch {
		case line == "", line[0] == '#':
			continue
		case strings.HasPrefix(line, prefix):
		default:
			return bad(n, "only blank lines, '#' comments and one CTX_PATH=/dir:/dir line are allowed; .tshrc is data, not shell")
		}
		if seen != 0 {
			return bad(n, "second CTX_PATH line (first at line %d)", seen)
		}
		seen = n
		value := line[len(prefix):]
		if value == "" {
			return bad(n, "CTX_PATH is empty")
		}
		for _, d := range strings.Split(value, ":") {
			clean, msg := checkDir(d)
			if msg != "" {
				return bad(n, "CTX_PATH entry %q: %s", d, msg)
			}
			dirs = append(dirs, clean)
		}
	}
	return dirs, nil
}

// checkDir validates one directory; spec: K3 — no expansion, no quoting,
// absolute only.
func checkDir(d string) (string, string) {
	if d == "" {
		return "", "empty entry (an empty entry never means the current directory)"
	}
	for _, r := range d {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("/._-+,@=%", r):
		case r == '$' || r == '`':
			return "", fmt.Sprintf("%q: no expansion or command substitution", r)
		case r == '\'' || r == '"' || r == '\\':
			return "", fmt.Sprintf("%q: no quoting or escapes", r)
		default:
			return "", fmt.Sprintf("character %q not allowed", r)
		}
	}
	if d[0] != '/' {
		return "", "not an absolute path"
	}
	for _, c := range strings.Split(d, "/") {
		if c == "." || c == ".." {
			return "", "'.' and '..' components are not allowed"
		}
	}
	return filepath.Clean(d), ""
}

// Load reads and parses path. An absent file is (nil, false, nil). A present
// file that cannot be read or parsed is an error: the caller must not fall
// back to any other search path.
func Load(path string) (dirs []string, present bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return nil, true, fmt.Errorf("tshrc: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, true, fmt.Errorf("tshrc: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, true, &Error{File: path, Msg: "not a regular file", Kind: ErrInvalid}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, true, fmt.Errorf("tshrc %s: %w", path, err)
	}
	dirs, err = Parse(path, data)
	return dirs, true, err
}
