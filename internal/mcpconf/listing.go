package mcpconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/safefs"
)

// ListingFileName is the session file the host writes with the MCP tools
// that session's agent may call, for tsh (which runs inside the sandbox and
// cannot reach a server) to list and load. It is metadata: the host checks
// every call again, whatever this file says.
const ListingFileName = "mcp-tools.json"

// maxListing bounds the listing file when reading it.
const maxListing = 4 << 20

// Listing is the content of mcp-tools.json.
type Listing struct {
	Version int           `json:"version"`
	Tools   []ListedTool  `json:"tools"`
	Errors  []ServerError `json:"errors,omitempty"`
}

// ListedTool is one callable MCP tool: Name is SERVER.TOOL.
type ListedTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Schema is the input schema in compact form (mcphost.CompactSchema).
	Schema string `json:"schema,omitempty"`
	// Hints are the tool's annotations shown to people (read-only,
	// destructive): they grant nothing.
	Hints string `json:"hints,omitempty"`
}

// ServerError says why a server's tools are not listed.
type ServerError struct {
	Server string `json:"server"`
	Error  string `json:"error"`
}

// Find returns the listed tool called name.
func (l *Listing) Find(name string) (ListedTool, bool) {
	for _, t := range l.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return ListedTool{}, false
}

// ContextDescription is the text tsh keeps in the tool context for t: the
// description, then the compact argument schema and the hints.
func (t ListedTool) ContextDescription() string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(t.Description))
	if b.Len() == 0 {
		b.WriteString("MCP tool")
	}
	if t.Schema != "" {
		b.WriteString("\nargs: " + t.Schema + " (tsh call " + t.Name + " key=value… or --json '{…}')")
	}
	if t.Hints != "" {
		b.WriteString("\nhints: " + t.Hints)
	}
	return b.String()
}

// ReadListing reads a listing without following a symlink; an absent file
// is an empty listing.
func ReadListing(path string) (*Listing, error) {
	f, _, err := safefs.OpenRegular(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return &Listing{Version: 1}, nil
		}
		return nil, fmt.Errorf("mcp listing %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxListing+1))
	if err != nil {
		return nil, fmt.Errorf("mcp listing %s: %w", path, err)
	}
	if len(data) > maxListing {
		return nil, fmt.Errorf("mcp listing %s: over %d bytes", path, maxListing)
	}
	var l Listing
	if err := json.Unmarshal(data, &l); err != nil || l.Version != 1 {
		return nil, fmt.Errorf("mcp listing %s: not a version 1 listing (%v)", path, err)
	}
	return &l, nil
}

// WriteListing replaces the listing at path atomically, tools sorted.
func WriteListing(path string, l *Listing) error {
	l.Version = 1
	sort.Slice(l.Tools, func(i, j int) bool { return l.Tools[i].Name < l.Tools[j].Name })
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("mcp listing: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("mcp listing: %w", err)
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o644)
}
