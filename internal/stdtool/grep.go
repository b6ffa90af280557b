package stdtool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"
)

func init() {
	register(&Tool{
		Name:  "grep",
		Usage: "grep PATTERN [PATH] [--glob G] [-i] [-l]",
		Min:   1, Max: 2,
		Flags: []Flag{
			{Name: "--glob", Value: true},
			{Name: "-i", Alias: "--ignore-case"},
			{Name: "-l", Alias: "--files-with-matches"},
		},
		Meta: Meta{Description: `Search file contents with a regular expression, line by line.
argv: grep PATTERN [PATH] [--glob G] [-i] [-l]
PATTERN is RE2 syntax, as Go's regexp: no lookaround or backreferences.
PATH (default .) is a directory searched recursively or one file. Files ignored by .gitignore, .git, binary files and symlinks inside the tree are skipped.
--glob G keeps files whose path matches G (** allowed; a G without / matches the file name, e.g. --glob '*.go'; '!G' excludes). -i ignores case. -l prints only the names of matching files.
Output: path:line:text, in path order, at most 500 lines; narrow a large result with PATH or --glob.
Example: grep 'func \w+Handler' internal --glob '*.go'`},
		Run: runGrep,
	})
}

const (
	// grepMaxLines is how many matching lines grep shows.
	grepMaxLines = 500
	// grepMaxFile is the largest file grep reads; a larger one is skipped
	// with a note.
	grepMaxFile = 64 << 20
	// grepLineShow is how much of a long line grep shows, around its
	// first match.
	grepLineShow = 400
)

// grepMaxFileSize is grepMaxFile, lowered by tests.
var grepMaxFileSize = grepMaxFile

// grepJob is one file to search, in walk order.
type grepJob struct {
	seq       int
	abs, disp string
}

// grepResult is what searching one file found.
type grepResult struct {
	seq   int
	disp  string
	out   []byte // formatted lines (at most grepMaxLines)
	count int    // matching lines (all of them)
	skip  string // why the file was not searched: "binary", or a note naming it
}

// grepOpts are grep's flags.
type grepOpts struct {
	glob     string // --glob, "" for none
	globNeg  bool   // the glob started with '!'
	globBase bool   // the glob has no '/': matched against the name
	names    bool   // -l
}

func (o *grepOpts) keep(rel string) bool {
	if o.glob == "" {
		return true
	}
	name := rel
	if o.globBase {
		name = path.Base(rel)
	}
	ok, _ := doublestar.Match(o.glob, name)
	return ok != o.globNeg
}

func runGrep(ctx context.Context, a *Args, out *Output) error {
	pattern := a.Arg(0, "")
	g, err := compileGrep(pattern, a.Has("-i"))
	if err != nil {
		return err
	}
	opts := grepOpts{names: a.Has("-l")}
	if gl := a.String("--glob", ""); gl != "" {
		opts.glob, opts.globNeg = strings.CutPrefix(gl, "!")
		opts.glob = strings.TrimPrefix(opts.glob, "./")
		if !doublestar.ValidatePattern(opts.glob) {
			return Failf("grep: --glob %q is not a valid glob", gl)
		}
		opts.globBase = !strings.Contains(opts.glob, "/")
	}
	arg := a.Arg(1, ".")
	root, err := Abs(arg)
	if err != nil {
		return err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return Failf("grep: %s: %v", arg, errReason(err))
	}
	s := &grepSearch{g: g, opts: opts, out: out, pending: map[int]grepResult{}}
	var st walkStats
	if fi.IsDir() {
		st, err = s.tree(ctx, root)
	} else {
		s.single(root, displayBase(root))
	}
	if err != nil {
		return err
	}
	return s.finish(pattern, arg, st)
}

// grepSearch is one grep run: the results as they come, put in walk order.
type grepSearch struct {
	g    *grepper
	opts grepOpts
	out  *Output

	pending  map[int]grepResult
	nextSeq  int
	lines    int // matching lines in all
	shown    int // lines (or names, with -l) written
	files    int // files with a match
	searched int
	binary   int
	skipped  []string // large or unreadable files, with why
}

// single searches one file named on the command line.
func (s *grepSearch) single(abs, disp string) {
	var sc grepScratch
	r := s.file(grepJob{abs: abs, disp: disp}, &sc)
	if r.skip == "binary" {
		r.skip = disp + ": a binary file (a NUL byte in its first 8 KiB)"
	}
	s.add(r)
}

