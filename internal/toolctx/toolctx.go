// Package toolctx is the tool context of one session: the loaded and pinned
// tools (tools.json, K5), read and updated atomically by tsh inside the
// sandbox and by the host when it builds an envelope or a prompt, and the
// context text they render. Metadata only: it never grants authority.
package toolctx

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/safefs"
)

// StateFileName is the session's tool context file (interfaces.md "Tools and tsh").
const StateFileName = "tools.json"

// DefaultContextBudget is the budget tsh context uses, and the upper bound of
// an envelope context string (runtime.md X5: each context string ≤ 64 KiB).
const DefaultContextBudget = 64 << 10

// maxStateSize bounds tools.json when reading it.
const maxStateSize = 4 << 20

// MaxDescription bounds one tool's description in the state and the context text.
const MaxDescription = 2048

// State is the loaded/pinned tool set of one session (K5). It is metadata
// only: it never grants or removes authority.
type State struct {
	Version int      `json:"version"`
	Next    int64    `json:"next"` // the load order the next load receives
	Tools   []Loaded `json:"tools"`
}

// Loaded is one tool in the context.
type Loaded struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"`
	Pinned      bool   `json:"pinned"`
	Order       int64  `json:"order"` // load order: smaller is older
}

// ErrNotLoaded is returned by Unpin and Unload for a tool not in the context.
var ErrNotLoaded = errors.New("tool not loaded")

// Find returns the index of name in s.Tools, or -1.
func (s *State) Find(name string) int {
	for i := range s.Tools {
		if s.Tools[i].Name == name {
			return i
		}
	}
	return -1
}

// Load adds or refreshes a tool (name, description, path) as the newest load,
// keeping its pin.
func (s *State) Load(l Loaded) {
	l.Description = strings.Join(descriptionLines(l.Description), "\n")
	l.Order = s.Next
	s.Next++
	if i := s.Find(l.Name); i >= 0 {
		l.Pinned = l.Pinned || s.Tools[i].Pinned
		s.Tools[i] = l
	} else {
		s.Tools = append(s.Tools, l)
	}
	s.sort()
}

// Pin marks a loaded tool as protected from eviction.
func (s *State) Pin(name string) error { return s.setPin(name, true) }

// Unpin removes the protection; the tool stays loaded.
func (s *State) Unpin(name string) error { return s.setPin(name, false) }

func (s *State) setPin(name string, pin bool) error {
	i := s.Find(name)
	if i < 0 {
		return fmt.Errorf("%q: %w", name, ErrNotLoaded)
	}
	s.Tools[i].Pinned = pin
	return nil
}

// Unload removes a tool (pinned or not) from the context.
func (s *State) Unload(name string) error {
	i := s.Find(name)
	if i < 0 {
		return fmt.Errorf("%q: %w", name, ErrNotLoaded)
	}
	s.Tools = append(s.Tools[:i], s.Tools[i+1:]...)
	return nil
}

func (s *State) sort() {
	sort.SliceStable(s.Tools, func(i, j int) bool { return s.Tools[i].Order < s.Tools[j].Order })
}

// ContextText renders the tool_context text the runtime puts in the envelope
// and `tsh context` prints (spec: K5). It is a pure function of the state:
//
//   - no tools: the empty string;
//   - otherwise a header line, then one line per tool, oldest load first:
//     "- NAME (pinned): DESCRIPTION [PATH]";
//   - over budgetChars (UTF-8 bytes; ≤ 0 means no limit) the oldest unpinned
//     tools are left out one by one and a final line "(N unpinned evicted;
//     still callable)" says how many; they stay
//     in the state and stay callable — eviction never affects authority;
//   - if the pinned tools alone exceed the budget, the text is cut on a
//     character boundary to budgetChars so the envelope stays within bounds.
func ContextText(state State, budgetChars int) string {
	tools := append([]Loaded(nil), state.Tools...)
	sort.SliceStable(tools, func(i, j int) bool { return tools[i].Order < tools[j].Order })
	if len(tools) == 0 {
		return ""
	}
	evicted := 0
	text := renderContext(tools, 0)
	for budgetChars > 0 && len(text) > budgetChars {
		i := -1
		for j := range tools {
			if !tools[j].Pinned {
				i = j
				break
			}
		}
		if i < 0 {
			// Only pinned tools remain: drop the note, then cut as a last resort.
			return cutUTF8(renderContext(tools, 0), budgetChars)
		}
		tools = append(tools[:i], tools[i+1:]...)
		evicted++
		text = renderContext(tools, evicted)
	}
	return text
}

