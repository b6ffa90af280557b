package chatview

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Unwrap names the tool a call really runs: a model's `tsh call NAME ARGS…`
// is tool NAME with argv ARGS; anything else is itself.
func Unwrap(name string, args []string) (tool string, argv []string) {
	if name == "tsh" && len(args) >= 2 && args[0] == "call" {
		return args[1], args[2:]
	}
	return name, args
}

// MaxPreviewFile bounds the workspace file a preview reads.
const MaxPreviewFile = 1 << 20

// MaxPreviewLines bounds the lines of a preview; the rest is counted.
const MaxPreviewLines = 200

// Preview is what an approval question shows of a change the call would
// make: for `write` and `edit` a unified diff of the
// workspace file against what the call would leave, for `apply_patch` the
// patch itself. It is computed on the client from the call's argv (the
// standard tools' grammar: README "The standard toolset") and the
// workspace as it is now; the tool itself decides what really happens.
// ws is the host directory bound at /workspace (the run's cwd). The
// result is plain text (colour it with Colorize); "" with a note when
// there is nothing to show, and "", "" for a tool that changes no file.
func Preview(tool string, argv []string, ws string) (diff, note string) {
	switch tool {
	case "write":
		pos, _ := positional(argv, nil)
		if len(pos) != 2 {
			return "", "no preview: write takes PATH CONTENT"
		}
		old, exists, note := readWorkspace(ws, pos[0])
		if note != "" {
			return "", note
		}
		if !exists {
			return unified(pos[0], "", pos[1], true), ""
		}
		if old == pos[1] {
			return "", "no change: the file already holds this content"
		}
		return unified(pos[0], old, pos[1], false), ""
	case "edit":
		pos, flags := positional(argv, map[string]bool{"--all": true})
		if len(pos) != 3 {
			return "", "no preview: edit takes PATH OLD NEW [--all]"
		}
		old, exists, note := readWorkspace(ws, pos[0])
		if note != "" {
			return "", note
		}
		if !exists {
			return "", fmt.Sprintf("no preview: %s does not exist (the edit will fail)", pos[0])
		}
		n := strings.Count(old, pos[1])
		switch {
		case pos[1] == "" || n == 0:
			return "", fmt.Sprintf("no preview: the text to replace is not in %s (the edit will fail)", pos[0])
		case n > 1 && !flags["--all"]:
			return "", fmt.Sprintf("no preview: the text to replace occurs %d times in %s (the edit will fail without --all)", n, pos[0])
		}
		updated := strings.Replace(old, pos[1], pos[2], 1)
		if flags["--all"] {
			updated = strings.ReplaceAll(old, pos[1], pos[2])
		}
		return unified(pos[0], old, updated, false), ""
	case "apply_patch":
		pos, _ := positional(argv, nil)
		if len(pos) != 1 {
			return "", "no preview: apply_patch takes PATCH"
		}
		return capLines(strings.TrimRight(pos[0], "\n")), ""
	}
	return "", ""
}

// positional splits argv into positional arguments and the boolean flags
// named in known; `--` ends the flags (the toolset's convention).
func positional(argv []string, known map[string]bool) (pos []string, flags map[string]bool) {
	flags = map[string]bool{}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			return append(pos, argv[i+1:]...), flags
		case known[a]:
			flags[a] = true
		default:
			pos = append(pos, a)
		}
	}
	return pos, flags
}