// tree searches the files under root with a worker pool, the walk feeding
// it in order.
func (s *grepSearch) tree(ctx context.Context, root string) (walkStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base := displayBase(root)
	jobs := make(chan grepJob, 256)
	results := make(chan grepResult, 256)
	var st walkStats
	var walkErr error
	go func() {
		defer close(jobs)
		seq := 0
		st, walkErr = walkTree(ctx, root, func(e walkEntry) error {
			if !e.Type.IsRegular() || !s.opts.keep(e.Rel) {
				return nil
			}
			select {
			case jobs <- grepJob{seq: seq, abs: e.Abs, disp: joinDisplay(base, e.Rel)}:
				seq++
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	workers := max(runtime.GOMAXPROCS(0), 2)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc grepScratch
			for j := range jobs {
				if ctx.Err() != nil {
					continue // drain
				}
				results <- s.file(j, &sc)
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	for r := range results {
		s.pending[r.seq] = r
		for {
			r, ok := s.pending[s.nextSeq]
			if !ok {
				break
			}
			delete(s.pending, s.nextSeq)
			s.nextSeq++
			s.add(r)
		}
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	return st, walkErr
}

// file searches one file.
func (s *grepSearch) file(j grepJob, sc *grepScratch) grepResult {
	r := grepResult{seq: j.seq, disp: j.disp}
	data, err := s.read(j.abs, sc)
	if err != nil {
		var big *bigFileError
		if errors.As(err, &big) {
			r.skip = fmt.Sprintf("%s: %d MiB, over grep's %d MiB (search it with bash: rg or grep)", j.disp, big.size>>20, grepMaxFileSize>>20)
		} else {
			r.skip = j.disp + ": " + describeErr(err)
		}
		return r
	}
	if bytes.IndexByte(data[:min(len(data), SniffLen)], 0) >= 0 {
		r.skip = "binary"
		return r
	}
	prefix, kept := j.disp+":", 0
	r.count = s.g.search(data, sc, func(lineNo int, line []byte) bool {
		if s.opts.names {
			return false // one match names the file
		}
		if kept < grepMaxLines {
			r.out = append(r.out, prefix...)
			r.out = strconv.AppendInt(r.out, int64(lineNo), 10)
			r.out = append(r.out, ':')
			r.out = append(r.out, s.g.showLine(line)...)
			r.out = append(r.out, '\n')
			kept++
		}
		return true
	})
	if cap(sc.buf) > 8<<20 {
		sc.buf, sc.lower = nil, nil // do not keep a huge file's memory
	}
	return r
}

// bigFileError is a file over grepMaxFileSize.
type bigFileError struct{ size int64 }

func (e *bigFileError) Error() string { return fmt.Sprintf("%d bytes", e.size) }

// read reads the regular file abs whole into sc.buf.
func (s *grepSearch) read(abs string, sc *grepScratch) ([]byte, error) {
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: abs, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: abs, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &fs.PathError{Op: "read", Path: abs, Err: errors.New("not a regular file")}
	}
	if st.Size > int64(grepMaxFileSize) {
		return nil, &bigFileError{size: st.Size}
	}
	if cap(sc.buf) < int(st.Size)+1 {
		sc.buf = make([]byte, 0, int(st.Size)+1+512)
	}
	sc.buf, err = readFD(fd, sc.buf, grepMaxFileSize, abs)
	return sc.buf, err
}

// errReason is what a path error says without its operation and path
// ("no such file or directory").
func errReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// describeErr is an error's reason without the path it names.
func describeErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// add takes one file's result, in walk order.
func (s *grepSearch) add(r grepResult) {
	switch {
	case r.skip == "binary":
		s.binary++
		return
	case r.skip != "":
		s.skipped = append(s.skipped, r.skip)
		return
	}
	s.searched++
	if r.count == 0 {
		return
	}
	s.files++
	s.lines += r.count
	if s.opts.names {
		if s.shown < grepMaxLines*4 {
			s.out.WriteString(r.disp + "\n")
			s.shown++
		}
		return
	}
	room := grepMaxLines - s.shown
	if room <= 0 {
		return
	}
	text := r.out
	if n := bytes.Count(text, []byte{'\n'}); n > room {
		k := 0
		for range room {
			k += bytes.IndexByte(text[k:], '\n') + 1
		}
		text = text[:k]
		s.shown += room
	} else {
		s.shown += n
	}
	s.out.Write(text)
}

// finish writes the notes: what was capped, skipped or unreadable.
func (s *grepSearch) finish(pattern, arg string, st walkStats) error {
	if s.files == 0 {
		var why []string
		if s.binary > 0 {
			why = append(why, countNoun(s.binary, "binary file")+" skipped")
		}
		if st.Ignored > 0 {
			why = append(why, countNoun(st.Ignored, "entry", "entries")+" ignored by .gitignore or .git")
		}
		msg := fmt.Sprintf("no matches for %s in %s (%s searched", strconv.Quote(pattern), arg, countNoun(s.searched, "file"))
		if len(why) > 0 {
			msg += "; " + strings.Join(why, ", ")
		}
		s.out.WriteString(msg + ")\n")
	} else if total := map[bool]int{true: s.files, false: s.lines}[s.opts.names]; s.shown < total || s.out.Full() {
		// every line written ends with a newline: the lines kept are
		// those written less those the budget cut
		shown := s.shown - int(s.out.lines)
		what := countNoun(s.lines, "matching line") + " in " + countNoun(s.files, "file")
		if s.opts.names {
			what = countNoun(s.files, "matching file")
		}
		s.out.Note("[%s, %d shown; narrow the search with a PATH or --glob]", what, shown)
	}
	if len(s.skipped) > 0 {
		show := s.skipped[:min(len(s.skipped), maxWalkErrors)]
		more := ""
		if len(s.skipped) > len(show) {
			more = fmt.Sprintf("; and %d more", len(s.skipped)-len(show))
		}
		s.out.Note("[not searched: %s%s]", strings.Join(show, "; "), more)
	}
	if n := describeWalkErrors(st); n != "" {
		s.out.Note("%s", n)
	}
	return nil
}

// countNoun is "1 file" or "2 files"; forms[0] is the plural when given.
func countNoun(n int, one string, forms ...string) string {
	if n == 1 {
		return "1 " + one
	}
	if len(forms) > 0 {
		return strconv.Itoa(n) + " " + forms[0]
	}
	return strconv.Itoa(n) + " " + one + "s"
}