// ContextPinned is the smallest tool context eviction alone can reach: every
// unpinned tool evicted, every pinned one kept (K5) — the floor a prompt
// builder cuts the context to before it touches a pinned tool. "" when no
// tool is loaded.
func ContextPinned(state State) string {
	var pinned []Loaded
	for _, t := range state.Tools {
		if t.Pinned {
			pinned = append(pinned, t)
		}
	}
	if len(state.Tools) == 0 {
		return ""
	}
	sort.SliceStable(pinned, func(i, j int) bool { return pinned[i].Order < pinned[j].Order })
	return renderContext(pinned, len(state.Tools)-len(pinned))
}

// renderContext is the text of ContextText for ts, noting evicted tools.
func renderContext(ts []Loaded, evicted int) string {
	var b strings.Builder
	b.WriteString("Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n")
	for _, t := range ts {
		b.WriteString("- " + t.Name)
		if t.Pinned {
			b.WriteString(" (pinned)")
		}
		lines := descriptionLines(t.Description)
		if len(lines) > 0 {
			b.WriteString(": " + lines[0])
		}
		if t.Path != "" {
			b.WriteString(" [" + oneLine(t.Path, 4096) + "]")
		}
		b.WriteString("\n")
		for _, l := range lines[min(1, len(lines)):] {
			b.WriteString("  " + l + "\n") // a multi-line description keeps its lines
		}
	}
	if evicted > 0 {
		fmt.Fprintf(&b, "(%d unpinned evicted; still callable)\n", evicted)
	}
	return b.String()
}

// descriptionLines is a description as printable lines, blank ones
// dropped, at most MaxDescription bytes in all.
func descriptionLines(desc string) []string {
	var out []string
	for _, l := range strings.Split(cutUTF8(desc, MaxDescription), "\n") {
		if l = oneLine(l, MaxDescription); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Summary is a description's first line: what `tsh list` shows (the
// whole description reaches the tool context once the tool is loaded).
func Summary(desc string) string {
	if l := descriptionLines(desc); len(l) > 0 {
		return l[0]
	}
	return ""
}

// oneLine makes s a single line of printable text at most max bytes.
func oneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	s = strings.TrimSpace(s)
	return cutUTF8(s, max)
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ReadState reads a state file; an absent file is the empty state. The file
// lives in a session directory the sandbox can write, and the host reads it
// before every run: a symlink is not followed, and a FIFO or device is
// refused without blocking (O_NONBLOCK), never waited on.
func ReadState(path string) (State, error) {
	f, _, err := safefs.OpenRegular(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return State{Version: 1}, nil
		}
		return State{}, fmt.Errorf("tool context %s: %w", path, err)
	}
	defer f.Close()
	var s State
	dec := json.NewDecoder(&limitedReader{f: f, n: maxStateSize})
	if err := dec.Decode(&s); err != nil {
		return State{}, fmt.Errorf("tool context %s: %w", path, err)
	}
	if s.Version != 1 {
		return State{}, fmt.Errorf("tool context %s: unknown version %d", path, s.Version)
	}
	s.sort()
	return s, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("over %d bytes", maxStateSize)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

// UpdateState applies fn to the state in path under an exclusive lock on its
// directory and replaces the file atomically (internal/atomicfile). The
// directory is created (0700) if missing. fn's error aborts the write.
func UpdateState(path string, fn func(*State) error) (State, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return State{}, fmt.Errorf("tool context: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return State{}, fmt.Errorf("tool context: %w", err)
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX); err != nil {
		return State{}, fmt.Errorf("tool context: lock %s: %w", dir, err)
	}
	defer unix.Flock(int(d.Fd()), unix.LOCK_UN) //nolint:errcheck // closing unlocks too
	s, err := ReadState(path)
	if err != nil {
		return State{}, err
	}
	if err := fn(&s); err != nil {
		return s, err
	}
	s.Version = 1
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return State{}, fmt.Errorf("tool context: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return State{}, fmt.Errorf("tool context: %w", err)
	}
	return s, nil
}
