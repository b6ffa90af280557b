package tool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/internal/envelope"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/toolpath"
)

// prepared is a call that passed every check.
type prepared struct {
	argv []string       // inside the sandbox
	tool *toolpath.Tool // the checked file of a direct-native tool, bound over argv[0]
	mcp  *mcpPrepared   // an MCP tool call: no process of its own
}

// Layer names of refusals recorded in tool_result frames (V3). The
// toolpath layers (name, path, nofollow, regular, noexec, mode) and the
// policy layers (agent-policy, tool-policy) come from their packages.
const (
	LayerDirectNative = "direct-native"
	LayerMount        = "mount"
	LayerChanged      = "changed" // the checked file changed before it could run
	LayerApproval     = "approval"
	LayerSandbox      = "sandbox"
)

// check resolves the call and checks every authority layer, off the actor
// (V3: the intersection of the direct-native declaration, CTX_PATH
// visibility, mount visibility, the nofollow regular-file check, noexec
// placement, Linux uid/gid/groups/mode bits, agent policy and tool policy).
// Any layer refuses alone; prompt text has no say in any of them (D10).
func check(ctx context.Context, cfg *config.Config, call Call) (*prepared, *Result) {
	deny := func(layer, why string) (*prepared, *Result) {
		return nil, &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusDenied,
			Content: fmt.Sprintf("denied by %s: %s", layer, why), Layer: layer}
	}
	def := call.View.Def
	if err := layout.CheckName("tool", call.Name); err != nil {
		return deny(toolpath.LayerName, err.Error())
	}
	declared := call.Name == "tsh" // spec: K1 — the one direct-native tool
	for _, t := range def.Tools {
		declared = declared || t == call.Name
	}
	if !declared { // spec: K2
		return deny(LayerDirectNative, fmt.Sprintf("%q is not tsh and not declared in %s", call.Name, filepath.Join(def.Control, "tools")))
	}
	target := call.Name
	if call.Name == "tsh" {
		target = ""
		if len(call.Args) >= 2 && call.Args[0] == "call" {
			target = call.Args[1] // the tool tsh would run: checked here first, and again by tsh
		}
		tsh := filepath.Join(cfg.Layout.BinDir(), "tsh")
		if st, err := os.Lstat(tsh); err != nil || !st.Mode().IsRegular() {
			return deny(toolpath.LayerPath, "tsh is not installed in "+cfg.Layout.BinDir())
		}
	}
	if target != "" && call.Name == "tsh" {
		// SERVER.TOOL of a declared MCP server is called by the host.
		decl, err := mcpTarget(cfg, call.View, target)
		if err != nil {
			return deny(LayerMCP, "MCP declarations are invalid, failing closed: "+err.Error())
		}
		if decl != nil {
			return checkMCP(ctx, cfg, call, target, decl, call.Args[2:])
		}
	}
	if target == "" {
		if len(call.Args) > 0 && listingCommands[call.Args[0]] {
			refreshListing(ctx, cfg, call.View) // what tsh lists and loads of MCP servers
		}
		// tsh's own commands (list, load, pin, context, which …): run tsh.
		return &prepared{argv: append([]string{layout.SandboxRoot + "/bin/tsh"}, call.Args...)}, nil
	}
	tool, res := authorize(cfg, call, target)
	if res != nil {
		return nil, res
	}
	args := call.Args
	if call.Name == "tsh" {
		// `tsh call X ARGS…`: the host has resolved and checked X exactly as
		// tsh would (CTX_PATH, nofollow, regular, noexec, mode, policy), so
		// it runs the checked file itself, with tsh's argv and environment,
		// and saves starting tsh. What runs is still the file that was checked.
		args = call.Args[2:]
	}
	sandboxDir := sandboxDirOf(cfg, def.CTXPath, tool.Dir)
	return &prepared{argv: append([]string{sandboxDir + "/" + target}, args...), tool: tool}, nil
}

// authorize resolves target through the agent's CTX_PATH (mapped to host
// paths) and checks the filesystem and policy layers.
func authorize(cfg *config.Config, call Call, target string) (*toolpath.Tool, *Result) {
	def := call.View.Def
	deny := func(layer, why string) (*toolpath.Tool, *Result) {
		return nil, &Result{CallID: call.CallID, Name: call.Name, Status: envelope.StatusDenied,
			Content: fmt.Sprintf("denied by %s: %s: %s", layer, target, why), Layer: layer}
	}
	var hostDirs []string
	visible := map[string]bool{}
	for _, d := range toolpath.SplitPath(def.CTXPath) {
		h, ok := cfg.Layout.HostPath(d)
		if !ok {
			continue // outside /ctx: not a tool directory the sandbox can show
		}
		hostDirs = append(hostDirs, h)
		visible[h] = h == cfg.Layout.ToolDir() || h == cfg.Layout.UserToolDir()
	}
	id := toolpath.Identity{UID: def.UID, GID: def.GID, Groups: def.Groups}
	t, err := toolpath.Resolve(target, hostDirs, id)
	if err != nil {
		var r *toolpath.Refusal
		if errors.As(err, &r) {
			return deny(r.Layer, r.Reason)
		}
		return deny(toolpath.LayerPath, err.Error())
	}
	if !visible[t.Dir] { // spec: V3 — mount visibility
		t.Close()
		return deny(LayerMount, t.Dir+" is on CTX_PATH but not mounted in the sandbox (only tool/ and home/<uid>/tool/ are)")
	}
	d := sandbox.DecideTool(def, t.Dir, target) // the same verdict decides what the view shows
	if !d.Allowed {                             // spec: V3 — both policy layers must allow
		t.Close()
		return deny(d.Layer, d.Reason)
	}
	return t, nil
}

// sandboxDirOf maps a host tool directory back to its CTX_PATH entry.
func sandboxDirOf(cfg *config.Config, ctxPath, hostDir string) string {
	for _, d := range strings.Split(ctxPath, ":") {
		if h, ok := cfg.Layout.HostPath(d); ok && h == hostDir {
			return filepath.Clean(d)
		}
	}
	return layout.SandboxRoot + "/tool"
}
