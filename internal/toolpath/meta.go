package toolpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
)

// MaxMetaSize bounds tool.json.
const MaxMetaSize = 64 << 10

// ErrMetaTooLarge is wrapped when tool.json exceeds MaxMetaSize.
var ErrMetaTooLarge = errors.New("tool.json too large")

// Meta is a tool's metadata from <dir>/<name>.d/tool.json. It steers the
// model; it never grants authority (spec: V2).
type Meta struct {
	Description string `json:"description"`
	// Interactive declares a tool that needs the terminal it is run from
	// (a shell, an editor): tsh runs it in its own session with the
	// terminal as its controlling terminal. Every other tool gets a new
	// session without one (nothing to inject input into).
	Interactive bool `json:"interactive"`
}

// MetaPath is where the metadata of the tool dir/name lives.
func MetaPath(dir, name string) string { return filepath.Join(dir, name+".d", "tool.json") }

// ReadMeta reads <dir>/<name>.d/tool.json, bounded to MaxMetaSize and opened
// without following a final symlink. A missing file is the zero Meta and no
// error; unknown fields are ignored.
func ReadMeta(dir, name string) (Meta, error) {
	if err := layout.CheckName("tool", name); err != nil {
		return Meta{}, fmt.Errorf("tool metadata: %w", err)
	}
	p := MetaPath(dir, name)
	f, _, err := safefs.OpenRegular(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Meta{}, nil
		}
		return Meta{}, fmt.Errorf("tool metadata %s: %w", p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxMetaSize+1))
	if err != nil {
		return Meta{}, fmt.Errorf("tool metadata %s: %w", p, err)
	}
	if len(data) > MaxMetaSize {
		return Meta{}, fmt.Errorf("tool metadata %s: over %d bytes: %w", p, MaxMetaSize, ErrMetaTooLarge)
	}
	var m Meta
	if err := json.Unmarshal(data, &m); err != nil {
		return Meta{}, fmt.Errorf("tool metadata %s: %w", p, err)
	}
	return m, nil
}

// Entry is one name visible on CTX_PATH.
type Entry struct {
	Name string
	Dir  string // the first directory holding it
	Meta Meta   // zero when absent or unreadable (see MetaErr)
	// Err is the refusal of the filesystem checks (nil when the tool would
	// run for the identity) and MetaErr the error reading tool.json.
	Err, MetaErr error
}

// List returns every tool name visible on dirs, first match wins, sorted by
// name, each checked for id (Entry.Err). Names that are not valid tool names
// (dot files) and <name>.d metadata directories are skipped. A directory that
// cannot be read is not visible and is skipped.
func List(dirs []string, id Identity) ([]Entry, error) {
	seen := map[string]bool{}
	var out []Entry
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		des, err := os.ReadDir(d)
		if err != nil {
			continue // not visible in this view
		}
		for _, de := range des {
			n := de.Name()
			if seen[n] || strings.HasSuffix(n, ".d") || layout.CheckName("tool", n) != nil {
				continue
			}
			seen[n] = true
			e := Entry{Name: n, Dir: d}
			t, err := OpenChecked(filepath.Join(d, n), id)
			if err != nil {
				e.Err = err
			} else {
				t.Close()
			}
			e.Meta, e.MetaErr = ReadMeta(d, n)
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