// readWorkspace reads a file the call names, as the sandbox would see it:
// relative to /workspace, or an absolute path inside it. note says why
// there is no preview.
//
// The preview runs in the person's client, with the person's rights, on a
// directory the agent can write: it must neither block nor show what lies
// outside the workspace. So the file is opened beneath the workspace with
// no link followed in any component (openat2 RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), first as O_PATH to learn
// what it is without opening it, then — a regular file only —
// O_RDONLY|O_NONBLOCK|O_NOCTTY, checked again by fstat to be that same
// regular file, and read bounded. A FIFO, a device, a socket or a link is
// named in the note, so the question is shown at once and says why there
// is no diff. The tool itself, in the sandbox, decides what really happens.
func readWorkspace(ws, p string) (content string, exists bool, note string) {
	if ws == "" {
		return "", false, "no preview: no workspace"
	}
	var rel string
	switch {
	case filepath.IsAbs(p):
		r, err := filepath.Rel("/workspace", filepath.Clean(p))
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "", false, fmt.Sprintf("no preview: %s is outside the workspace", p)
		}
		rel = r
	default:
		rel = filepath.Clean(p)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "", false, fmt.Sprintf("no preview: %s is outside the workspace", p)
		}
	}
	// The workspace itself is the person's own directory (the client's
	// cwd); only what lies below it is the agent's to shape.
	dir, err := os.OpenFile(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, fmt.Sprintf("no preview: workspace: %v", err)
	}
	defer dir.Close()
	pf, err := openBeneath(dir, rel, unix.O_PATH)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", false, ""
		}
		return "", false, openNote(dir, p, rel, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(int(pf.Fd()), &st)
	pf.Close()
	if err != nil {
		return "", false, fmt.Sprintf("no preview: %s: %v", p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// O_PATH|O_NOFOLLOW opens a final link itself.
		return "", false, fmt.Sprintf("no preview: %s is a symbolic link (not followed)", p)
	}
	if kind := fileKind(st.Mode); kind != "" {
		return "", false, fmt.Sprintf("no preview: %s is %s (not read)", p, kind)
	}
	f, err := openBeneath(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return "", false, openNote(dir, p, rel, err)
	}
	defer f.Close()
	var st2 unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st2); err != nil {
		return "", false, fmt.Sprintf("no preview: %s: %v", p, err)
	}
	if st2.Mode&unix.S_IFMT != unix.S_IFREG || st2.Dev != st.Dev || st2.Ino != st.Ino {
		return "", false, fmt.Sprintf("no preview: %s changed while it was being read", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxPreviewFile+1))
	switch {
	case errors.Is(err, unix.EAGAIN):
		return "", false, fmt.Sprintf("no preview: %s cannot be read without waiting", p)
	case err != nil:
		return "", false, fmt.Sprintf("no preview: %v", err)
	case len(b) > MaxPreviewFile:
		return "", false, fmt.Sprintf("no preview: %s is over %d bytes", p, MaxPreviewFile)
	case bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b):
		return "", false, fmt.Sprintf("no preview: %s is not text", p)
	}
	return string(b), true, ""
}

// resolveBeneath is how the preview resolves a name below the workspace:
// never above it, never through a link.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens rel below dir with flags (O_CLOEXEC and O_NOFOLLOW
// added) and resolveBeneath. Without openat2 (Linux before 5.6) it gives
// ENOSYS: no preview rather than a weaker walk.
func openBeneath(dir *os.File, rel string, flags int) (*os.File, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolveBeneath}
	for {
		fd, err := unix.Openat2(int(dir.Fd()), rel, how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue // EAGAIN: a concurrent rename raced the lookup
		}
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), rel), nil
	}
}

// openNote says why rel could not be opened beneath the workspace, naming
// the link on the way when there is one.
func openNote(dir *os.File, p, rel string, err error) string {
	switch {
	case errors.Is(err, unix.ELOOP):
		// The first component that is a link: every prefix before it
		// resolved without one.
		names := strings.Split(rel, "/")
		for i := range names {
			prefix := strings.Join(names[:i+1], "/")
			f, perr := openBeneath(dir, prefix, unix.O_PATH)
			if perr == nil {
				var st unix.Stat_t
				isLink := unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
				f.Close()
				if !isLink {
					continue
				}
			} else if !errors.Is(perr, unix.ELOOP) {
				break
			}
			if prefix == rel {
				return fmt.Sprintf("no preview: %s is a symbolic link (not followed)", p)
			}
			return fmt.Sprintf("no preview: %s is under a symbolic link, %s (not followed)", p, prefix)
		}
		return fmt.Sprintf("no preview: %s goes through a symbolic link (not followed)", p)
	case errors.Is(err, unix.EXDEV):
		return fmt.Sprintf("no preview: %s leads outside the workspace", p)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Sprintf("no preview: a component of %s is not a directory", p)
	case errors.Is(err, unix.ENOSYS):
		return "no preview: this kernel lacks openat2, needed to read the workspace safely"
	}
	return fmt.Sprintf("no preview: %s: %v", p, err)
}

// fileKind names a file type the preview does not read; "" for a regular
// file.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFIFO:
		return "a FIFO (named pipe)"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "not a regular file"
}

// context is the number of unchanged lines shown around a change.
const context = 3

// maxLCS bounds the line-diff table (cells); beyond it the differing middle
// is shown as removed then added, which is still exact.
const maxLCS = 4_000_000

