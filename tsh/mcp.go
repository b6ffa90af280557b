package tsh

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/mcpconf"
	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/toolpath"
)

// mcpListing reads the MCP tools the host listed for this session
// (mcp-tools.json beside tools.json, read-only in the sandbox).
// tsh cannot reach an MCP server from inside the sandbox: the host starts
// servers and writes this file before tsh list, load, pin and which run.
// Outside an agent view there is none.
func (s *Shell) mcpListing() *mcpconf.Listing {
	if !s.Env.InAgentView() {
		return &mcpconf.Listing{}
	}
	p, err := s.statePath()
	if err != nil {
		return &mcpconf.Listing{}
	}
	l, err := mcpconf.ReadListing(filepath.Join(filepath.Dir(p), mcpconf.ListingFileName))
	if err != nil {
		fmt.Fprintf(s.Stderr, "tsh: warning: %v\n", err)
		return &mcpconf.Listing{}
	}
	return l
}

// mcpTool finds name (SERVER.TOOL) in the listing, checked against the
// agent policy as for any tool (the listing is metadata, never authority).
func (s *Shell) mcpTool(name string) (mcpconf.ListedTool, bool, error) {
	if !strings.Contains(name, ".") {
		return mcpconf.ListedTool{}, false, nil
	}
	t, ok := s.mcpListing().Find(name)
	if !ok {
		return t, false, nil
	}
	if d := s.decideMCP(name); !d.Allowed {
		return t, true, &toolpath.Refusal{Tool: name, Layer: d.Layer, Reason: d.Reason}
	}
	return t, true, nil
}

func (s *Shell) decideMCP(name string) policy.Decision {
	ctl := s.Env.agentControl()
	if ctl == "" {
		return policy.Decision{Layer: policy.LayerAgent, Reason: "no agent control directory, failing closed"}
	}
	label, err := policy.ReadLabel(filepath.Join(ctl, "label"))
	if err != nil {
		return policy.Decision{Layer: policy.LayerAgent, Reason: "invalid label, failing closed: " + err.Error()}
	}
	return policy.DecideFiles(filepath.Join(ctl, "policy"), "", name, label)
}

// listMCP prints the listed MCP tools after the CTX_PATH tools, and on
// stderr the servers that could not start.
func (s *Shell) listMCP() {
	l := s.mcpListing()
	for _, t := range l.Tools {
		if !s.decideMCP(t.Name).Allowed {
			continue
		}
		if d := toolctx.Summary(t.Description); d != "" {
			fmt.Fprintf(s.Stdout, "%s\t%s\n", t.Name, d)
		} else {
			fmt.Fprintf(s.Stdout, "%s\n", t.Name)
		}
	}
	for _, e := range l.Errors {
		fmt.Fprintf(s.Stderr, "tsh: MCP server %s unavailable: %s\n", e.Server, toolctx.Summary(e.Error))
	}
}
