package sandbox

import (
	"fmt"
	"os"

	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/workspace"
)

// What a started view holds until its sandbox ends: the placeholders of
// absent protected names and their warnings.

// Held is what a built view holds on the host.
type Held struct {
	files    []*os.File
	releases []func()
	warnings []string
	// absent: the absent sources (by kind) opened once per view;
	// each bind gets a duplicate (bwrap closes a --bind-fd descriptor).
	absent     map[string]*os.File
	absentPath map[string]string
}

// absentSource is a new descriptor of the absent source for the protected
// name (workspace.AbsentSource), each source checked once per view.
func (h *Held) absentSource(runtime, name string) (*os.File, string, error) {
	i := "file"
	switch {
	case workspace.IsDirName(name):
		i = "dir"
	case name == ".mcp.json":
		i = name
	}
	if h.absent == nil {
		h.absent, h.absentPath = map[string]*os.File{}, map[string]string{}
	}
	if h.absent[i] == nil {
		f, p, err := workspace.AbsentSource(runtime, name)
		if err != nil {
			return nil, "", err
		}
		h.files = append(h.files, f) // closed by Started
		h.absent[i], h.absentPath[i] = f, p
	}
	f, err := safefs.Dup(h.absent[i])
	if err != nil {
		return nil, "", fmt.Errorf("absent source: %w", err)
	}
	return f, h.absentPath[i], nil
}

// Warnings are what the run should be told about this sandbox: a
// directory bound read-only because its protected paths could not all be
// found, and the grant that lifts it.
func (h *Held) Warnings() []string {
	if h == nil {
		return nil
	}
	return h.warnings
}

// Started closes the descriptors bwrap inherited (it has its own copies).
func (h *Held) Started() {
	if h == nil {
		return
	}
	for _, f := range h.files {
		f.Close()
	}
	h.files = nil
	h.absent = nil
}

// Ended releases the placeholders (the last use removes them) and closes
// what Started did not.
func (h *Held) Ended() {
	if h == nil {
		return
	}
	h.Started()
	for _, r := range h.releases {
		r()
	}
	h.releases = nil
}
