package agentdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/mcpconf"
)

// ACPLaunch is .d/acp.json of an acp-v1 agent: how to
// start an installed ACP agent. Command, when set, is an absolute host path
// run at the same path inside the sandbox, and Binds are host paths of its
// installation bound read-only at the same path (what `ctx agent create
// --abi acp-v1` computes for an npm bin: node, the script, its
// node_modules). Without Command the agent object itself runs, with Args.
// Env names keys whose values come from the owner-only file
// home/<uid>/secrets/agent/<name>.env; only this agent's process gets them.
type ACPLaunch struct {
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Binds   []string `json:"binds,omitempty"`
	Env     []string `json:"env,omitempty"`
}

// MaxACPArgs bounds the arguments of an ACP agent's command line.
const MaxACPArgs = 64

// ParseACP parses and validates .d/acp.json: one JSON object, unknown
// fields refused.
func ParseACP(b []byte) (*ACPLaunch, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l ACPLaunch
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf(".d/acp.json: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf(".d/acp.json: more than one JSON value")
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// Validate checks a launch declaration: an absolute clean command, binds
// outside what the view owns (mcpconf.CheckBind), valid env key names.
func (l *ACPLaunch) Validate() error {
	if l.Command != "" && (!filepath.IsAbs(l.Command) || filepath.Clean(l.Command) != l.Command) {
		return fmt.Errorf(".d/acp.json: command %q: want an absolute clean host path", l.Command)
	}
	if l.Command != "" {
		if err := mcpconf.CheckBind(l.Command); err != nil {
			return fmt.Errorf(".d/acp.json: command: %v", err)
		}
	}
	if len(l.Args) > MaxACPArgs {
		return fmt.Errorf(".d/acp.json: more than %d args", MaxACPArgs)
	}
	for _, b := range l.Binds {
		if err := mcpconf.CheckBind(b); err != nil {
			return fmt.Errorf(".d/acp.json: %v", err)
		}
	}
	for _, k := range l.Env {
		if err := mcpconf.CheckEnvName(k); err != nil {
			return fmt.Errorf(".d/acp.json: %v", err)
		}
		if strings.HasPrefix(k, "CTX_") {
			return fmt.Errorf(".d/acp.json: env %q: CTX_ variables are runtime-held", k)
		}
	}
	return nil
}

// Marshal is the file's text (validated, indented, LF-terminated).
func (l *ACPLaunch) Marshal() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, fmt.Errorf(".d/acp.json: %w", err)
	}
	return append(b, '\n'), nil
}
