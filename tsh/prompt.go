package tsh

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/term"
)

// historyFile is the prompt history, in $HOME (the agent home inside the
// sandbox, B2).
const historyFile = ".tsh_history"

const maxHistory = 1000

// builtins are the prompt's own commands; any other first word is a tool
// name: "bash" runs the visible bash tool (spec: K6), never a host command.
var builtins = []string{"call", "context", "exit", "help", "list", "load", "pin", "quit", "unload", "unpin", "which"}

// Prompt runs the interactive prompt on the terminal in s.Stdin/s.Stdout
// until EOF (^D on an empty line) or exit. ^C clears the line.
func (s *Shell) Prompt() int {
	in, ok := s.Stdin.(*os.File)
	if !ok {
		return s.usageError("the prompt needs a terminal")
	}
	fd := int(in.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		return s.fail(fmt.Errorf("terminal: %w", err))
	}
	restore := func() { _ = term.Restore(fd, old) }
	defer restore()

	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{ctrlCClears{in}, s.Stdout}, "tsh> ")
	if w, h, err := term.GetSize(fd); err == nil {
		_ = t.SetSize(w, h)
	}
	hist := openHistory(s.Env.Getenv("HOME"))
	t.History = hist
	t.AutoCompleteCallback = func(line string, pos int, key rune) (string, int, bool) {
		if key != '\t' {
			return "", 0, false
		}
		nl, np, ok, cands := complete(line, pos, s.visibleNames())
		if !ok && len(cands) > 1 {
			// Ambiguous: show the candidates; Write redraws the line after them.
			fmt.Fprintf(t, "%s\n", strings.Join(cands, "  "))
		}
		return nl, np, ok
	}

	s.interactive = true
	s.childIn, s.childOut, s.childErr = s.Stdin, s.Stdout, s.Stderr
	s.Stdout, s.Stderr = t, t
	defer func() { s.Stdin, s.Stdout, s.Stderr = s.childIn, s.childOut, s.childErr; s.interactive = false }()

	status := 0
	for {
		line, err := t.ReadLine()
		if errors.Is(err, io.EOF) {
			fmt.Fprint(t, "\n")
			return status
		}
		if err != nil && !errors.Is(err, term.ErrPasteIndicator) {
			return s.fail(fmt.Errorf("terminal: %w", err))
		}
		words, err := SplitWords(line)
		if err != nil {
			fmt.Fprintf(t, "tsh: %v\n", err)
			status = ExitUsage
			continue
		}
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "exit", "quit":
			return status
		case "call", "context", "help", "list", "load", "pin", "unload", "unpin", "which":
		default:
			words = append([]string{"call"}, words...) // a bare tool name calls that tool
		}
		if words[0] == "call" {
			// The tool owns the terminal in cooked mode while it runs.
			restore()
			status = s.Run(words)
			if _, err := term.MakeRaw(fd); err != nil {
				return s.fail(fmt.Errorf("terminal: %w", err))
			}
			if status != 0 {
				fmt.Fprintf(t, "[exit %d]\n", status)
			}
			continue
		}
		status = s.Run(words)
	}
}

// ctrlCClears turns ^C into ^U (clear line): in term.Terminal ^C ends input
// like EOF, which would close the agent's shell.
type ctrlCClears struct{ r io.Reader }

func (c ctrlCClears) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for i := 0; i < n; i++ {
		if p[i] == 3 {
			p[i] = 21
		}
	}
	return n, err
}

// SplitWords splits a prompt line into words: spaces and tabs separate,
// '...' keeps text literally, "..." keeps text with \" and \\ escapes, and a
// backslash outside quotes escapes the next character. Nothing is expanded.
func SplitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '\'':
			inWord = true
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, errors.New("unterminated ' quote")
			}
			cur.WriteString(string(rs[i+1 : j]))
			i = j
		case r == '"':
			inWord = true
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) && (rs[j+1] == '"' || rs[j+1] == '\\') {
					j++
				}
				cur.WriteRune(rs[j])
			}
			if j == len(rs) {
				return nil, errors.New(`unterminated " quote`)
			}
			i = j
		case r == '\\':
			if i+1 == len(rs) {
				return nil, errors.New("trailing backslash")
			}
			inWord = true
			i++
			cur.WriteRune(rs[i])
		default:
			inWord = true
			cur.WriteRune(r)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// complete completes the word before pos: the first word from the builtins
// and tool names, later words (after call/load/pin/unpin/unload/which, or
// none for a bare tool call) from tool names. It completes the longest common
// prefix of the candidates. cands are the matching candidates.
func complete(line string, pos int, tools []string) (newLine string, newPos int, ok bool, cands []string) {
	before := line[:pos]
	start := strings.LastIndexAny(before, " \t") + 1
	word := before[start:]
	first := strings.TrimSpace(before[:start]) == ""
	var all []string
	if first {
		all = append(append(all, builtins...), tools...)
	} else {
		fields := strings.Fields(before[:start])
		switch fields[0] {
		case "call", "which", "pin", "unpin", "unload":
			if len(fields) != 1 {
				return "", 0, false, nil
			}
			all = tools
		case "load":
			all = tools
		default:
			return "", 0, false, nil
		}
	}
	var match []string
	seen := map[string]bool{}
	for _, c := range all {
		if strings.HasPrefix(c, word) && !seen[c] {
			seen[c] = true
			match = append(match, c)
		}
	}
	if len(match) == 0 {
		return "", 0, false, nil
	}
	sort.Strings(match)
	common := match[0]
	for _, m := range match[1:] {
		for !strings.HasPrefix(m, common) {
			common = common[:len(common)-1]
		}
	}
	if len(match) == 1 {
		common += " "
	}
	if len(common) <= len(word) {
		return "", 0, false, match
	}
	return before[:start] + common + line[pos:], start + len(common), true, match
}

// history keeps prompt lines in memory and appends each to $HOME/.tsh_history.
type history struct {
	lines []string // oldest first
	path  string
}

func openHistory(home string) *history {
	h := &history{}
	if home == "" || !filepath.IsAbs(home) {
		return h
	}
	h.path = filepath.Join(home, historyFile)
	if f, err := os.Open(h.path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if l := sc.Text(); strings.TrimSpace(l) != "" {
				h.lines = append(h.lines, l)
			}
		}
		f.Close()
		if len(h.lines) > maxHistory {
			h.lines = h.lines[len(h.lines)-maxHistory:]
		}
	}
	return h
}

func (h *history) Add(line string) {
	if strings.TrimSpace(line) == "" || strings.ContainsAny(line, "\n\r") {
		return
	}
	if n := len(h.lines); n > 0 && h.lines[n-1] == line {
		return
	}
	h.lines = append(h.lines, line)
	if len(h.lines) > maxHistory {
		h.lines = h.lines[1:]
	}
	if h.path == "" {
		return
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return // history is a convenience; never fail a command over it
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}

func (h *history) Len() int { return len(h.lines) }

func (h *history) At(i int) string { return h.lines[len(h.lines)-1-i] }