// unified is a unified diff of a file's old and new text.
func unified(name, a, b string, created bool) string {
	al, bl := splitLines(a), splitLines(b)
	ops := diffLines(al, bl)
	var out strings.Builder
	if created {
		fmt.Fprintf(&out, "--- /dev/null\n+++ %s\n", name)
	} else {
		fmt.Fprintf(&out, "--- %s\n+++ %s\n", name, name)
	}
	// Group the ops into hunks with `context` lines around each change.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, run)
				break
			}
			end = run
		}
		aStart, bStart, aN, bN := ops[start].a, ops[start].b, 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				aN++
			}
			if o.kind != '-' {
				bN++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aN), hunkRange(bStart, bN))
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.text)
			out.WriteByte('\n')
			if o.noEOL {
				out.WriteString("\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return capLines(strings.TrimRight(out.String(), "\n"))
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

type line struct {
	text  string
	noEOL bool // the file's last line, without a final newline
}

func splitLines(s string) []line {
	if s == "" {
		return nil
	}
	parts := strings.SplitAfter(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	out := make([]line, len(parts))
	for i, p := range parts {
		out[i] = line{text: strings.TrimSuffix(p, "\n"), noEOL: !strings.HasSuffix(p, "\n")}
	}
	return out
}

type op struct {
	kind  byte // ' ', '-', '+'
	text  string
	noEOL bool
	a, b  int // line index in the old and new text where this op stands
}

// diffLines is a shortest edit script by longest common subsequence, after
// the common head and tail are taken off.
func diffLines(a, b []line) []op {
	var ops []op
	h := 0
	for h < len(a) && h < len(b) && a[h] == b[h] {
		ops = append(ops, op{kind: ' ', text: a[h].text, noEOL: a[h].noEOL, a: h, b: h})
		h++
	}
	t := 0
	for t < len(a)-h && t < len(b)-h && a[len(a)-1-t] == b[len(b)-1-t] {
		t++
	}
	am, bm := a[h:len(a)-t], b[h:len(b)-t]
	if len(am)*len(bm) > maxLCS {
		for i, l := range am {
			ops = append(ops, op{kind: '-', text: l.text, noEOL: l.noEOL, a: h + i, b: h})
		}
		for j, l := range bm {
			ops = append(ops, op{kind: '+', text: l.text, noEOL: l.noEOL, a: h + len(am), b: h + j})
		}
	} else {
		// lcs[i][j]: length of the LCS of am[i:] and bm[j:].
		w := len(bm) + 1
		lcs := make([]int32, (len(am)+1)*w)
		for i := len(am) - 1; i >= 0; i-- {
			for j := len(bm) - 1; j >= 0; j-- {
				if am[i] == bm[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(am) || j < len(bm) {
			switch {
			case i < len(am) && j < len(bm) && am[i] == bm[j]:
				ops = append(ops, op{kind: ' ', text: am[i].text, noEOL: am[i].noEOL, a: h + i, b: h + j})
				i, j = i+1, j+1
			case i < len(am) && (j == len(bm) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
				ops = append(ops, op{kind: '-', text: am[i].text, noEOL: am[i].noEOL, a: h + i, b: h + j})
				i++
			default:
				ops = append(ops, op{kind: '+', text: bm[j].text, noEOL: bm[j].noEOL, a: h + i, b: h + j})
				j++
			}
		}
	}
	for k := t; k > 0; k-- {
		ai, bi := len(a)-k, len(b)-k
		ops = append(ops, op{kind: ' ', text: a[ai].text, noEOL: a[ai].noEOL, a: ai, b: bi})
	}
	return ops
}

// capLines keeps the first MaxPreviewLines lines and counts the rest.
func capLines(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= MaxPreviewLines {
		return s
	}
	return strings.Join(lines[:MaxPreviewLines], "\n") + fmt.Sprintf("\n… %d more lines", len(lines)-MaxPreviewLines)
}

// QuestionKeys is what a question's keys do, in chat and send alike
// ("a always": this same call, for the rest of the chat or send; the
// answer's line and /help say so). It fits a 100-column line.
const QuestionKeys = "y allows once, a always, n denies, r denies and says why, Ctrl+C cancels the run"

// Question is the approval question for a tool call (not an MCP call):
// the tool, its argv and, for write, edit and apply_patch, the change it
// would make to the workspace ws (coloured when color is set). It ends
// with the prompt "Allow once? (QuestionKeys) ".
func Question(name string, args []string, ws string, color bool) string {
	tool, argv := Unwrap(name, args)
	var b strings.Builder
	fmt.Fprintf(&b, "? the agent wants to run tool %s with argv %s\n", sanitize(tool), sanitize(fmt.Sprintf("%q", argv)))
	diff, note := Preview(tool, argv, ws)
	switch {
	case diff != "" && color:
		b.WriteString(Colorize(diff) + "\n")
	case diff != "":
		b.WriteString(sanitize(diff) + "\n")
	case note != "":
		b.WriteString("  (" + sanitize(note) + ")\n")
	}
	b.WriteString("Allow once? (" + QuestionKeys + ") ")
	return b.String()
}
